#!/bin/bash
# e2e_pinned_dial.sh - gate 6: the tunnel goes to an address that was
# checked, never to another. A name with three loopback addresses (the
# test-loopback build allows 127.0.0.0/8): on the first nothing listens, on
# the other two the upstream does and records the local address of every
# connection. Every tunnel's log line must name in `dialed` one of the
# addresses of the answer, and the upstream must have seen each connection on
# exactly the address that line names. A name whose answer adds a private
# address is refused before any dial. The log line does not list the checked
# addresses, so `dialed` is compared with the set dnsmasq is configured with
# (the answer the proxy checked).
# Usage: e2e_pinned_dial.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"
D=$E2E_DOMAIN
REFUSING=127.0.0.2 LISTENING="127.0.0.3 127.0.0.4"

# The upstream: a port the kernel gave on 127.0.0.3, the same port on
# 127.0.0.4 (a new one if that is taken) and on 127.0.0.2 bound but not
# listening (connections refused; nobody else can listen there meanwhile).
# Prints the port, then "accepted ADDR:PORT" per connection.
/usr/bin/python3 - $REFUSING $LISTENING >"$E2E_TMP/upstream.out" 2>"$E2E_TMP/upstream.err" <<'PY' &
import select, socket, sys
refusing, listening = sys.argv[1], sys.argv[2:]
for _ in range(20):
    socks = []
    try:
        first = socket.socket(); socks.append(first)
        first.bind((listening[0], 0))
        port = first.getsockname()[1]
        for a in listening[1:] + [refusing]:
            s = socket.socket(); socks.append(s)
            s.bind((a, port))
        break
    except OSError:
        for s in socks:
            s.close()
else:
    sys.exit("no port free on every address")
for s in socks[:len(listening)]:
    s.listen(64)
print(port, flush=True)
while True:
    for s in select.select(socks[:len(listening)], [], [])[0]:
        c = s.accept()[0]
        print("accepted %s:%d" % c.getsockname(), flush=True)
        c.close()
PY
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 100); do [ -s "$E2E_TMP/upstream.out" ] && break; sleep 0.05; done
UP_PORT=$(head -n 1 "$E2E_TMP/upstream.out")
[ -n "$UP_PORT" ] || { fail "upstream did not start: $(cat "$E2E_TMP/upstream.err")"; e2e_finish; }

records=()
for a in $REFUSING $LISTENING; do records+=("--host-record=multi.$D,$a"); done
records+=("--host-record=multi-private.$D,127.0.0.3" "--host-record=multi-private.$D,10.0.0.7")
e2e_dnsmasq --local=/#/ "${records[@]}"
e2e_make_policy
"$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/pinned-dial-allowlist.yaml" \
    -o "$E2E_TMP/table.ptab" >/dev/null || { fail "policyc compile"; e2e_finish; }
e2e_start_proxy

connect() { # HOST: the CONNECT's status code
    printf 'CONNECT %s:%s HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n' "$1" "$UP_PORT" "$TOKEN" |
        timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; head -c 12 <&3" |
        awk '{print $2}'
}
N=6
codes=""
for _ in $(seq 1 $N); do codes="$codes$(connect multi.$D) "; done
check "$N CONNECTs to a name with 3 addresses (one refusing)" "$(printf '200 %.0s' $(seq 1 $N))" "$codes"
check "a private address among the answer: refused" "403" "$(connect multi-private.$D)"

# The log lines, written when each tunnel ends (after the upstream printed
# its accept and closed): wait for all N.
dialed() {
    /usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "connection" and r.get("host") == sys.argv[2]:
        print(r.get("status"), r.get("dialed"))' "$E2E_TMP/proxy.log" "$1"
}
for _ in $(seq 1 100); do [ "$(dialed multi.$D | wc -l)" -ge $N ] && break; sleep 0.05; done
configured=" $(for a in $REFUSING $LISTENING; do printf '%s:%s ' "$a" "$UP_PORT"; done)"
bad=$(dialed multi.$D | while read -r st addr; do
    case "$configured" in *" $addr "*) [ "$st" = 200 ] || echo "$st $addr" ;; *) echo "$st $addr" ;; esac
done)
seen=$(dialed multi.$D | awk '{print $2}' | sort | uniq -c | awk '{print $2 " x" $1}' | paste -sd' ' -)
check "every tunnel dialed one of the answer's addresses ($seen; answer:$configured)" "" "$bad"
check "none was left on the refusing address" "0" "$(dialed multi.$D | grep -c " $REFUSING:")"
check "the upstream saw each tunnel on the address its log line names" \
    "$(dialed multi.$D | awk '{print $2}' | sort | paste -sd' ' -)" \
    "$(sed -n 's/^accepted //p' "$E2E_TMP/upstream.out" | sort | paste -sd' ' -)"
check "the refused name was never dialed" "403 None" "$(dialed multi-private.$D)"
# Passing over the refusing address must leave the proxy sound: it stops on
# SIGTERM (nothing is open) within 5 s, with status 0.
kill -TERM "$PROXY_PID"
for _ in $(seq 1 100); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$PROXY_PID" 2>/dev/null; then
    fail "proxy still running 5 s after SIGTERM ($(ps -o pcpu= -p "$PROXY_PID")% CPU)"
    kill -KILL "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null
else
    wait "$PROXY_PID"; check "SIGTERM: the proxy exits 0 at once" "0" "$?"
fi
e2e_finish
