#!/bin/bash
# e2e_default_build.sh - the production build (no test option): it refuses
# loopback upstreams and says so in --version. (Its parity with the guard on
# the URL corpora: e2e_parity.sh.)
# Usage: e2e_default_build.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
POLICYC=$2 GRANT=$3 PEER=$4 PROXY=$5
. "$(dirname "$0")/e2e_lib.sh"

"$PROXY" --version | grep -q "loopback upstreams denied" && ok "--version: no test option" ||
    fail "--version of the default build"
"$1" --version | grep -q "PINHOLE_TEST_LOOPBACK_UPSTREAM" && ok "--version of the test build says so" ||
    fail "--version of the test build"

e2e_start_dns
e2e_make_policy
e2e_start_proxy
grep -q '"event":"test_build"' "$E2E_TMP/proxy.err" && fail "default build warned as a test build" ||
    ok "no test-build warning at start"
D=$E2E_DOMAIN
PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >/dev/null & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$PEER_PORT"
resp=$(printf 'CONNECT ok.%s:%s HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n' "$D" "$PEER_PORT" "$TOKEN" |
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; cat <&3" | tr -d '\r')
case "$resp" in
    "HTTP/1.1 403"*"Pinhole-Reason: denied_address"*"127.0.0.0/8"*) ok "default build refuses a loopback upstream (403 denied_address, 127.0.0.0/8)" ;;
    *) fail "default build and loopback: $resp" ;;
esac
e2e_finish
