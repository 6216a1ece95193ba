#!/bin/bash
# e2e_tunnel_fronting.sh - a tenant trying to reach another host through a
# tunnel to an allowed one (docs/pinhole-proxy.md, TUNNEL INSPECTION), with
# first flights crafted byte by byte towards the byte-recording upstream:
#   - a ClientHello naming the CONNECT host but offering Encrypted Client
#     Hello (the server would route on the encrypted inner name):
#     sni_encrypted, with an alert;
#   - a second ClientHello after a HelloRetryRequest naming another server
#     (an OpenSSL server reads it as it read the first): sni_mismatch, the
#     server never sees the name, whether the client waited for the
#     HelloRetryRequest or sent the second hello with the first; openssl
#     s_client through a HelloRetryRequest naming the host twice passes;
#   - a hello after a ChangeCipherSpec or an alert record, a hello with two
#     server_name extensions, one naming the host with a trailing dot: each
#     refused with its reason;
#   - HTTP/1 in clear: two Host fields, a Host folded onto a second line, an
#     HTTP/2 prior-knowledge preface, a Host naming another port: refused;
#     Upgrade (h2c, websocket) is not forwarded;
#   - forwarding: a kept-alive upstream is not reused for another host
#     whose name resolves to the same address.
# The upstream receives no byte of any refused flight.
# Usage: e2e_tunnel_fronting.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_forward_peer
e2e_start_proxy
D=$E2E_DOMAIN
RECV=$E2E_TMP/up/recv.bin

# Each TLS flight in its own tunnel to tls.<domain> (default rule: TLS or
# HTTP/1) on the recording upstream; prints what the client got back: the
# alert's description byte, "closed" without one.
check "TLS flights: ECH, CCS first, alert first, two server_name, trailing dot" \
    "alert 49|closed|closed|alert 49|alert 49" \
    "$(PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "tls.$D" "$UP" 2>&1 <<'PY'
import sys
from tunnel_http import client_hello, tls_ext, tunnel, u16
port, tok, host, up = sys.argv[1:]
# An outer ECH extension: type outer, HKDF-SHA256, AES-128-GCM, config id,
# enc, payload (what a real or a GREASE one holds; the proxy reads none of it).
ech = tls_ext(0xfe0d, b"\x00\x00\x01\x00\x01\x07" + u16(bytes(32)) + u16(bytes(64)))
flights = [
    client_hello([host], ech),
    b"\x14\x03\x03\x00\x01\x01" + client_hello([host]),
    b"\x15\x03\x03\x00\x02\x01\x00" + client_hello([host]),
    client_hello([host, "evil.test"]),
    client_hello([host + "."]),
]
out = []
for flight in flights:
    s, r = tunnel(port, tok, f"{host}:{up}")
    s.sendall(flight)
    got = r.read()
    out.append(f"alert {got[6]}" if got[:1] == b"\x15" and len(got) == 7 else
               "closed" if got == b"" else repr(got[:20]))
print("|".join(out))
PY
)"
check "the log says why: sni_encrypted (with the outer name), protocol_not_allowed x2, tls_malformed x2" \
    "1 2 2" \
    "$(e2e_log_lines "r.get('reason') == 'sni_encrypted' and r.get('sni') == 'tls.$D'") $(e2e_log_lines "r.get('reason') == 'protocol_not_allowed'") $(e2e_log_lines "r.get('reason') == 'tls_malformed'")"
check "sni_encrypted counted" "1" \
    "$(e2e_wait_metric 'pinhole_proxy_requests_total{verdict="refused",reason="sni_encrypted"}' 1)"
check "the upstream received no byte of those flights" "0" "$(stat -c %s "$RECV" 2>/dev/null || echo 0)"

# HTTP/1 in clear in a tunnel to web.<domain> (protocol http).
check "HTTP in a tunnel: two Host, folded Host, h2c preface, another port" \
    "400 http_bad_field|400 http_obs_fold|400 http_bad_request_line|403 host_mismatch" \
    "$(PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "web.$D" "$UP" 2>&1 <<'PY'
import sys
from tunnel_http import response, tunnel
port, tok, host, up = sys.argv[1:]
reqs = [
    f"GET /two-host HTTP/1.1\r\nHost: {host}:{up}\r\nHost: evil.test\r\n\r\n",
    f"GET /folded HTTP/1.1\r\nHost: {host}:{up}\r\nX-A: 1\r\n Host: evil.test\r\n\r\n",
    "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    f"GET /port HTTP/1.1\r\nHost: {host}:{int(up) + 1}\r\n\r\n",
]
out = []
for req in reqs:
    s, f = tunnel(port, tok, f"{host}:{up}")
    s.sendall(req.encode("latin-1"))
    status, _, reason = response(f)
    out.append(f"{status[9:12]} {reason or '-'}" + ("" if f.read() == b"" else " open"))
print("|".join(out))
PY
)"
check "the upstream received none of them" "0" "$(stat -c %s "$RECV" 2>/dev/null || echo 0)"

# Upgrade: the upstream never sees a request to switch protocols (h2c with
# its settings, a WebSocket), so a stream it would route on another name
# cannot start.
PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "web.$D" "$UP" \
    >"$E2E_TMP/upgrade.out" 2>&1 <<'PY'
import sys
from tunnel_http import response, tunnel
port, tok, host, up = sys.argv[1:]
s, f = tunnel(port, tok, f"{host}:{up}")
s.sendall(f"GET /h2c HTTP/1.1\r\nHost: {host}:{up}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
          "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n".encode())
