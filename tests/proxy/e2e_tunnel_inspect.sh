#!/bin/bash
# e2e_tunnel_inspect.sh - a CONNECT tunnel's inspection with real clients
# (docs/pinhole-proxy.md, TUNNEL INSPECTION): curl, Python (ssl, urllib,
# requests), openssl s_client, wget, git and Node's undici naming the
# CONNECT host pass; s_client
# naming another host, or none, is refused with an alert and its reason,
# and the upstream receives no byte of its ClientHello; a hello sent one
# byte at a time passes; a client that sends nothing is closed at the
# deadline; a non-TLS protocol is refused; HTTP/1 in clear is served by the
# forwarding engine, each request's Host checked (host_mismatch); a rule's
# protocol: tcp lets an SSH-like exchange through uninspected, and a reload
# that takes it away ends such a tunnel; a reload that makes an HTTP
# tunnel's rule protocol tls ends that tunnel.
# Usage: e2e_tunnel_inspect.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_tls
e2e_start_forward_peer
# The deadline leaves a real client on a loaded machine ample time to send
# its hello after the 200; the client that sends nothing waits it out.
e2e_start_proxy --inspect-timeout-ms 4000
D=$E2E_DOMAIN
PURL="http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"

check "curl: the tunnel and the TLS server's 200" "200 - 200" "$(e2e_curl "lease1:$TOKEN" tls.$D:$TLS_PORT)"
check "Python urllib and requests through the inspection" "200 200" \
    "$(/usr/bin/python3 - "$PURL" "https://tls.$D:$TLS_PORT/" "$E2E_TMP/tls.crt" 2>&1 <<'PY'
import ssl, sys, urllib.request, requests
proxy, url, ca = sys.argv[1:]
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"https": proxy}),
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
a = opener.open(url, timeout=10).status
b = requests.get(url, proxies={"https": proxy}, verify=ca, timeout=10).status_code
print(a, b)
PY
)"
s_out=$(echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -proxy_user lease1 \
    -proxy_pass "pass:$TOKEN" -connect "tls.$D:$TLS_PORT" -servername "tls.$D" \
    -CAfile "$E2E_TMP/tls.crt" -verify_return_error 2>&1)
check "openssl s_client -servername tls: exit 0" "0" "$?"

# wget, git (a repository over HTTPS: the dumb protocol from a static
# server) and Node's undici (ProxyAgent) through the inspection, unchanged.
mkdir -p "$E2E_TMP/www"
git init -q "$E2E_TMP/work" &&
    git -C "$E2E_TMP/work" -c user.name=t -c user.email=t@t commit -q --allow-empty -m one &&
    git clone -q --bare "$E2E_TMP/work" "$E2E_TMP/www/repo.git" &&
    git -C "$E2E_TMP/www/repo.git" update-server-info || fail "git repository"
echo hello >"$E2E_TMP/www/hello.txt"
/usr/bin/python3 - "$E2E_TMP/www" "$E2E_TMP/tls.crt" "$E2E_TMP/tls.key" "$E2E_TMP/www.port" \
    2>"$E2E_TMP/www.err" <<'PY' &
import functools, http.server, os, ssl, sys
root, crt, key, portfile = sys.argv[1:]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(crt, key)
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
PY
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 200); do [ -s "$E2E_TMP/www.port" ] && break; sleep 0.025; done
WWW=$(cat "$E2E_TMP/www.port")
sni_before=$(grep -c '"sni":"tls.pinhole-e2e.test"' "$E2E_TMP/proxy.log")
check "wget over https through the inspection" "hello" \
    "$(https_proxy="$PURL" timeout 20 wget -q -O - --ca-certificate="$E2E_TMP/tls.crt" \
        "https://tls.$D:$WWW/hello.txt" 2>&1)"
check "git ls-remote and clone over https through the inspection" \
    "$(git -C "$E2E_TMP/work" rev-parse HEAD) 0" \
    "$(export https_proxy="$PURL" GIT_SSL_CAINFO="$E2E_TMP/tls.crt"
       printf '%s ' "$(timeout 30 git ls-remote "https://tls.$D:$WWW/repo.git" HEAD 2>&1 | cut -f1)"
       timeout 30 git clone -q "https://tls.$D:$WWW/repo.git" "$E2E_TMP/clone" >/dev/null 2>&1
       echo $?)"
check "Node's undici fetch (ProxyAgent) through the inspection" "200 hello" \
    "$(NODE_PATH="$PH_BINARY_DIR/guard/node/node_modules:/usr/lib/node_modules/npm/node_modules" \
        timeout 20 node - "$PROXY_PORT" "lease1:$TOKEN" "https://tls.$D:$WWW/hello.txt" \
        "$E2E_TMP/tls.crt" 2>&1 <<'JS'
