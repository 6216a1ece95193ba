#!/bin/bash
# e2e_http_pip.sh - `pip download` of a wheel from a PEP 503 simple index
# served over plain HTTP, through pinhole-proxy (absolute-form forwarding):
# the proxy from --proxy and from HTTP_PROXY, the grant in its userinfo as
# the sandbox's tier-2 environment sets it; the file's SHA-256 checked (pip
# checks the index's #sha256= too). Direct first (the control), then proxied.
# Usage: e2e_http_pip.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
# Exit: 0 passed, 1 failed, 77 skipped (pip missing).
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
/usr/bin/python3 -m pip --version >/dev/null 2>&1 || { echo "SKIP: needs python3-pip"; exit 77; }
. "$PH_SOURCE_DIR/tests/proxy/http_clients_lib.sh"
e2e_http_setup
read -r WHEEL WHEEL_SHA < <(/usr/bin/python3 "$PH_SOURCE_DIR/tests/proxy/make_wheel.py" \
    "$E2E_TMP/www" pinhole-probe 1.0) || { fail "making the wheel"; exit 1; }
e2e_start_origin "$E2E_TMP/www"

# pip runs in an environment built like the sandbox's (nothing of ours: no
# PIP_* of the host, no config file), plus PIP_ENV's assignments.
mkdir -p "$E2E_TMP/home"
PIP_BASE_ENV="PATH=/usr/local/bin:/usr/bin:/bin HOME=$E2E_TMP/home LANG=C.UTF-8 \
PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 NO_PROXY= no_proxy="

# pip_get NAME HOST:PORT [pip options]: downloads pinhole-probe==1.0 into a
# fresh directory and checks the file.
pip_get() {
    local name=$1 hp=$2 dest="$E2E_TMP/dl.$RANDOM$RANDOM" rc got
    shift 2
    mkdir -p "$dest"
    env -i $PIP_BASE_ENV ${PIP_ENV:-} \
        timeout 120 /usr/bin/python3 -m pip download --no-deps --no-cache-dir \
        --disable-pip-version-check --retries 0 --timeout 20 \
        --index-url "http://$hp/simple/" --trusted-host "$hp" -d "$dest" "$@" \
        pinhole-probe==1.0 >"$E2E_TMP/pip.out" 2>&1; rc=$?
    got=$(sha256sum "$dest/$WHEEL" 2>/dev/null | cut -d' ' -f1)
    if [ "$rc" = 0 ] && [ "$got" = "$WHEEL_SHA" ]; then
        ok "$name: $WHEEL sha256 ${got:0:16}.."
    else
        fail "$name: pip exit $rc, file sha256 '${got:-none}'"; sed 's/^/  /' "$E2E_TMP/pip.out" | tail -15
    fi
}

pip_get "pip download direct (control)" "127.0.0.1:$ORIGIN_PORT"
: >"$E2E_TMP/origin.log"
pip_get "pip download --proxy (grant in userinfo)" "ok.$D:$ORIGIN_PORT" --proxy "$(e2e_proxy_url)"
PIP_ENV="HTTP_PROXY=$(e2e_proxy_url) http_proxy=$(e2e_proxy_url)" \
    pip_get "pip download with HTTP_PROXY" "ok.$D:$ORIGIN_PORT"
e2e_origin_clean "pip through the proxy"
# An index on a host the grant's list does not hold: pip fails, the proxy
# refused it (its log has the reason), the origin saw nothing more.
before=$(wc -l <"$E2E_TMP/origin.log")
env -i $PIP_BASE_ENV timeout 120 /usr/bin/python3 -m pip download --no-deps \
    --no-cache-dir --disable-pip-version-check --retries 0 --timeout 20 \
    --index-url "http://other.$D:$ORIGIN_PORT/simple/" --trusted-host "other.$D:$ORIGIN_PORT" \
    -d "$E2E_TMP/dl.refused" --proxy "$(e2e_proxy_url)" pinhole-probe==1.0 >"$E2E_TMP/pip.out" 2>&1
rc=$?
check "pip download from an unlisted host fails" "1 $before" "$rc $(wc -l <"$E2E_TMP/origin.log")"
grep -q '"reason":"not_allowlisted"' "$E2E_TMP/proxy.log" && ok "the proxy logged not_allowlisted" ||
    fail "no not_allowlisted in the proxy's log"
e2e_finish
