#!/bin/bash
# e2e_reload_forward.sh - a reload decides every connection the forwarding
# engine serves again, as it decides tunnels (docs/pinhole-proxy.md,
# SIGNALS): an idle connection carrying HTTP in a tunnel ends at the reload
# that revokes its lease (end=lease_revoked) and at the one that takes its
# host out of the table (end=policy_revoked), and so does a plain
# kept-alive forwarding connection, each with one log line; another lease's
# connections, idle or with a request in flight, go on and their next
# request is served; a request still resolving at the reload that revokes
# its lease is answered 407 lease_revoked; an HTTP tunnel before its first
# request ended by a key replaced is logged with its CONNECT's grant and
# rule. The revocation list's live entries are a gauge
# (pinhole_proxy_revocations_entries).
# Usage: e2e_reload_forward.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
D=$E2E_DOMAIN
e2e_two_leases
e2e_start_forward_peer
e2e_start_proxy --revocations "$REV"

check "no revocation entry at start" "0" "$(e2e_metric pinhole_proxy_revocations_entries)"

# One client holds every connection over two reloads (each waited for on
# the proxy's reload counter): lease A's and lease B's HTTP in a tunnel to
# web and kept-alive forwarding connections to ok, B's forwarding
# connection to web, and B's POST /echo in flight (half its body sent
# before the first reload, the rest after). A connection the proxy ends
# shows as an EOF; one still open after 10 s, as "open".
PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$ADMIN_PORT" "$D" "$UP" \
    "$TOKEN_A" "$TOKEN_B" "$PROXY_PID" "$GRANT" "$REV" "$POLICYC" \
    "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" "$E2E_TMP" \
    >"$E2E_TMP/client.out" 2>&1 <<'PY'
import hashlib, os, socket, subprocess, sys, time
from tunnel_http import metric, reload, response, tunnel
(port, admin, dom, up, tok_a, tok_b, pid, grant, rev, policyc, allow, tmp) = sys.argv[1:]
web, ok = f"web.{dom}:{up}", f"ok.{dom}:{up}"

def plain(tok):
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    return s, s.makefile("rb"), tok

def get(conn, dest, path):
    s, f, tok = conn
    if tok is None:  # in a tunnel: origin form, the CONNECT's grant
        s.sendall(f"GET /{path} HTTP/1.1\r\nHost: {dest}\r\n\r\n".encode())
    else:
        s.sendall(f"GET http://{dest}/{path} HTTP/1.1\r\nHost: {dest}\r\n"
                  f"Proxy-Authorization: Bearer {tok}\r\n\r\n".encode())
    status, body, reason = response(f)
    return f"{status[9:12]} {body}"

def ended(conn):
    s, f, _ = conn
    s.settimeout(10)
    try:
        return "closed" if f.read(1) == b"" else "data"
    except socket.timeout:
        return "open"
    except ConnectionResetError:
        return "reset"

conns = {}
for name, tok, dest in (("ta", tok_a, web), ("tb", tok_b, web)):
    s, f = tunnel(port, tok, dest)
    conns[name] = (s, f, None)
for name, tok in (("ka", tok_a), ("kb", tok_b), ("kw", tok_b)):
    conns[name] = plain(tok)
first = [get(conns[n], web if n in ("ta", "tb", "kw") else ok, n + "-1")
         for n in ("ta", "tb", "ka", "kb", "kw")]
print("first:", " | ".join(first))
body = os.urandom(1000)
fb = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
fb.sendall(f"POST http://{ok}/echo HTTP/1.1\r\nHost: {ok}\r\nProxy-Authorization: Bearer {tok_b}\r\n"
           f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:500])

# Lease A's request still resolving (its name's DNS never answers) when
# the reload comes: waited on until its head was parsed (and so decided).
heads = metric(admin, "pinhole_proxy_head_parses_total")
slow = f"slow.{dom}:{up}"
rs = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
rs.sendall(f"GET http://{slow}/rs HTTP/1.1\r\nHost: {slow}\r\n"
           f"Proxy-Authorization: Bearer {tok_a}\r\n\r\n".encode())
while metric(admin, "pinhole_proxy_head_parses_total") <= heads:
    time.sleep(0.01)

# 1. Lease A revoked.
subprocess.run([grant, "revoke", "--tenant", "t1", "--lease", "leaseA", "--file", rev],
               check=True, stdout=subprocess.DEVNULL)
reload(admin, pid)
print("revoked:", ended(conns["ta"]), ended(conns["ka"]))
status, _, why = response(rs.makefile("rb"))
print("resolving:", status[9:12] or "none", why or "-")
fb.sendall(body[500:])
status, echoed, _ = response(fb.makefile("rb"))
print("in flight:", status[9:12],
      "identical" if echoed == f"sha256 {hashlib.sha256(body).hexdigest()} {len(body)}" else echoed)
print("lease B:", " | ".join(get(conns[n], web if n in ("tb", "kw") else ok, n + "-2")
                             for n in ("tb", "kb", "kw")))

# 2. web taken out of the table.
text = open(allow).read()
rule = ("      - host: web.pinhole-e2e.test\n        ports: [\"1024-65535\"]\n"
        "        protocol: http\n        reason: the HTTP upstream, reached in a tunnel\n")
assert rule in text
with open(os.path.join(tmp, "noweb.yaml"), "w") as y:
    y.write(text.replace(rule, ""))
new = os.path.join(tmp, "new.ptab")
subprocess.run([policyc, "compile", "-q", os.path.join(tmp, "noweb.yaml"), "-o", new],
               check=True, stderr=subprocess.DEVNULL)
if os.getuid() == 0:
    os.chown(new, 65534, -1)
