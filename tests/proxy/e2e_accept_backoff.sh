#!/bin/bash
# e2e_accept_backoff.sh - the accept backoff (proxy/src/listener.c
# accept_failed, proxy/src/admin.c admin_accept_error_cb): accept failing with
# EMFILE pauses the listener, counts pinhole_proxy_accept_backoffs_total, and
# its timer turns it on again. A preloaded shim (tests/support/accept_fail.c)
# fails every accept on one port while armed; a client waits in the backlog.
# Armed, the proxy must sleep between tries (a few a second, little CPU);
# disarmed, the next try after the pause serves the waiting client.
# Usage: e2e_accept_backoff.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

SHIM=$PH_BINARY_DIR/tests/proxy/libph_accept_fail.so
[ -f "$SHIM" ] || { echo "# skip: no $SHIM"; exit 77; }
export PH_ACCEPT_FAIL=$E2E_TMP/accept-fail

e2e_start_dns
e2e_make_policy
E2E_PROXY_PREFIX="env LD_PRELOAD=$SHIM" e2e_start_proxy --workers 1

failed() { local c; c=$(cat "$PH_ACCEPT_FAIL.n" 2>/dev/null); echo "${c:-0}"; }

# backoff NAME PORT CLIENT...: arms the shim on PORT, starts CLIENT (its
# output into $E2E_TMP/NAME.out), waits for 3 failed accepts, measures the
# proxy's CPU and its failed accepts over one second, disarms, waits for
# CLIENT's end. Sets FAILED (the failed accepts in all).
backoff() {
    echo "$2" >"$PH_ACCEPT_FAIL"
    n=$(failed)
    "${@:3}" >"$E2E_TMP/$1.out" 2>/dev/null &
    client=$!
    for _ in $(seq 1 200); do [ "$(failed)" -ge $((n + 3)) ] && break; sleep 0.025; done
    n0=$(failed)
    pct=$(e2e_cpu_pct "$PROXY_PID")
    tries=$(($(failed) - n0))
    rm -f "$PH_ACCEPT_FAIL"
    wait "$client"
    FAILED=$(failed)
    [ "$n0" -ge $((n + 3)) ] && ok "$1: accept failing with EMFILE" ||
        fail "$1: $((n0 - n)) failed accepts, not 3: the listener not tried again after its pause"
    [ "$pct" -lt 20 ] && [ "$tries" -lt 30 ] &&
        ok "$1: paused while failing: ${pct}% CPU, $tries accepts in 1 s" ||
        fail "$1: retrying without a pause: ${pct}% CPU, $tries accepts in 1 s"
}

backoff worker "$PROXY_PORT" curl -s -m 15 -o /dev/null -w '%{http_code}' \
    -x "http://127.0.0.1:$PROXY_PORT" "http://ok.$E2E_DOMAIN/"
code=$(cat "$E2E_TMP/worker.out")
[ "${code:-000}" != 000 ] && ok "worker: the waiting client answered ($code) after the pause" ||
    fail "worker: the waiting client was never answered (listener left off)"

backoff admin "$ADMIN_PORT" curl -s -m 15 "http://127.0.0.1:$ADMIN_PORT/metrics"
check "admin: /metrics answers after the pause, every failure a backoff" "$FAILED" \
    "$(awk '$1=="pinhole_proxy_accept_backoffs_total"{print $2}' "$E2E_TMP/admin.out")"
e2e_finish
