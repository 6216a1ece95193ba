#!/bin/bash
# e2e_tunnel_fronting.sh - a tenant trying to reach another host through a
# tunnel to an allowed one (docs/pinhole-proxy.md, TUNNEL INSPECTION), with
# first flights crafted byte by byte towards the byte-recording upstream:
#   - a ClientHello naming the CONNECT host but offering Encrypted Client
#     Hello (the server would route on the encrypted inner name):
#     sni_encrypted, with an alert;
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
import struct, sys
from tunnel_http import tunnel
port, tok, host, up = sys.argv[1:]
def u16(b): return struct.pack(">H", len(b)) + b
def ext(t, body): return struct.pack(">H", t) + u16(body)
def sni(name):
    n = name.encode()
    return ext(0, u16(b"\x00" + u16(n)))
def hello(exts):
    body = b"\x03\x03" + bytes(32) + b"\x00" + u16(b"\x13\x01") + b"\x01\x00" + u16(exts)
    msg = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + u16(msg)
# An outer ECH extension: type outer, HKDF-SHA256, AES-128-GCM, config id,
# enc, payload (what a real or a GREASE one holds; the proxy reads none of it).
ech = ext(0xfe0d, b"\x00\x00\x01\x00\x01\x07" + u16(bytes(32)) + u16(bytes(64)))
flights = [
    hello(sni(host) + ech),
    b"\x14\x03\x03\x00\x01\x01" + hello(sni(host)),
    b"\x15\x03\x03\x00\x02\x01\x00" + hello(sni(host)),
    hello(sni(host) + sni("evil.test")),
    hello(sni(host + ".")),
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

# Forwarding: two allowed hosts whose names resolve to the one address, on
# one client connection: each request gets an upstream connection of its
# own host (a kept-alive one is keyed by host, port, grant and address).
: >"$E2E_TMP/up/conns"
check "forwarding: web then tls on one client connection" "200 - 200 - BODY hello /second" \
    "$($UPEER raw "$PROXY_PORT" "GET http://web.$D:$UP/first HTTP/1.1\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\nGET http://tls.$D:$UP/second HTTP/1.1\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\n" | tr '\n' ' ' | sed 's/ $//')"
check "two upstream connections, one per host" "2" "$(wc -l <"$E2E_TMP/up/conns")"
e2e_finish
