#!/bin/bash
# e2e_timeouts.sh - the relay's two deadlines (proxy/src/config.c):
# idle_timeout_s closes a tunnel on which nothing moved for that long,
# max_lifetime_s closes one that is still busy. Each is the end reason of the
# tunnel's log line. The proxy runs with idle 1 s and lifetime 3 s.
# Usage: e2e_timeouts.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --idle-timeout-s 1 --max-lifetime-s 3
D=$E2E_DOMAIN
PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >/dev/null & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$PEER_PORT"

# Idle: a tunnel to the peer that sends nothing either way (the peer waits
# for its 9-byte header). Prints the 200's status code and the seconds from
# the 200 to the proxy's close (or "open" after 8 s).
/usr/bin/python3 - "$PROXY_PORT" "ok.$D:$PEER_PORT" "$TOKEN" >"$E2E_TMP/idle.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(("CONNECT %s HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n" % (sys.argv[2], sys.argv[3])).encode())
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        break
    head += b
t0 = time.monotonic()
s.settimeout(8)
try:
    left = s.recv(1)
    print(head.split()[1].decode(), "%.2f" % (time.monotonic() - t0), repr(left))
except socket.timeout:
    print(head.split()[1].decode(), "open")
PY
IDLE_PID=$!

# Busy: 10 MB up at 200 kB/s (50 s of steady traffic, never idle for 1 s).
t0=$(date +%s.%N)
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN" 10000000 0 0 200000 \
    >"$E2E_TMP/busy.out" 2>&1
busy_rc=$?
busy_s=$(echo "$(date +%s.%N) - $t0" | bc)
wait "$IDLE_PID"

read -r idle_code idle_s idle_left <"$E2E_TMP/idle.out"
check "idle tunnel established" "200" "$idle_code"
[ "$idle_s" != open ] && [ "$(echo "$idle_s >= 0.9 && $idle_s < 3" | bc)" = 1 ] && [ "$idle_left" = "b''" ] &&
    ok "idle tunnel closed by the proxy after ${idle_s}s (idle_timeout_s 1)" ||
    fail "idle tunnel: $(cat "$E2E_TMP/idle.out")"
sent=$(awk '/^recv /{print $5}' "$E2E_TMP/busy.out")
[ "$busy_rc" != 0 ] && [ "${sent:-0}" -gt 0 ] && [ "$sent" -lt 10000000 ] &&
    [ "$(echo "$busy_s >= 2.9 && $busy_s < 5" | bc)" = 1 ] &&
    ok "busy tunnel cut after ${busy_s}s with $sent of 10000000 bytes sent (max_lifetime_s 3)" ||
    fail "busy tunnel: exit $busy_rc after ${busy_s}s: $(head -c 200 "$E2E_TMP/busy.out")"

# The log lines: one 200 tunnel ended idle_timeout with no bytes, one ended
# max_lifetime after relaying bytes upstream for about 3 s.
ends() {
    /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "connection" and r.get("status") == 200:
        print(r.get("end"), r.get("bytes_up"), round(r.get("duration_s")))' "$E2E_TMP/proxy.log" | sort
}
for _ in $(seq 1 100); do [ "$(ends | wc -l)" -ge 2 ] && break; sleep 0.05; done
check "log: end reason, bytes up, seconds of each tunnel ($(ends | paste -sd"|" -))" "idle_timeout 0 1|max_lifetime $(ends | awk '$1 == "max_lifetime" {print $2}') 3" \
    "$(ends | paste -sd'|' -)"
[ "$(ends | awk '$1 == "max_lifetime" {print ($2 > 0)}')" = 1 ] && ok "the busy tunnel relayed bytes until its end" ||
    fail "the busy tunnel relayed nothing: $(ends)"
e2e_finish
