#!/bin/bash
# e2e_forward_redecide.sh - every request on a kept-alive forwarding
# connection is decided on the policy in force, whatever the connection's
# grant memo holds (ph_decide_url_memo spares only re-verifying the grant
# under the same policy version):
#   another host on the same connection is decided for itself (allowed, or
#   403 not_allowlisted);
#   a reload that removes another host keeps the connection, and its next
#   request, to that host, is refused (403 not_allowlisted); a connection
#   whose last host the reload removed ends at the reload;
#   a reload whose key file no longer holds the grant's key ends the
#   connection, and a new one with the grant is refused (407 grant_invalid);
# each request with one log line, as before, and each connection ended at a
# reload with one of its own.
# Usage: e2e_forward_redecide.sh TEST_PROXY POLICYC PINHOLE_GUARD
PROXY=$1 POLICYC=$2 GRANT=$3
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
D=$E2E_DOMAIN
e2e_start_forward_peer
e2e_start_proxy

reloads() { e2e_metric 'pinhole_proxy_table_reloads_total{result="ok"}'; }
wait_reloads() { # n: until n reloads were counted (5 s at most)
    for _ in $(seq 1 100); do [ "$(reloads)" -ge "$1" ] && return 0; sleep 0.05; done
    return 1
}
wait_file() { # path: until it exists (10 s at most)
    for _ in $(seq 1 200); do [ -e "$1" ] && return 0; sleep 0.05; done
    return 1
}

# One client connection, its requests one by one: request i (a host) is
# sent once DIR/go.i exists, its status and Pinhole-Reason (or "eof") go to
# DIR/out.i.
conn() { # dir host...
    mkdir -p "$1"
    PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$UP" "$TOKEN" "$@" <<'PY' &
import os, socket, sys, time
from tunnel_http import response
port, up, token, d = sys.argv[1:5]
hosts = sys.argv[5:]
s = socket.create_connection(("127.0.0.1", int(port)))
s.settimeout(20)
f = s.makefile("rb")
for i, host in enumerate(hosts, 1):
    while not os.path.exists(os.path.join(d, "go.%d" % i)):
        time.sleep(0.02)
    target = "%s:%s" % (host, up)
    s.sendall(("GET http://%s/r%d HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Bearer %s\r\n\r\n"
               % (target, i, target, token)).encode())
    status, _, reason = response(f)
    status = status.split(" ")
    if len(status) < 2:
        open(os.path.join(d, "out.%d" % i), "w").write("eof")
        break
    open(os.path.join(d, "out.%d" % i), "w").write(status[1] + (" " + reason if reason else ""))
PY
    CONN_PIDS="${CONN_PIDS:-} $!"
}
step() { # dir i: sends request i, prints what it got
    touch "$1/go.$2"
    wait_file "$1/out.$2" && cat "$1/out.$2"
}

# ---- another host on the same connection -----------------------------------
conn "$E2E_TMP/c1" "ok.$D" "web.$D" "ok.$D" "nothere.$D"
check "a first request" "200" "$(step "$E2E_TMP/c1" 1)"
check "another listed host on the same connection" "200" "$(step "$E2E_TMP/c1" 2)"
check "the first host again" "200" "$(step "$E2E_TMP/c1" 3)"
check "a host the list does not name, on the same connection" "403 not_allowlisted" \
    "$(step "$E2E_TMP/c1" 4)"

# ---- a reload that removes a host ------------------------------------------
# The reload ends a kept-alive connection whose last request's host it took
# away (end=policy_revoked, at the reload: proxy.e2e_reload_forward); one
# whose last host stays is kept, and its next request is decided afresh on
# the new table (the grant memo is of the old version).
conn "$E2E_TMP/c2" "ok.$D" "web.$D"
conn "$E2E_TMP/c2b" "web.$D" "web.$D"
check "a request before the reload" "200" "$(step "$E2E_TMP/c2" 1)"
check "a request to the host the reload removes" "200" "$(step "$E2E_TMP/c2b" 1)"
sed "s/^      - host: web\.$D\$/      - host: gone.$D/" \
    "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" >"$E2E_TMP/without-web.yaml"
"$POLICYC" compile "$E2E_TMP/without-web.yaml" -o "$E2E_TMP/table.new" >/dev/null 2>&1 ||
    fail "policyc compile of the table without web.$D"
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/table.new"
mv "$E2E_TMP/table.new" "$E2E_TMP/table.ptab"
kill -HUP "$PROXY_PID"
wait_reloads 1 || fail "the table reload was not counted"
check "the kept connection's next request, to the host gone from the table" \
    "403 not_allowlisted" "$(step "$E2E_TMP/c2" 2)"
check "the connection whose host went: ended at the reload" "eof" "$(step "$E2E_TMP/c2b" 2)"

# ---- a reload that drops the grant's key --------------------------------------
"$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" -o "$E2E_TMP/table.new" \
    >/dev/null 2>&1 || fail "policyc compile"
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/table.new"
mv "$E2E_TMP/table.new" "$E2E_TMP/table.ptab"
kill -HUP "$PROXY_PID"
wait_reloads 2 || fail "the table's second reload was not counted"
conn "$E2E_TMP/c3" "ok.$D" "ok.$D"
check "a request before the key rotation" "200" "$(step "$E2E_TMP/c3" 1)"
"$GRANT" keygen --kid rotated --output "$E2E_TMP/grant.new" 2>/dev/null
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/grant.new"
mv "$E2E_TMP/grant.new" "$E2E_TMP/grant.key"
kill -HUP "$PROXY_PID"
wait_reloads 3 || fail "the key reload was not counted"
check "the connection whose grant's key went: ended at the reload" "eof" "$(step "$E2E_TMP/c3" 2)"
conn "$E2E_TMP/c4" "ok.$D"
check "a new connection with the same grant" "407 grant_invalid" "$(step "$E2E_TMP/c4" 1)"

for p in $CONN_PIDS; do wait "$p"; done
check "one log line per request" "9" "$(grep -c '"method":"GET"' "$E2E_TMP/proxy.log")"
check "one line per connection ended at a reload: web's (policy_revoked), the key's (key_revoked)" "1 1" \
    "$(e2e_log_lines 'r["event"] == "connection" and r["host"] == "web.'"$D"'" and r["end"] == "policy_revoked"') $(e2e_log_lines 'r["event"] == "connection" and r["host"] == "ok.'"$D"'" and r["end"] == "key_revoked"')"
e2e_finish
