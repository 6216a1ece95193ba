#!/bin/bash
# e2e_gvisor_wget.sh - plain HTTP from inside a gVisor sandbox: busybox wget
# (the root filesystem's own), with nothing but the sandbox's tier-2
# environment (http_proxy=http://LEASE:GRANT@127.0.0.1:3128), through
# pinhole-forwarder and pinhole-proxy's plain-HTTP forwarding (test-loopback
# build, its unix socket bind-mounted in) to a local origin: a GET and a
# body upload arrive byte-identical, an unlisted host is refused with its
# reason. Real parts: the proxy's e2e set-up (dnsmasq, policyc,
# pinhole-guard), the file-serving origin of the proxy's client tests.
# Usage: e2e_gvisor_wget.sh PROXY POLICYC GRANT PEER SANDBOX_CLI BUILD_ROOTFS
# Exit: 0 passed, 1 failed, 77 skipped (no gvisor here).
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4 SANDBOX=$5 BUILD_ROOTFS=$6
if [ "$(id -u)" != 0 ] || ! command -v runsc >/dev/null || ! [ -x /bin/busybox ]; then
    echo "SKIP: needs root, runsc and busybox-static"
    exit 77
fi
. "$PH_SOURCE_DIR/tests/proxy/http_clients_lib.sh"

"$BUILD_ROOTFS" "$E2E_TMP/rootfs" >/dev/null 2>&1 || { fail "building the root filesystem"; exit 1; }
export PINHOLE_GVISOR_ROOTFS="$E2E_TMP/rootfs"

e2e_http_setup --unix-socket "$E2E_TMP/proxy.sock" --unix-socket-mode 0666
head -c 1048576 /dev/urandom >"$E2E_TMP/www/blob"
# busybox wget --post-file sends the file as a C string (up to its first NUL
# byte): the upload is text.
head -c 225000 /dev/urandom | base64 -w 0 >"$E2E_TMP/up"
BLOB_SHA=$(sha256sum "$E2E_TMP/www/blob" | cut -d' ' -f1)
UP_SHA=$(sha256sum "$E2E_TMP/up" | cut -d' ' -f1)
e2e_start_origin "$E2E_TMP/www"

# The control: the same busybox wget on the host, straight to the origin.
got=$(env -i /bin/busybox wget -q -O - "http://127.0.0.1:$ORIGIN_PORT/blob" | sha256sum | cut -d' ' -f1)
check "busybox wget direct on the host (control)" "$BLOB_SHA" "$got"
got=$(env -i /bin/busybox wget -q -O - --post-file "$E2E_TMP/up" "http://127.0.0.1:$ORIGIN_PORT/echo" |
    sha256sum | cut -d' ' -f1)
check "busybox wget --post-file direct on the host (control)" "$UP_SHA" "$got"
: >"$E2E_TMP/origin.log"

# The service's state directory must be its own (not inside $E2E_TMP, which
# the proxy's user owns); the service creates it.
STATE_TOP=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-sandbox-e2e.XXXXXX")
STATE="$STATE_TOP/state"
trap 'e2e_cleanup; rm -rf "$STATE_TOP"' EXIT
SB() { "$SANDBOX" --mechanism gvisor --mode production --state-dir "$STATE" "$@"; }
ID=$(SB create --tenant t1 --lease lease1 --grant "$TOKEN" \
        --proxy-socket "$E2E_TMP/proxy.sock" --proxy-port 3128) ||
    { fail "create with a grant"; exit 1; }

penv=$(SB exec "$ID" -- sh -c 'case "$http_proxy" in http://lease1:*@127.0.0.1:3128) echo tier2;; *) echo "other: ${http_proxy%%:*}";; esac')
check "the sandbox's http_proxy is the tier-2 one (grant in the userinfo)" "tier2" "$penv"

SB exec --timeout 60 "$ID" -- wget -q -O /workspace/blob "http://ok.$D:$ORIGIN_PORT/blob" \
    >"$E2E_TMP/wget.out" 2>&1 || { fail "wget GET inside the sandbox"; cat "$E2E_TMP/wget.out"; }
check "wget GET 1 MiB inside gVisor: byte-identical" "$BLOB_SHA" \
    "$(SB read "$ID" blob | sha256sum | cut -d' ' -f1)"

SB exec --stdin "$ID" -- sh -c 'cat > /workspace/up' <"$E2E_TMP/up" >/dev/null || fail "copying the upload in"
SB exec --timeout 60 "$ID" -- wget -q -O /workspace/echo --post-file /workspace/up \
    "http://ok.$D:$ORIGIN_PORT/echo" >"$E2E_TMP/wget.out" 2>&1 ||
    { fail "wget --post-file inside the sandbox"; cat "$E2E_TMP/wget.out"; }
check "wget --post-file 300000 B inside gVisor: echoed byte-identical" "$UP_SHA" \
    "$(SB read "$ID" echo | sha256sum | cut -d' ' -f1)"
e2e_origin_clean "wget through forwarder and proxy"

# An unlisted host: wget fails with the proxy's 403 (busybox prints no
# header of an error response), the proxy's log has the reason.
SB exec --timeout 60 "$ID" -- wget -S -O /dev/null "http://other.$D:$ORIGIN_PORT/blob" \
    >"$E2E_TMP/wget.out" 2>&1
st=$(tr -d '\r' <"$E2E_TMP/wget.out" | awk '$1 ~ /^HTTP\/1\.[01]$/ {c=$2} END{print c}')
reason=$(grep '"host":"other\.' "$E2E_TMP/proxy.log" | grep -o '"reason":"[a-z_]*"' | tail -n 1)
check "wget of an unlisted host inside gVisor is refused with its reason" \
    '403 "reason":"not_allowlisted"' "$st $reason"
SB destroy "$ID" >/dev/null || fail "destroy"
e2e_finish