const fs = require('fs');
const { fetch, ProxyAgent } = require('undici');
const [port, cred, url, ca] = process.argv.slice(2);
const dispatcher = new ProxyAgent({
  uri: `http://127.0.0.1:${port}`,
  token: 'Basic ' + Buffer.from(cred).toString('base64'),
  requestTls: { ca: fs.readFileSync(ca) },
});
fetch(url, { dispatcher }).then(async (r) => {
  console.log(r.status, (await r.text()).trim());
  process.exit(0);
}, (e) => { console.log('error', e.cause ? e.cause.message : e.message); process.exit(1); });
JS
)"
sni_after=$(grep -c '"sni":"tls.pinhole-e2e.test"' "$E2E_TMP/proxy.log")
check "their tunnels (wget, git twice or more, node) passed with the CONNECT host as SNI" "yes" \
    "$([ $((sni_after - sni_before)) -ge 4 ] && echo yes || echo $((sni_after - sni_before)))"

# Another name, and none, towards the byte-recording upstream: refused
# before a byte of the hello is relayed.
s_out=$(echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -proxy_user lease1 \
    -proxy_pass "pass:$TOKEN" -connect "tls.$D:$UP" -servername evil.test 2>&1)
check "s_client -servername evil.test: an access_denied alert" "1" \
    "$(printf '%s\n' "$s_out" | grep -c 'alert access denied')"
s_out=$(echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -proxy_user lease1 \
    -proxy_pass "pass:$TOKEN" -connect "tls.$D:$UP" -noservername 2>&1)
check "s_client without a server name: an access_denied alert" "1" \
    "$(printf '%s\n' "$s_out" | grep -c 'alert access denied')"
check "Python ssl with server_hostname=evil.test: refused with an alert" "alert" \
    "$(/usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "tls.$D:$UP" 2>&1 <<'PY'
import socket, ssl, sys
port, tok, dest = sys.argv[1:]
s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
s.sendall(f"CONNECT {dest} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
ctx = ssl.create_default_context()
try:
    ctx.wrap_socket(s, server_hostname="evil.test")
    print("handshake went on")
except ssl.SSLError as e:
    print("alert" if "ACCESS_DENIED" in str(e).upper() else f"other: {e}")
PY
)"
check "the upstream received no byte of those hellos" "0" \
    "$(stat -c %s "$E2E_TMP/up/recv.bin" 2>/dev/null || echo 0)"
check "the log says sni_mismatch with the name seen (s_client, Python)" "2" \
    "$(grep -c '"reason":"sni_mismatch".*"sni":"evil.test"' "$E2E_TMP/proxy.log")"
check "the log says sni_missing with sni null" "1" \
    "$(grep -c '"reason":"sni_missing".*"sni":null' "$E2E_TMP/proxy.log")"
check "metrics count the refusals by reason" "2 1" \
    "$(e2e_wait_metric 'pinhole_proxy_requests_total{verdict="refused",reason="sni_mismatch"}' 2) $(e2e_metric 'pinhole_proxy_requests_total{verdict="refused",reason="sni_missing"}')"

# Raw clients: a hello a byte at a time (it passes: the server answers
# with its ServerHello), a hello sent with the CONNECT head (whole, and its
# first half only), nothing at all (closed at the deadline), SSH.
check "a hello a byte at a time, with the head, half with the head; nothing; SSH" \
    "handshake handshake handshake closed closed" \
    "$(/usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "tls.$D" "$TLS_PORT" 2>&1 <<'PY'
