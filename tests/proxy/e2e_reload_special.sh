#!/bin/bash
# e2e_reload_special.sh - a reload meets something other than a regular file
# at the table or grant-key path: a FIFO (no writer), a symlink to one, a
# device, a directory. Each is refused at once with its reason (POST /reload
# answers 500 naming the file's type, reload_failed is logged and counted),
# the admin endpoints keep answering (the reload runs on the main loop: an
# open(2) waiting for a FIFO's writer would stop /healthz, /metrics and
# POST /reload until another signal came), and the old table and keys stay
# in force.
# Usage: e2e_reload_special.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

e2e_start_dns
e2e_make_policy
e2e_start_proxy
e2e_start_forward_peer
D=$E2E_DOMAIN
P="http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"
TABLE=$E2E_TMP/table.ptab KEYS=$E2E_TMP/grant.key
cp -p "$TABLE" "$E2E_TMP/table.real"
cp -p "$KEYS" "$E2E_TMP/keys.real"

admin() { # METHOD PATH: "<status> <body>" within 3 s, "000" when none came
    rm -f "$E2E_TMP/admin.body"
    curl -s -o "$E2E_TMP/admin.body" -w '%{http_code}' --max-time 3 -X "$1" \
        "http://127.0.0.1:$ADMIN_PORT$2"
    printf ' %s' "$(tr -d '\r' <"$E2E_TMP/admin.body" 2>/dev/null | head -c 300)"
}
# A proxy stuck in open(2) on a FIFO is freed by a writer coming and going
# (it then reads an empty file), so a failing run still ends.
unstick() { [ -p "$1" ] && timeout 2 sh -c ": >'$1'" 2>/dev/null; }
# Polls the failed-reload count (each fetch bounded: a proxy stuck in a
# reload answers none) until it is $1, for up to ~5 s; prints the last seen.
wait_failed() {
    local v=""
    for _ in $(seq 1 50); do
        v=$(curl -s --max-time 1 "http://127.0.0.1:$ADMIN_PORT/metrics" |
            awk 'index($0, "pinhole_proxy_table_reloads_total{result=\"failed\"} ")==1{print $2}')
        [ "$v" = "$1" ] && break
        sleep 0.1
    done
    echo "${v:-none}"
}
still_allowed() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 -x "$P" "http://ok.$D:$UP/still"
}

# special NAME PATH WHAT: PATH (the table or the key file) is something
# other than a regular file; POST /reload and SIGHUP are refused at once.
n=0
special() {
    local name=$1 path=$2 what=$3 t0 t1 got
    t0=$(date +%s%N)
    got=$(admin POST /reload)
    t1=$(date +%s%N)
    unstick "$path"
    case "$got" in
    "500 "*"not a regular file ($what)"*) ok "$name: POST /reload refused in $(( (t1 - t0) / 1000000 )) ms" ;;
    *) fail "$name: POST /reload: got '$got'" ;;
    esac
    n=$((n + 1))
    check "$name: counted as a failed reload" "$n" "$(wait_failed "$n")"
    kill -HUP "$PROXY_PID"
    n=$((n + 1))
    got=$(wait_failed "$n")
    health=$(admin GET /healthz)
    unstick "$path"
    check "$name: SIGHUP refused too" "$n" "$got"
    check "$name: /healthz answers after the SIGHUP" "200 ok" "$health"
    n=$(wait_failed "$n") # a stuck reload, freed, counts too
    check "$name: the old table and keys stay in force" "200" "$(still_allowed)"
}

rm -f "$TABLE"; mkfifo -m 644 "$TABLE"; chown nobody "$TABLE"
special "table is a FIFO" "$TABLE" "a FIFO"
check "reload_failed logged with the reason (POST /reload, SIGHUP)" "2" \
    "$(grep -c '"event":"reload_failed".*not a regular file (a FIFO); the old table, keys and revocations stay in force' "$E2E_TMP/proxy.err")"
rm -f "$TABLE"; mkfifo -m 644 "$E2E_TMP/fifo"; ln -s "$E2E_TMP/fifo" "$TABLE"
special "table is a symlink to a FIFO" "$E2E_TMP/fifo" "a FIFO"
rm -f "$TABLE"; ln -s /dev/zero "$TABLE"
special "table is a device" "$TABLE" "a character device"
rm -f "$TABLE"; mkdir "$TABLE"
special "table is a directory" "$TABLE" "a directory"
rmdir "$TABLE"; cp -p "$E2E_TMP/table.real" "$TABLE"

rm -f "$KEYS"; mkfifo -m 600 "$KEYS"; chown nobody "$KEYS"
special "grant keys are a FIFO" "$KEYS" "a FIFO"
rm -f "$KEYS"; cp -p "$E2E_TMP/keys.real" "$KEYS"

got=$(admin POST /reload)
check "a regular table and key file reload again" "200" "${got%% *}"
e2e_finish
