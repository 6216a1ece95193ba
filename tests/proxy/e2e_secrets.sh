#!/bin/bash
# e2e_secrets.sh - no copy of a grant token or of a grant key outlives its
# use in the proxy's freed memory (docs/pinhole-proxy.md, SECRETS IN
# MEMORY). The proxy runs under a preloaded shim (tests/support/free_scan.c)
# that searches every block it frees for the token's MAC, the tail of its
# Basic credentials, and the key's bytes (raw and hex). One token (signed
# by the key "e2e") goes through every path that holds it: CONNECT tunnels
# (Bearer and Basic; raw, and HTTP in a tunnel handed to the forwarding
# engine), kept-alive forwarded GETs (two tokens in turn on one connection,
# so each replaces the other's copy), a head arriving in pieces (CONNECT and
# forwarded: the proxy's head buffer, a pullup over libevent's chains),
# pipelined heads (one behind a chunked upload), refusals (an unlisted host, a head left incomplete), a
# connection that lives through the reloads; then two reloads rotate the
# key out (a new signing key first, then the old one removed: the
# connections still holding the token are decided again and end), and the
# proxy stops. The shim must have read its markers in the proxy's process,
# searched its frees until its exit, found none of the secrets, and found
# the control: a request path that no wipe covers (the response relayed
# carries it), so a shim that sees none of the proxy's frees fails.
# glibc's allocator only: not in the sanitized suite (ASan has its own).
# Usage: e2e_secrets.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

SHIM=$PH_BINARY_DIR/tests/proxy/libph_free_scan.so
[ -f "$SHIM" ] || { echo "# skip: no $SHIM"; exit 77; }

e2e_start_dns
e2e_make_policy
D=$E2E_DOMAIN
e2e_start_forward_peer
TOKEN_B=$(e2e_issue lease2 e2e)

