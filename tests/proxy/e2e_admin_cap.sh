#!/bin/bash
# e2e_admin_cap.sh - the admin listener (proxy/src/admin.c) holds at most
# max_admin_connections: idle connections past it are answered 503
# proxy_overloaded at once and closed (counted, logged as one JSON line),
# and once the held ones close the endpoints answer again. Its requests are
# framed strictly (bare LF: 400) and served one per connection, within 10 s
# of accept however slowly the request trickles in.
# Usage: e2e_admin_cap.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --workers 1 --max-admin-connections 2

out=$(/usr/bin/python3 - "$ADMIN_PORT" <<'PY'
import socket, sys, time
port = int(sys.argv[1])

def ask(req, keep=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(req)
    data = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        data += d
    s.close()
    head = data.split(b"\r\n\r\n")[0].split(b"\r\n")
    reason = [l.split(b": ", 1)[1] for l in head if l.lower().startswith(b"pinhole-reason:")]
    return "%s %s" % (head[0].split()[1].decode() if head[0] else "none",
                      reason[0].decode() if reason else "-")

held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
# A first byte each (the listener defers accept until one came), then idle:
# half a request, held in its head.
held[0].sendall(b"G")
held[1].sendall(b"GET /heal")
time.sleep(0.3)
print("third", ask(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
print("fourth", ask(b"G"))
for s in held:
    s.close()
time.sleep(0.3)
print("after", ask(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
print("head", ask(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
print("unknown", ask(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"))
print("bare_lf", ask(b"GET /healthz HTTP/1.1\nHost: x\n\n"))
print("post_metrics", ask(b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"))
print("reload_body", ask(b"POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"))
print("reload_huge", ask(b"POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"))
PY
)
echo "$out" | sed 's/^/# /'
get() { echo "$out" | awk -v k="$1" '$1==k{print $2, $3}'; }
check "past the cap: refused at once" "503 proxy_overloaded" "$(get third)"
check "an idle one past the cap too" "503 proxy_overloaded" "$(get fourth)"
check "the held ones closed: served again" "200 -" "$(get after)"
check "HEAD" "200 -" "$(get head)"
check "an unknown path" "404 -" "$(get unknown)"
check "a bare LF" "400 -" "$(get bare_lf)"
check "POST /metrics" "405 -" "$(get post_metrics)"
check "POST /reload with a small body" "200 -" "$(get reload_body)"
check "POST /reload with a large body" "413 -" "$(get reload_huge)"
check "the refusals are counted" "2" "$(e2e_metric pinhole_proxy_admin_refused_total)"
check "the metrics answer" "0" "$(e2e_metric pinhole_proxy_tunnels_active)"
# An answer outlives what the client still sends: a client with a small
# receive buffer sends its whole request, body included, then reads. The
# admin stops parsing at the head (a refusal) or at the end of the request,
# and reads and drops the rest before it closes: closing on unread bytes
# would reset the connection and drop the answer's unsent bytes.
linger=$(/usr/bin/python3 - "$ADMIN_PORT" <<'PY'
import socket, sys
port = int(sys.argv[1])

def ask(name, req):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.settimeout(5)
    s.connect(("127.0.0.1", port))
    data = b""
    try:
        s.sendall(req)
        while True:
            d = s.recv(512)
            if not d:
                break
            data += d
        end = "eof"
    except OSError as e:
        end = e.strerror or type(e).__name__
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    code = lines[0].split()[1].decode() if len(lines[0].split()) > 1 else "none"
    clen = [int(l.split(b":", 1)[1]) for l in lines if l.lower().startswith(b"content-length:")]
    whole = bool(clen) and len(body) == clen[0]
    print(name, code, "whole" if whole else "cut", end, len(data))

body = b"x" * 50000
ask("huge", b"POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
ask("chunked", b"POST /reload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    + b"c350\r\n" + body + b"\r\n0\r\n\r\n")
ask("bad", b"GET /healthz HTTP/1.1\nHost: x\n\n" + body)
ask("pipelined", b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" +
    b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + body + b"\r\n\r\n")
# The lingering is bounded: a client that goes on sending (here 4 MiB
# without reading) is closed after 64 KiB, long before the deadline.
s = socket.create_connection(("127.0.0.1", port), timeout=5)
try:
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + b"x" * (4 << 20))
    print("flood sent")
except socket.timeout:
    print("flood timeout")
except OSError:
    print("flood cut")
s.close()
PY
)
echo "$linger" | sed 's/^/# /'
lget() { echo "$linger" | awk -v k="$1" '$1==k{print $2, $3, $4}'; }
check "413 to a large body, whole" "413 whole eof" "$(lget huge)"
check "413 to a chunked body, whole" "413 whole eof" "$(lget chunked)"
check "400 before a body, whole" "400 whole eof" "$(lget bad)"
check "/metrics before a pipelined request, whole" "200 whole eof" "$(lget pipelined)"
check "lingering ends after 64 KiB" "flood cut" "$(echo "$linger" | awk '$1=="flood"{print $0}')"
# A request trickled a byte every 2 s (each wait shorter than the 10 s
# timeout) is ended 10 s after accept: it cannot hold an admin slot for long.
slow=$(/usr/bin/python3 - "$ADMIN_PORT" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
t0 = time.monotonic()
req = b"GET /healthz HTTP/1.1\r\nX-" + b"a" * 40
for i in range(len(req)):
    if time.monotonic() - t0 > 20:
        break
    try:
        s.sendall(req[i:i + 1])
        s.settimeout(2)
        if s.recv(1) == b"":
            break
    except socket.timeout:
        continue
    except OSError:
        break
t = time.monotonic() - t0
print("closed after about 10 s" if 9.5 <= t < 14 else "closed after %.1f s" % t)
PY
)
# A HEAD answer has no body, a 405 too (RFC 9110 9.3.2).
headrl=$(/usr/bin/python3 - "$ADMIN_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"HEAD /reload HTTP/1.1\r\nHost: x\r\n\r\n")
data = b""
while True:
    d = s.recv(4096)
    if not d:
        break
    data += d
head, _, body = data.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].split()[1].decode(), "body", len(body))
PY
)
check "HEAD /reload: 405 without a body" "405 body 0" "$headrl"
check "a trickled admin request ends 10 s after accept" "closed after about 10 s" "$slow"
line=$(grep '"event":"admin_refused"' "$E2E_TMP/proxy.err" | head -1)
echo "# $line"
/usr/bin/python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["level"] == "warning" and "proxy_overloaded" in o["message"], o
assert "max_admin_connections 2" in o["message"], o
' "$line" && ok "the refusal is logged as a JSON line" || fail "log line: $line"
# Every line the proxy wrote on stderr is one JSON object (libevent's own
# messages included: they are routed through px_log_event).
bad=$(/usr/bin/python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    try:
        assert isinstance(json.loads(line), dict)
    except Exception:
        n += 1
print(n)
' "$E2E_TMP/proxy.err")
check "stderr holds JSON lines only" "0" "$bad"
e2e_finish
