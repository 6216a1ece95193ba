#!/bin/bash
# e2e_forward_client_gone.sh - a forwarded request whose client goes away
# while the upstream has not answered yet: a client that resets its
# connection ends the request at once (end=client_closed), the upstream
# connection is closed and the lease slot freed, not held until the
# upstream answers (idle_timeout_s here is 300 s). A client that half-closes
# after its request still gets its answer. The upstream's /hold answers
# nothing and records when the proxy closed its connection.
# Usage: e2e_forward_client_gone.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
# One slot per lease: a slot held for a client that is gone shows as a 429.
e2e_start_proxy --max-connections-per-lease 1
D=$E2E_DOMAIN
e2e_start_forward_peer

# gone_client KIND: sends a request for /hold, waits until the upstream has
# it, then leaves: "reset" (SO_LINGER 0: a TCP reset) or "pipelined-reset"
# (a second request's first bytes sent along, then the reset).
gone_client() {
    /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "ok.$D:$UP" "$E2E_TMP/up/recv.bin" "$1" <<'PY'
import socket, struct, sys, time
port, token, authority, recv, kind = sys.argv[1:]
req = ("GET http://%s/hold HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n"
       % (authority, token)).encode()
if kind == "pipelined-reset":
    req += b"GET http://" + authority.encode() + b"/next HTTP/1.1\r\n"
before = open(recv, "rb").read().count(b"GET /hold ")
s = socket.create_connection(("127.0.0.1", int(port)))
s.sendall(req)
deadline = time.monotonic() + 10
while open(recv, "rb").read().count(b"GET /hold ") == before:
    if time.monotonic() > deadline:
        print("upstream never got the request"); sys.exit(1)
    time.sleep(0.02)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
print("gone")
PY
}

# The proxy's request line for the n-th /hold request (its end), waited for
# up to 5 s.
hold_end() {
    for _ in $(seq 1 100); do
        e=$(grep '"event":"request"' "$E2E_TMP/proxy.log" | grep -c '"end":"client_closed"')
        [ "$e" -ge "$1" ] && { echo "client_closed"; return; }
        sleep 0.05
    done
    echo "none: $(grep '"event":"request"' "$E2E_TMP/proxy.log" | tail -n 1)"
}
# The upstream's record of the n-th /hold (closed within 5 s?).
up_closed() {
    for _ in $(seq 1 100); do
        [ "$(wc -l <"$E2E_TMP/up/hold" 2>/dev/null || echo 0)" -ge "$1" ] && break
        sleep 0.05
    done
    sed -n "${1}p" "$E2E_TMP/up/hold" | awk '{print ($1 == "closed" && $2 < 5) ? "closed" : $0}'
}

check "reset client" "gone" "$(gone_client reset)"
check "reset client: the request ends client_closed" "client_closed" "$(hold_end 1)"
check "reset client: the upstream connection is closed" "closed" "$(up_closed 1)"
check "reset client: its lease slot is free again" "200" \
    "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 -x "http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT" "http://ok.$D:$UP/hello")"

check "reset client with a pipelined request's first bytes" "gone" "$(gone_client pipelined-reset)"
check "pipelined: the request ends client_closed" "client_closed" "$(hold_end 2)"
check "pipelined: the upstream connection is closed" "closed" "$(up_closed 2)"

# A half-close after the request is not a client gone: the answer comes.
out=$($UPEER raw "$PROXY_PORT" "GET http://ok.$D:$UP/hello HTTP/1.1\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\n")
check "half-closed client still gets its answer" "200 - BODY hello /hello" \
    "$(printf '%s\n' "$out" | tr '\n' ' ' | sed 's/ $//')"

e2e_finish