os.rename(new, os.path.join(tmp, "table.ptab"))
reload(admin, pid)
print("web removed:", ended(conns["tb"]), ended(conns["kw"]))
print("ok kept:", get(conns["kb"], ok, "kb-3"))

# 3. The grant key replaced, while lease B's HTTP tunnel to tls has the
# first line of its first request only (waited on until that line was
# parsed: the tunnel is the forwarding engine's, no request decided yet).
s, f = tunnel(port, tok_b, f"tls.{dom}:{up}")
heads = metric(admin, "pinhole_proxy_head_parses_total")
s.sendall(b"GET /tp HTTP/1.1\r\n")
while metric(admin, "pinhole_proxy_head_parses_total") <= heads:
    time.sleep(0.01)
subprocess.run([grant, "keygen", "--kid", "rotated", "--output", os.path.join(tmp, "new.key")],
               check=True)
if os.getuid() == 0:
    os.chown(os.path.join(tmp, "new.key"), 65534, -1)
os.rename(os.path.join(tmp, "new.key"), os.path.join(tmp, "grant.key"))
reload(admin, pid)
print("key replaced:", ended((s, f, None)))
PY
sed 's/^/# /' "$E2E_TMP/client.out"

line() { awk -v p="$1 " 'index($0, p) == 1 { print substr($0, length(p) + 1) }' "$E2E_TMP/client.out"; }
check "every connection served its first request" \
    "200 hello /ta-1 | 200 hello /tb-1 | 200 hello /ka-1 | 200 hello /kb-1 | 200 hello /kw-1" \
    "$(line first:)"
check "lease A revoked: its HTTP tunnel and its kept-alive connection end at the reload" \
    "closed closed" "$(line revoked:)"
check "lease A's request still resolving at the reload is answered 407 lease_revoked, as a CONNECT is" \
    "407 lease_revoked" "$(line resolving:)"
check "lease B's request in flight over the reload is served, its body identical" \
    "200 identical" "$(line 'in flight:')"
check "lease B's connections serve their next request" \
    "200 hello /tb-2 | 200 hello /kb-2 | 200 hello /kw-2" "$(line 'lease B:')"
check "web out of the table: B's HTTP tunnel and forwarding connection to web end at the reload" \
    "closed closed" "$(line 'web removed:')"
check "B's connection to ok goes on" "200 hello /kb-3" "$(line 'ok kept:')"

check "A's idle HTTP tunnel is logged once: end=lease_revoked, the lease named" "1" \
    "$(e2e_log_lines 'r["event"] == "connection" and r["lease"] == "leaseA" and r["host"] == "web.'"$D"'" and r["status"] == 0 and r["end"] == "lease_revoked" and r["detail"].startswith("after reload: lease leaseA of tenant t1")')"
check "A's kept-alive forwarding connection is logged once: end=lease_revoked" "1" \
    "$(e2e_log_lines 'r["event"] == "connection" and r["lease"] == "leaseA" and r["host"] == "ok.'"$D"'" and r["end"] == "lease_revoked"')"
check "B's HTTP tunnel and forwarding connection to web: end=policy_revoked, once each" "2" \
    "$(e2e_log_lines 'r["event"] == "connection" and r["lease"] == "leaseB" and r["host"] == "web.'"$D"'" and r["end"] == "policy_revoked" and r["detail"].startswith("after reload: ")')"
check "A's resolving request is logged once: 407, reason and end lease_revoked" "1" \
    "$(e2e_log_lines 'r["event"] == "request" and r["host"] == "slow.'"$D"'" and r["status"] == 407 and r["reason"] == "lease_revoked" and r["end"] == "lease_revoked" and r["detail"].startswith("after reload: lease leaseA")')"
check "and counted a refusal" "1" \
    "$(e2e_metric 'pinhole_proxy_requests_total{verdict="refused",reason="lease_revoked"}')"
check "no other line ended at a reload" "3 2" \
    "$(e2e_log_lines 'r["end"] == "lease_revoked"') $(e2e_log_lines 'r["end"] == "policy_revoked"')"
check "key replaced: B's HTTP tunnel before its first request ends at the reload" "closed" \
    "$(line 'key replaced:')"
check "its line keeps the CONNECT's decision (grant, rule, policy): end=key_revoked" "1" \
    "$(e2e_log_lines 'r["event"] == "connection" and r["host"] == "tls.'"$D"'" and r["end"] == "key_revoked" and (r["tenant"], r["lease"], r["list"]) == ("t1", "leaseB", "e2e") and r["rule"].startswith("noweb.yaml:") and len(r["policy_id"]) == 64')"
check "every request of B was logged done (8)" "8" \
    "$(e2e_log_lines 'r["event"] == "request" and r["lease"] == "leaseB" and r["end"] == "done"')"

# The gauge counts the live entries of the list in force: one lapsed entry
# of three is not.
check "one revocation entry after the first reload" "1" "$(e2e_metric pinhole_proxy_revocations_entries)"
printf 't1 gone 1000000000\nt1 leaseA 1900000000\nt1 leaseC 1900000000\n' >"$E2E_TMP/rev.new"
chmod 644 "$E2E_TMP/rev.new"
mv "$E2E_TMP/rev.new" "$REV"
check "POST /reload of a list with a lapsed entry" "200" \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$ADMIN_PORT/reload")"
check "the list holds 3 entries, 2 of them live" "1 2" \
    "$(grep -c '"event":"reload".*revocations replaced, 3 entries' "$E2E_TMP/proxy.err") $(e2e_metric pinhole_proxy_revocations_entries)"

kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
check "SIGTERM: exit 0" "0" "$?"
e2e_finish
