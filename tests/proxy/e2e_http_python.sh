#!/bin/bash
# e2e_http_python.sh - Python's urllib and requests through pinhole-proxy's
# plain-HTTP forwarding (absolute-form): GET, POST (1 MiB, and chunked),
# HEAD, keep-alive, the grant in HTTP_PROXY's userinfo or in
# Proxy-Authorization, and an unlisted host refused with its reason. Each
# client runs direct first (the control: the fixture works without the
# proxy), then through the proxy.
# Usage: e2e_http_python.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
# Exit: 0 passed, 1 failed, 77 skipped (python3-requests missing).
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
/usr/bin/python3 -c 'import requests' 2>/dev/null ||
    { echo "SKIP: needs python3-requests"; exit 77; }
. "$PH_SOURCE_DIR/tests/proxy/http_clients_lib.sh"
e2e_http_setup
head -c 262144 /dev/urandom >"$E2E_TMP/www/blob"
BLOB_SHA=$(sha256sum "$E2E_TMP/www/blob" | cut -d' ' -f1)
e2e_start_origin "$E2E_TMP/www"
CLIENTS="$PH_SOURCE_DIR/tests/proxy/http_clients_python.py"

run_clients() { # NAME ARGS...: runs the client script, each of its lines a check
    local name=$1 rc
    shift
    "$@" >"$E2E_TMP/clients.out" 2>&1; rc=$?
    sed 's/^/  /' "$E2E_TMP/clients.out"
    [ "$rc" = 0 ] && ok "$name" || fail "$name (exit $rc)"
}

# The clients run in an environment built like the sandbox's (nothing of the
# host's), plus the proxy variables of the case.
BASE_ENV="PATH=/usr/local/bin:/usr/bin:/bin HOME=$E2E_TMP LANG=C.UTF-8 NO_PROXY= no_proxy="
run_clients "urllib and requests direct (control)" \
    env -i $BASE_ENV \
    /usr/bin/python3 "$CLIENTS" "http://127.0.0.1:$ORIGIN_PORT" "-" "$BLOB_SHA"
: >"$E2E_TMP/origin.log"
run_clients "urllib and requests through pinhole-proxy" \
    env -i $BASE_ENV HTTP_PROXY="$(e2e_proxy_url)" http_proxy="$(e2e_proxy_url)" \
    /usr/bin/python3 "$CLIENTS" "http://ok.$D:$ORIGIN_PORT" "http://other.$D:$ORIGIN_PORT/blob" \
    "$BLOB_SHA" "http://127.0.0.1:$PROXY_PORT" "Bearer $TOKEN"
e2e_origin_clean "through the proxy"
# requests' Session kept its connection to the proxy: several requests were
# logged under one connection id.
most=$(grep '"event":"request"' "$E2E_TMP/proxy.log" | grep -o '"conn_id":[0-9]*' | sort | uniq -c |
    sort -rn | awk 'NR==1{print $1}')
[ "${most:-0}" -ge 2 ] && ok "keep-alive: $most requests on one client connection" ||
    fail "no client connection carried two requests (most: ${most:-0})"
grep -q '"method":"POST"' "$E2E_TMP/proxy.log" && ok "the proxy logged the POST" ||
    fail "no POST in the proxy's log"
e2e_finish
