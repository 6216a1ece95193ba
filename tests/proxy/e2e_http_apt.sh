#!/bin/bash
# e2e_http_apt.sh - apt-get update and apt-get download from a tiny local
# Debian repository over plain HTTP, through pinhole-proxy
# (Acquire::http::Proxy with the grant in its userinfo): the .deb arrives
# byte-identical. apt runs with a private configuration, sources list, state
# and cache, so the host's apt is untouched. Direct first (the control), then
# proxied; a repository on an unlisted host fails the update.
# Usage: e2e_http_apt.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
# Exit: 0 passed, 1 failed, 77 skipped (apt-get or dpkg-deb missing).
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
for t in apt-get dpkg-deb dpkg; do
    command -v "$t" >/dev/null || { echo "SKIP: needs $t"; exit 77; }
done
. "$PH_SOURCE_DIR/tests/proxy/http_clients_lib.sh"
e2e_http_setup
ARCH=$(dpkg --print-architecture)
read -r DEB DEB_SHA < <(/usr/bin/python3 "$PH_SOURCE_DIR/tests/proxy/make_debrepo.py" \
    "$E2E_TMP/www" pinhole-probe 1.0 "$ARCH") || { fail "making the repository"; exit 1; }
e2e_start_origin "$E2E_TMP/www"

# apt_run NAME HOST:PORT PROXY_URL|"" -- APT-GET ARGS: apt-get with a
# private everything (APT_CONFIG: no host apt.conf or apt.conf.d) in
# $E2E_TMP/apt.NAME; output in $E2E_TMP/apt.out.
apt_run() {
    local a="$E2E_TMP/apt.$1" hp=$2 purl=$3
    shift 4
    mkdir -p "$a/empty" "$a/state/lists/partial" "$a/cache/archives/partial" "$a/dl"
    echo "deb [trusted=yes] http://$hp/debian pinhole main" >"$a/sources.list"
    cat >"$a/apt.conf" <<CONF
Dir::Etc::main "$a/empty/none";
Dir::Etc::parts "$a/empty";
Dir::Etc::sourceparts "$a/empty";
Dir::Etc::preferencesparts "$a/empty";
Dir::Etc::trustedparts "$a/empty";
APT::Sandbox::User "root";
Acquire::Languages "none";
Acquire::Retries "0";
Acquire::http::Timeout "20";
CONF
    local popt="Acquire::http::Proxy=false"
    [ -n "$purl" ] && popt="Acquire::http::Proxy=$purl"
    (cd "$a/dl" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 APT_CONFIG="$a/apt.conf" \
        timeout 120 apt-get -q -o Dir::Etc::sourcelist="$a/sources.list" \
        -o Dir::State="$a/state" -o Dir::Cache="$a/cache" -o Debug::NoLocking=1 \
        -o "$popt" "$@") >"$E2E_TMP/apt.out" 2>&1
}

# apt_fetch NAME HOST:PORT PROXY_URL|"": update, then download, then compare.
apt_fetch() {
    local name=$1 a="$E2E_TMP/apt.$1" rc got
    if apt_run "$@" -- update && ! grep -qE '^(W|E):' "$E2E_TMP/apt.out"; then
        ok "$name: apt-get update"
    else
        fail "$name: apt-get update"; sed 's/^/  /' "$E2E_TMP/apt.out" | tail -15; return
    fi
    apt_run "$@" -- download pinhole-probe; rc=$?
    got=$(sha256sum "$a/dl/$(basename "$DEB")" 2>/dev/null | cut -d' ' -f1)
    if [ "$rc" = 0 ] && [ "$got" = "$DEB_SHA" ]; then
        ok "$name: apt-get download, $(basename "$DEB") byte-identical (sha256 ${got:0:16}..)"
    else
        fail "$name: apt-get download exit $rc, sha256 '${got:-none}'"
        sed 's/^/  /' "$E2E_TMP/apt.out" | tail -15
    fi
}

apt_fetch direct "127.0.0.1:$ORIGIN_PORT" ""
: >"$E2E_TMP/origin.log"
apt_fetch proxied "ok.$D:$ORIGIN_PORT" "$(e2e_proxy_url)"
e2e_origin_clean "apt through the proxy"
before=$(wc -l <"$E2E_TMP/origin.log")
apt_run refused "other.$D:$ORIGIN_PORT" "$(e2e_proxy_url)" -- update
if grep -qE "^(W|E):.* 403 " "$E2E_TMP/apt.out" && [ "$(wc -l <"$E2E_TMP/origin.log")" = "$before" ]; then
    ok "apt-get update from an unlisted host fails: $(grep -m1 -E '^(W|E):' "$E2E_TMP/apt.out" | cut -c1-120)"
else
    fail "apt-get update from an unlisted host"; sed 's/^/  /' "$E2E_TMP/apt.out" | tail -8
fi
grep -q '"reason":"not_allowlisted"' "$E2E_TMP/proxy.log" && ok "the proxy logged not_allowlisted" ||
    fail "no not_allowlisted in the proxy's log"
e2e_finish