hex() { printf '%s' "$1" | od -An -v -tx1 | tr -d ' \n'; }
MAC=${TOKEN##*.}
BASIC=$(printf 'lease1:%s' "$TOKEN" | base64 -w0)
KEY_HEX=$(awk '$1=="e2e"{print $2}' "$E2E_TMP/grant.key")
CONTROL=control-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
export PH_FREE_SCAN="$(hex "$MAC"),$(hex "${BASIC: -40}"),$KEY_HEX,$(hex "$KEY_HEX"),$(hex "$CONTROL")"
export PH_FREE_SCAN_HITS=$E2E_TMP/free-scan
E2E_PROXY_PREFIX="env LD_PRELOAD=$SHIM" e2e_start_proxy --header-timeout-ms 1000
unset PH_FREE_SCAN PH_FREE_SCAN_HITS

PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$ADMIN_PORT" "$D" "$UP" \
    "$TOKEN" "$TOKEN_B" "$BASIC" "$PROXY_PID" "$GRANT" "$E2E_TMP" "$CONTROL" \
    >"$E2E_TMP/client.out" 2>&1 <<'PY'
import os, socket, subprocess, sys, time
from tunnel_http import reload, response, tunnel
(port, admin, dom, up, tok, tok_b, basic, pid, grant, tmp, control) = sys.argv[1:]
ok, web, nope = f"ok.{dom}:{up}", f"web.{dom}:{up}", f"nope.{dom}:{up}"
bearer = f"Bearer {tok}"

def conn():
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    return s, s.makefile("rb")

def get_head(dest, path, auth):
    return (f"GET http://{dest}/{path} HTTP/1.1\r\nHost: {dest}\r\n"
            f"Proxy-Authorization: {auth}\r\n\r\n").encode()

def status(f):
    st, body, reason = response(f)
    return f"{st[9:12] or 'none'} {reason or body or '-'}"

out = []
# CONNECT, raw bytes (ok is protocol tcp), Bearer then Basic.
for auth in (bearer, f"Basic {basic}"):
    s, f = conn()
    s.sendall(f"CONNECT {ok} HTTP/1.1\r\nProxy-Authorization: {auth}\r\n\r\n".encode())
    st = f.readline()
    while f.readline() not in (b"\r\n", b""):
        pass
    s.sendall(f"GET /raw HTTP/1.1\r\nHost: {ok}\r\nConnection: close\r\n\r\n".encode())
    out.append(f"{st.decode()[9:12]}/{status(f)}")
    s.close()
# A CONNECT head in pieces (the proxy's head buffer, not its first read's).
s, f = conn()
head = f"CONNECT {ok} HTTP/1.1\r\nProxy-Authorization: {bearer}\r\n\r\n".encode()
s.sendall(head[:40]); time.sleep(0.05); s.sendall(head[40:])
out.append(f.readline().decode()[9:12]); s.close()
# HTTP in a tunnel (web is protocol http): the forwarding engine keeps the
# CONNECT's token.
s, f = tunnel(port, tok, web)
for i in range(2):
    s.sendall(f"GET /t{i} HTTP/1.1\r\nHost: {web}\r\n\r\n".encode())
    out.append(status(f))
s.close()
print("tunnels:", " | ".join(out))

# Kept-alive forwarding: two tokens in turn, Basic, a head in pieces,
# two pipelined heads in one write.
out = []
s, f = conn()
for i, auth in enumerate((bearer, f"Bearer {tok_b}", bearer, f"Basic {basic}")):
    s.sendall(get_head(ok, f"k{i}", auth)); out.append(status(f))
h = get_head(ok, "split", bearer)
s.sendall(h[:60]); time.sleep(0.05); s.sendall(h[60:100]); time.sleep(0.05); s.sendall(h[100:])
out.append(status(f))
s.sendall(get_head(ok, "p1", bearer) + get_head(ok, "p2", bearer))
out.append(status(f)); out.append(status(f))
s.sendall(get_head(ok, control, bearer))
out.append(status(f).replace(control, "CONTROL"))
# A chunked upload with a request pipelined behind it, both in one write:
# the next head (its grant) is in the input while the body is decoded
# (test_evbuffer_wipe shows the chains a decoding gives up).
data = bytes(range(256)) * 80
chunks = b"".join(b"%x\r\n%s\r\n" % (len(data[i:i + 7000]), data[i:i + 7000])
                  for i in range(0, len(data), 7000))
s.sendall(f"POST http://{ok}/echo HTTP/1.1\r\nHost: {ok}\r\nProxy-Authorization: {bearer}\r\n"
          f"Transfer-Encoding: chunked\r\n\r\n".encode() + chunks + b"0\r\n\r\n"
          + get_head(ok, "after-upload", bearer))
import hashlib
echo = status(f)
out.append("echo ok" if echo == f"200 sha256 {hashlib.sha256(data).hexdigest()} {len(data)}"
           else echo)
out.append(status(f))
s.close()
print("forwarded:", " | ".join(out))

# Refusals: an unlisted host (answered, closed, a pipelined head unread),
# a head never completed (header timeout), a CONNECT refused.
out = []
s, f = conn()
s.sendall(get_head(nope, "x", bearer) + get_head(ok, "after", bearer))
out.append(status(f)); s.close()
s, f = conn()
s.sendall(get_head(ok, "never", bearer)[:-2])
out.append(status(f)); s.close()
s, f = conn()
s.sendall(f"CONNECT {nope} HTTP/1.1\r\nProxy-Authorization: {bearer}\r\n\r\n".encode())
out.append(f.readline().decode()[9:12]); s.close()
print("refused:", " | ".join(out))

# Connections holding the token over the reloads: a kept-alive forwarding
# one and a tunnel, each decided again at every reload.
held, held_f = conn()
held.sendall(get_head(ok, "held", bearer))
first = status(held_f)
tun, tun_f = tunnel(port, tok, ok)

def replace_keys(lines):
    path = os.path.join(tmp, "keys.new")
    with open(path, "w") as k:
        k.write(lines)
    os.chmod(path, 0o600)
    if os.getuid() == 0:
        os.chown(path, 65534, -1)
    os.rename(path, os.path.join(tmp, "grant.key"))

old = open(os.path.join(tmp, "grant.key")).read()
new = subprocess.run([grant, "keygen", "--kid", "rotated"], check=True, capture_output=True,
                     text=True).stdout
replace_keys(new + old)          # rotated signs, e2e still verifies
reload(admin, pid)
held.sendall(get_head(ok, "held2", bearer))
print("rotated:", first, "|", status(held_f))
replace_keys(new)                # e2e gone
reload(admin, pid)
held.settimeout(10)
tun.settimeout(10)
print("rotated out:", "closed" if held_f.read(1) == b"" else "open",
      "closed" if tun_f.read(1) == b"" else "open")
s, f = conn()
s.sendall(get_head(ok, "late", bearer))
print("late:", status(f))
PY
sed 's/^/# /' "$E2E_TMP/client.out"
line() { awk -v p="$1 " 'index($0, p) == 1 { print substr($0, length(p) + 1) }' "$E2E_TMP/client.out"; }
check "tunnels (Bearer, Basic, a head in pieces, HTTP in a tunnel) served" \
    "200/200 hello /raw | 200/200 hello /raw | 200 | 200 hello /t0 | 200 hello /t1" "$(line tunnels:)"
check "kept-alive forwarded GETs served, tokens in turn, a head in pieces, pipelined" \
    "200 hello /k0 | 200 hello /k1 | 200 hello /k2 | 200 hello /k3 | 200 hello /split | 200 hello /p1 | 200 hello /p2 | 200 hello /CONTROL | echo ok | 200 hello /after-upload" \
    "$(line forwarded:)"
check "refusals" "403 not_allowlisted | 408 http_head_timeout | 403" "$(line refused:)"
check "a rotation keeps the old key verifying" "200 hello /held | 200 hello /held2" "$(line rotated:)"
check "the old key rotated out: the connections holding its token end" "closed closed" \
    "$(line 'rotated out:')"
check "the old key rotated out: its token refused" "407 grant_invalid" "$(line late:)"

e2e_stop_all
SCAN=$E2E_TMP/free-scan
markers=$(awk '$1=="markers"{print $2 " pid " $4; exit}' "$SCAN" 2>/dev/null)
check "the shim read 5 markers in the proxy's process" "5 pid $PROXY_PID" "${markers:-none}"
scanned=$(awk -v p="$PROXY_PID" '$1=="scanned" && $4==p {print ($2 > 0 ? "yes" : "none")}' \
    "$SCAN" 2>/dev/null)
check "the shim searched the proxy's frees until its exit" "yes" "${scanned:-no report}"
control=$(awk '$1=="hit" && $2==4' "$SCAN" 2>/dev/null | wc -l)
check "the control (relayed, never wiped) was found in freed memory" "yes" \
    "$([ "$control" -gt 0 ] && echo yes || echo "no ($control)")"
hits=$(awk '$1=="hit" && $2!=4' "$SCAN" 2>/dev/null | wc -l)
check "no freed block held the token or the key" "0" "$hits"
[ "$hits" = 0 ] || awk '$1=="hit" && $2!=4' "$SCAN" | sort | uniq -c | sort -rn | head -20 |
    sed 's/^/# /'
e2e_finish