a = response(f)
s.sendall(f"GET /ws HTTP/1.1\r\nHost: {host}:{up}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
          "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n".encode())
b = response(f)
print(a[0][:12], a[1], b[0][:12], b[1])
PY
check "Upgrade requests answered as plain requests" "HTTP/1.1 200 hello /h2c HTTP/1.1 200 hello /ws" \
    "$(cat "$E2E_TMP/upgrade.out")"
check "the upstream got them without Upgrade, Connection or HTTP2-Settings" "2 0" \
    "$(grep -c '^GET /\(h2c\|ws\) ' "$RECV") $(grep -ci '^\(upgrade\|connection\|http2-settings\):' "$RECV")"

# HelloRetryRequest. A TLS 1.3 server (Python's ssl, OpenSSL's) that notes
# every name its servername callback is asked about: a hello offering no key
# share gets a HelloRetryRequest, and the client's second hello names
# another server. The TLS server takes P-384 only: a client offering an
# X25519 key share gets a HelloRetryRequest.
e2e_start_tls -groups P-384
/usr/bin/python3 - "$E2E_TMP/tls.crt" "$E2E_TMP/tls.key" "$E2E_TMP/names" 2>"$E2E_TMP/names.err" <<'PY' &
import os, socket, ssl, sys, threading
crt, key, names = sys.argv[1:]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(crt, key)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
def named(sobj, name, c):
    with open(names, "a") as f:
        f.write(f"{name}\n")
ctx.sni_callback = named
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen()
with open(names + ".port.tmp", "w") as f:
    f.write(str(ls.getsockname()[1]))
os.rename(names + ".port.tmp", names + ".port")
def serve(c):
    try:
        ctx.wrap_socket(c, server_side=True).close()
    except (OSError, ssl.SSLError):
        c.close()
while True:
    threading.Thread(target=serve, args=(ls.accept()[0],), daemon=True).start()
PY
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 200); do [ -s "$E2E_TMP/names.port" ] && break; sleep 0.025; done
HRR_PORT=$(cat "$E2E_TMP/names.port")
check "a second hello after a HelloRetryRequest: another name refused (waited, sent early), the host passes" \
    "HRR alert 49|HRR alert 49|HRR ServerHello" \
    "$(PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "tls.$D" "$HRR_PORT" 2>&1 <<'PY'
import os, sys
from tunnel_http import client_hello, tunnel, u16
port, tok, host, up = sys.argv[1:]
sid, rnd = os.urandom(32), os.urandom(32)
hello = lambda name, share: client_hello([name], share=share, sid=sid, rnd=rnd)
HRR = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
CCS = b"\x14\x03\x03\x00\x01\x01"
second = lambda name: CCS + hello(name, b"\x00\x1d" + u16(os.urandom(32)))
def answer(got):
    """The server's HelloRetryRequest record, if first (and the dummy
    change_cipher_spec records), then the alert or the ServerHello."""
    pre = ""
    while (got[:1] == b"\x16" and HRR in got[:64]) or got[:1] == b"\x14":
        pre = "HRR " if got[:1] == b"\x16" else pre
        got = got[5 + int.from_bytes(got[3:5], "big"):]
    if got == b"":
        return pre.strip()
    if got[:1] == b"\x15" and len(got) == 7:
        return f"{pre}alert {got[6]}"
    return pre + ("ServerHello" if got[:1] == b"\x16" else repr(got[:16]))
out = []
for name, early in (("evil.test", False), ("evil.test", True), (host, False)):
    s, f = tunnel(port, tok, f"{host}:{up}")
    if early:
        s.sendall(hello(host, b"") + second(name))
        out.append(answer(f.read()))
        continue
    s.sendall(hello(host, b""))
    first = answer(s.recv(4096))
    s.sendall(second(name))
    out.append(f"{first} {answer(s.recv(4096))}")
    s.close()
print("|".join(out))
PY
)"
check "the server was asked about the host only" "tls.$D" "$(sort -u "$E2E_TMP/names")"
check "the log says sni_mismatch with the second hello's name" "2" \
    "$(e2e_log_lines "r.get('reason') == 'sni_mismatch' and r.get('sni') == 'evil.test'")"
check "openssl s_client through a HelloRetryRequest (X25519 offered, P-384 taken): two hellos, verified" \
    "2 0" \
    "$(echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -proxy_user lease1 \
        -proxy_pass "pass:$TOKEN" -connect "tls.$D:$TLS_PORT" -servername "tls.$D" -groups X25519:P-384 \
        -CAfile "$E2E_TMP/tls.crt" -verify_return_error -msg >"$E2E_TMP/p384.client" 2>&1
       rc=$?
       echo "$(grep -c '^>>> .*ClientHello' "$E2E_TMP/p384.client") $rc")"

# Forwarding: two allowed hosts whose names resolve to the one address, on
# one client connection: each request gets an upstream connection of its
# own host (a kept-alive one is keyed by host, port, grant and address).
: >"$E2E_TMP/up/conns"
check "forwarding: web then tls on one client connection" "200 - 200 - BODY hello /second" \
    "$($UPEER raw "$PROXY_PORT" "GET http://web.$D:$UP/first HTTP/1.1\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\nGET http://tls.$D:$UP/second HTTP/1.1\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\n" | tr '\n' ' ' | sed 's/ $//')"
check "two upstream connections, one per host" "2" "$(wc -l <"$E2E_TMP/up/conns")"
e2e_finish
