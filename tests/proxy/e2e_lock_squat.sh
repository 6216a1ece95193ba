#!/bin/bash
# e2e_lock_squat.sh - the instance lock cannot be used by another local user
# to keep pinhole-proxy from starting (proxy/src/listener.c instance_lock):
# any user can bind the abstract name of an address's lock, so a lock held by
# neither root nor the proxy's own user is ignored (a warning says so) and the
# probe of the address decides. A lock a live pinhole-proxy holds still
# refuses a second instance (e2e_faults.sh).
# Usage: e2e_lock_squat.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (to squat as another user)"; exit 77; }
D=$E2E_DOMAIN
e2e_start_dns
e2e_make_policy
e2e_start_tls
PORT=$(e2e_port)
SOCK="$E2E_TMP/px.sock"
chown nobody "$E2E_TMP" "$E2E_TMP"/table.ptab "$E2E_TMP"/grant.key
# nobody squats the lock names of the TCP address and of the unix socket.
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c '
import socket, sys, time
held = []
for name in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX); s.bind("\0pinhole-proxy " + name); s.listen(1); held.append(s)
print("squatting", flush=True)
time.sleep(60)' "listen on 127.0.0.1:$PORT" "unix socket $SOCK" >"$E2E_TMP/squat.out" &
SQUAT=$!; E2E_PIDS="$E2E_PIDS $SQUAT"
for _ in $(seq 1 100); do grep -q squatting "$E2E_TMP/squat.out" && break; sleep 0.05; done
check "the squatter holds both lock names" "squatting" "$(cat "$E2E_TMP/squat.out")"

"$PROXY" --listen 127.0.0.1:"$PORT" --unix-socket "$SOCK" --admin-listen 127.0.0.1:0 \
    --ready-file "$E2E_TMP/squat.ready" --table "$E2E_TMP/table.ptab" \
    --grant-key "$E2E_TMP/grant.key" --dns-servers 127.0.0.1:"$DNS_PORT" --workers 1 \
    --user nobody >"$E2E_TMP/squat.log" 2>"$E2E_TMP/squat.err" &
PROXY_PID=$!
if e2e_wait_ready "$E2E_TMP/squat.ready" "$PROXY_PID"; then
    E2E_PIDS="$E2E_PIDS $PROXY_PID"
    ok "the proxy starts beside another user's squatted locks"
    PROXY_PORT=$PORT
    check "and serves on the TCP address" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
    n=$(grep -c '"event":"instance_lock_squatted"' "$E2E_TMP/squat.log" "$E2E_TMP/squat.err" |
        awk -F: '{s += $NF} END {print s}')
    check "each ignored lock is logged" "2" "$n"
else
    fail "the proxy did not start: $(tail -c 300 "$E2E_TMP/squat.err")"
fi
e2e_finish
