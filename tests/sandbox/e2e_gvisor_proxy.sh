#!/bin/bash
# e2e_gvisor_proxy.sh - network only through the proxy, end to end: a gvisor
# sandbox with a grant fetches an allowlisted HTTPS URL through
# pinhole-forwarder and pinhole-proxy (test-loopback build, its unix socket
# bind-mounted into the sandbox), and is refused for a name not allowlisted,
# an IP literal and a name resolving to a private address. Real parts: the
# proxy's e2e set-up (dnsmasq, openssl s_server, policyc, pinhole-guard) and
# curl inside the sandbox (copied into a busybox root filesystem).
# Usage: e2e_gvisor_proxy.sh PROXY POLICYC GRANT PEER SANDBOX_CLI BUILD_ROOTFS
# Exit: 0 passed, 1 failed, 77 skipped (no gvisor here).
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4 SANDBOX=$5 BUILD_ROOTFS=$6
if [ "$(id -u)" != 0 ] || ! command -v runsc >/dev/null || ! [ -x /bin/busybox ] ||
   ! command -v curl >/dev/null; then
    echo "SKIP: needs root, runsc, busybox-static and curl"
    exit 77
fi
. "$PH_SOURCE_DIR/tests/proxy/e2e_lib.sh"

# A root filesystem with curl (and its libraries) next to busybox.
PH_ROOTFS_HOST_TOOLS="touch dash curl" "$BUILD_ROOTFS" "$E2E_TMP/rootfs" 2>/dev/null ||
    { fail "building the root filesystem"; exit 1; }
export PINHOLE_GVISOR_ROOTFS="$E2E_TMP/rootfs"

e2e_start_dns
e2e_make_policy
e2e_start_tls
e2e_start_proxy --unix-socket "$E2E_TMP/proxy.sock" --unix-socket-mode 0666
D=$E2E_DOMAIN
# The service's state directory must be its own (owner root, mode 0700,
# under ancestors nobody else controls): not inside $E2E_TMP, which the
# proxy's user owns. The service creates it.
STATE_TOP=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-sandbox-e2e.XXXXXX")
STATE="$STATE_TOP/state"
trap 'e2e_cleanup; rm -rf "$STATE_TOP"' EXIT
SB() { "$SANDBOX" --mechanism gvisor --mode production --state-dir "$STATE" "$@"; }

ID=$(SB create --tenant t1 --lease lease1 --grant "$TOKEN" \
        --proxy-socket "$E2E_TMP/proxy.sock" --proxy-port 3128) ||
    { fail "create with a grant"; exit 1; }
# The test CA, handed to the command on stdin (the workspace is its only disk).
SB exec --stdin "$ID" -- sh -c 'cat > /workspace/ca.crt' <"$E2E_TMP/tls.crt" ||
    fail "copying the CA into the workspace"

fetch() { # prints "<CONNECT status> <HTTP status>" as curl saw them inside
    SB exec --timeout 30 "$ID" -- curl -s -o /dev/null --max-time 20 --cacert /workspace/ca.crt \
        -w '%{http_connect} %{http_code}' "https://$1/" 2>/dev/null
}
check "allowlisted name through forwarder and proxy" "200 200" "$(fetch "ok.$D:$TLS_PORT")"
check "name not allowlisted is refused by the proxy" "403 000" "$(fetch "notlisted.$D:$TLS_PORT")"
check "IP literal is refused by the proxy" "403 000" "$(fetch "127.0.0.1:$TLS_PORT")"
check "name resolving to a private address is refused" "403 000" "$(fetch "private.$D:$TLS_PORT")"
# Without the proxy variables nothing is reachable: no interface but lo.
direct=$(SB exec "$ID" -- sh -c "curl -s -o /dev/null --noproxy '*' --max-time 5 \
    -w '%{http_code}' https://127.0.0.1:$TLS_PORT/; echo \" rc=\$?\"")
case "$direct" in
    "000 rc=0") fail "direct connection: $direct" ;;
    000*) ok "direct connection fails: $direct" ;;
    *) fail "direct connection: $direct" ;;
esac
grep -q '"reason":"allowed"' "$E2E_TMP/proxy.log" && ok "proxy logged the allowed tunnel" ||
    fail "no allowed tunnel in the proxy log"
SB destroy "$ID" >/dev/null || fail "destroy"
e2e_finish