import socket, ssl, sys
port, tok, host, tls_port = sys.argv[1:]
def tunnel(early=b""):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(f"CONNECT {host}:{tls_port} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode() + early)
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ssl.create_default_context().wrap_bio(inb, outb, server_hostname=host)
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
hello = outb.read()
s = tunnel()
for b in hello:
    s.send(bytes([b]))
out = []
def server_hello(s):
    # s_server serves one connection at a time: each ends before the next.
    first = s.recv(1)
    out.append("handshake" if first == b"\x16" else f"got {first!r}")
    s.close()
server_hello(s)
server_hello(tunnel(hello))
s = tunnel(hello[:len(hello) // 2])
s.sendall(hello[len(hello) // 2:])
server_hello(s)
for data in (b"", b"SSH-2.0-OpenSSH_9.2\r\n"):
    s = tunnel()
    s.sendall(data)
    out.append("closed" if s.recv(100) == b"" else "open")
print(" ".join(out))
PY
)"
# The CONNECT host is compared in its canonical form: an authority in
# capitals (a trailing dot is refused at the CONNECT: 400) is the host the hello names.
check "CONNECT TLS.<domain>:port with the hello for tls.<domain>" "handshake" \
    "$(/usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "tls.$D" "$TLS_PORT" 2>&1 <<'PY'
import socket, ssl, sys
port, tok, host, tls_port = sys.argv[1:]
s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
s.sendall(f"CONNECT {host.upper()}:{tls_port} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
obj = ssl.create_default_context().wrap_bio(inb, outb, server_hostname=host)
try:
    obj.do_handshake()
except ssl.SSLWantReadError:
    pass
s.sendall(outb.read())
print("handshake" if s.recv(1) == b"\x16" else head.split(b"\r\n")[0].decode())
PY
)"
check "the log says protocol_not_allowed for both" "2" \
    "$(grep -c '"reason":"protocol_not_allowed"' "$E2E_TMP/proxy.log")"
check "the one sending nothing was closed at inspect_timeout_ms" "1" \
    "$(grep -c '"reason":"protocol_not_allowed".*(inspect_timeout_ms)' "$E2E_TMP/proxy.log")"

# HTTP/1 in clear in a tunnel (web: protocol http): the first request, for
# the CONNECT host and port, is forwarded; the second, naming another host,
# is answered 403 host_mismatch and ends the connection, and the upstream
# receives none of its bytes.
: >"$E2E_TMP/up/recv.bin"
check "HTTP in a tunnel: the CONNECT host's request passes, another Host is refused" \
    "HTTP/1.1 200|hello /first|HTTP/1.1 403|host_mismatch|closed" \
    "$(PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "web.$D" "$UP" 2>&1 <<'PY'
import sys
from tunnel_http import response, tunnel
port, tok, host, up = sys.argv[1:]
s, f = tunnel(port, tok, f"{host}:{up}")
s.sendall(f"GET /first HTTP/1.1\r\nHost: {host}:{up}\r\n\r\n".encode())
st1, b1, _ = response(f)
s.sendall(f"GET /second HTTP/1.1\r\nHost: tls.pinhole-e2e.test:{up}\r\n\r\n".encode())
st2, b2, r2 = response(f)
rest = f.read()
print("|".join([st1[:12], b1, st2[:12], r2 or b2, "closed" if rest == b"" else "open"]))
PY
)"
check "the upstream got the first request and no byte of the second" "1 0" \
    "$(grep -c 'GET /first' "$E2E_TMP/up/recv.bin") $(grep -c 'second' "$E2E_TMP/up/recv.bin")"
# The absolute form's authority counts as much as the Host field, and a
# Host field that could smuggle another name into the URL is refused.
check "HTTP in a tunnel: an absolute-form URL for another host, a Host with userinfo" \
    "HTTP/1.1 403 HTTP/1.1 403" \
    "$(/usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "web.$D" "$UP" 2>&1 <<'PY'
import socket, sys
port, tok, host, up = sys.argv[1:]
out = []
for req in (f"GET http://tls.pinhole-e2e.test:{up}/third HTTP/1.1\r\nHost: {host}:{up}\r\n\r\n",
            f"GET /fourth HTTP/1.1\r\nHost: evil.test@{host}:{up}\r\n\r\n"):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(f"CONNECT {host}:{up} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode()
              + req.encode())
    data = b""
    while True:
        b = s.recv(4096)
        if not b:
            break
        data += b
    out.append(data.split(b"\r\n\r\n", 1)[1].split(b"\r\n")[0][:12].decode())
print(" ".join(out))
PY
)"
check "the upstream got no byte of those" "0 0 0" \
    "$(grep -c 'second' "$E2E_TMP/up/recv.bin") $(grep -c 'third' "$E2E_TMP/up/recv.bin") $(grep -c 'fourth' "$E2E_TMP/up/recv.bin")"
check "the log says host_mismatch for each" "3" \
    "$(grep -c '"reason":"host_mismatch"' "$E2E_TMP/proxy.log")"
check "a TLS hello to web (protocol http) is refused" \
    "protocol_not_allowed" \
    "$(echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -proxy_user lease1 \
        -proxy_pass "pass:$TOKEN" -connect "web.$D:$UP" -servername "web.$D" >/dev/null 2>&1
       grep -o '"host":"web.pinhole-e2e.test".*"reason":"protocol_not_allowed"' "$E2E_TMP/proxy.log" |
       grep -o 'protocol_not_allowed' | head -1)"

# protocol: tcp (ok): an SSH-like exchange, relayed without inspection.
check "protocol tcp: SSH-like bytes reach the upstream through the tunnel" "1" \
    "$(/usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "ok.$D" "$UP" 2>&1 <<'PY'
import socket, sys
port, tok, host, up = sys.argv[1:]
s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
s.sendall(f"CONNECT {host}:{up} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
s.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
s.shutdown(socket.SHUT_WR)
s.recv(100)  # the HTTP upstream answers garbage with 400 or closes
print(1 if head.startswith(b"HTTP/1.1 200") else 0)
PY
)"
check "the upstream received the SSH banner" "1" \
    "$(grep -c 'SSH-2.0-OpenSSH_9.2p1' "$E2E_TMP/up/recv.bin")"
# A reload that takes protocol: tcp away ends the tunnel relaying bytes
# nobody read (policy_revoked), while a tunnel whose ClientHello passed
# goes on; both are open, idle, when the new table comes.
check "reload without protocol tcp: the raw tunnel ends, the inspected one stays" "closed open" \
    "$(/usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "$D" "$UP" "$TLS_PORT" "$PROXY_PID" "$POLICYC" \
        "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" "$E2E_TMP" 2>&1 <<'PY'
import os, signal, socket, ssl, subprocess, sys, time
port, tok, dom, up, tls_port, pid, policyc, allow, tmp = sys.argv[1:]
def tunnel(dest):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(f"CONNECT {dest} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    return s
raw = tunnel(f"ok.{dom}:{up}")
raw.sendall(b"SSH-2.0-x\r\n")
tls = ssl.create_default_context(cafile=os.path.join(tmp, "tls.crt")).wrap_socket(
    tunnel(f"tls.{dom}:{tls_port}"), server_hostname=f"tls.{dom}")
text = open(allow).read().replace("        protocol: tcp\n        reason: the local TLS server",
                                  "        reason: the local TLS server")
with open(os.path.join(tmp, "notcp.yaml"), "w") as f:
    f.write(text)
new = os.path.join(tmp, "new.ptab")
subprocess.run([policyc, "compile", "-q", os.path.join(tmp, "notcp.yaml"), "-o", new], check=True,
               stderr=subprocess.DEVNULL)
if os.getuid() == 0:
    os.chown(new, 65534, -1)
os.rename(new, os.path.join(tmp, "table.ptab"))
os.kill(int(pid), signal.SIGHUP)
raw.settimeout(10)
try:
    while raw.recv(4096):
        pass
    a = "closed"
except (ConnectionResetError, socket.timeout) as e:
    a = f"raw {e!r}"
tls.settimeout(0.5)
try:
    b = "closed" if tls.recv(1) == b"" else "open"
except socket.timeout:
    b = "open"
except (ssl.SSLError, OSError):
    b = "closed"
print(a, b)
PY
)"
check "the log says why the raw tunnel ended" "1" \
    "$(grep -c '"detail":"after reload: the rule now says protocol tls or http".*"end":"policy_revoked"' "$E2E_TMP/proxy.log")"
# HTTP in clear in a tunnel is decided again at a reload on what its next
# request would be: a reload that makes its rule protocol tls ends the idle
# tunnel then (policy_revoked), as its next request would be refused.
: >"$E2E_TMP/up/recv.bin"
check "reload to protocol tls: an idle HTTP tunnel ends at the reload" \
    "200 closed" \
    "$(PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$TOKEN" "web.$D" "$UP" \
        "$PROXY_PID" "$POLICYC" "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" "$E2E_TMP" \
        "$ADMIN_PORT" 2>&1 <<'PY'
import os, signal, socket, subprocess, sys, time
from tunnel_http import reloads, response, tunnel
port, tok, host, up, pid, policyc, allow, tmp, admin = sys.argv[1:]
def status_reason():
    status, _, reason = response(f)
    return [status[9:12], reason] if reason else [status[9:12]]
s, f = tunnel(port, tok, f"{host}:{up}")
s.sendall(f"GET /before HTTP/1.1\r\nHost: {host}:{up}\r\n\r\n".encode())
out = status_reason()
text = open(allow).read().replace("        protocol: http\n", "        protocol: tls\n")
with open(os.path.join(tmp, "tlsweb.yaml"), "w") as y:
    y.write(text)
new = os.path.join(tmp, "new.ptab")
subprocess.run([policyc, "compile", "-q", os.path.join(tmp, "tlsweb.yaml"), "-o", new],
               check=True, stderr=subprocess.DEVNULL)
if os.getuid() == 0:
    os.chown(new, 65534, -1)
n = reloads(admin)
os.rename(new, os.path.join(tmp, "table.ptab"))
os.kill(int(pid), signal.SIGHUP)
while reloads(admin) <= n:
    time.sleep(0.05)
try:
    out.append("closed" if f.read() == b"" else "open")
except socket.timeout:
    out.append("open")
print(" ".join(out))
PY
)"
check "the log says why, once" "1" \
    "$(grep -c '"event":"connection".*"host":"web.pinhole-e2e.test".*"status":0.*"detail":"after reload: the rule now says protocol tls".*"end":"policy_revoked"' "$E2E_TMP/proxy.log")"
e2e_finish
