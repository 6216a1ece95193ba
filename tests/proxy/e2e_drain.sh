#!/bin/bash
# e2e_drain.sh - what the main thread does while the workers drain
# (proxy/src/drain.c): the admin listener still answers (/readyz 503
# "draining"), a SIGHUP still reloads instead of killing the process (its
# default action once no handler is installed), and the open tunnel keeps
# relaying until it ends, then the proxy exits 0 with its log line written.
# Usage: e2e_drain.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --drain-timeout-s 20
D=$E2E_DOMAIN

# An echo upstream on a port the kernel chose.
/usr/bin/python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
print(s.getsockname()[1], flush=True)
c, _ = s.accept()
while True:
    b = c.recv(4096)
    if not b:
        break
    c.sendall(b)
' >"$E2E_TMP/echo.port" & E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 100); do [ -s "$E2E_TMP/echo.port" ] && break; sleep 0.05; done
ECHO_PORT=$(cat "$E2E_TMP/echo.port")

# The client: a tunnel, then one echo before and one after the signals
# (it waits for the file "go"), then it closes and the drain can end.
/usr/bin/python3 - "$PROXY_PORT" "ok.$D:$ECHO_PORT" "$TOKEN" "$E2E_TMP" >"$E2E_TMP/client.out" 2>&1 <<'PY' &
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(("CONNECT %s HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n" % (sys.argv[2], sys.argv[3])).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
print(head.split()[1].decode(), flush=True)
s.sendall(b"one"); print(s.recv(3).decode(), flush=True)
while not os.path.exists(sys.argv[4] + "/go"):
    time.sleep(0.05)
try:
    s.sendall(b"two"); print(s.recv(3).decode() or "closed", flush=True)
except OSError as e:
    print("error", e, flush=True)
s.close()
PY
CLIENT_PID=$!
for _ in $(seq 1 100); do [ "$(wc -l <"$E2E_TMP/client.out")" -ge 2 ] && break; sleep 0.05; done

kill -TERM "$PROXY_PID"
sleep 0.3
code=$(curl -s -m 3 -o "$E2E_TMP/readyz.body" -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/readyz")
check "readyz while draining" "503 draining" "$code $(tr -d '\r\n' <"$E2E_TMP/readyz.body")"
kill -HUP "$PROXY_PID"
sleep 0.3
kill -0 "$PROXY_PID" 2>/dev/null && ok "a SIGHUP while draining leaves the proxy running" ||
    fail "a SIGHUP while draining ended the proxy"
grep -q '"event":"reload"' "$E2E_TMP/proxy.err" && ok "the SIGHUP while draining reloaded" ||
    fail "no reload event while draining"
touch "$E2E_TMP/go"
wait "$CLIENT_PID"
check "tunnel relays across the drain" "200 one two" "$(tr '\n' ' ' <"$E2E_TMP/client.out" | sed 's/ $//')"
rc=0
for _ in $(seq 1 100); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.05; done
wait "$PROXY_PID"; rc=$?
check "exit status after the drain" 0 "$rc"
grep -q '"event":"stopped"' "$E2E_TMP/proxy.err" && ok "stopped event logged" || fail "no stopped event"
check "the tunnel's log line" 1 "$(grep -c '"status":200' "$E2E_TMP/proxy.log")"
E2E_PIDS=$(echo "$E2E_PIDS" | tr ' ' '\n' | grep -vx "$PROXY_PID" | tr '\n' ' ')
e2e_finish
