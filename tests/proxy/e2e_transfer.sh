#!/bin/bash
# e2e_transfer.sh - the relay: 1 GiB each way with SHA-256 compared at both
# ends, half-close, the unix socket listener, a reload during a transfer, and
# SIGTERM with a transfer in flight.
# Usage: e2e_transfer.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --unix-socket "$E2E_TMP/proxy.sock" --drain-timeout-s 10 --keep-tunnels-on-reload true
D=$E2E_DOMAIN
PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >"$E2E_TMP/server.out" & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$PEER_PORT"
AUTH="Bearer $TOKEN"

# Compares the client's line ($1) with the server's line for that connection
# ($2): what one sent is what the other received, byte for byte.
same_stream() { # name client_line server_line up down
    set -- "$1" $2 $3 "$4" "$5"
    # client: recv n h sent n h ; server: recv n h sent n h
    local name=$1
    local c_recv_n=$3 c_recv_h=$4 c_sent_n=$6 c_sent_h=$7
    local s_recv_n=$9 s_recv_h=${10} s_sent_n=${12} s_sent_h=${13}
    if [ "$c_sent_n" = "${14}" ] && [ "$c_sent_n" = "$s_recv_n" ] && [ "$c_sent_h" = "$s_recv_h" ] &&
       [ "$c_recv_n" = "${15}" ] && [ "$c_recv_n" = "$s_sent_n" ] && [ "$c_recv_h" = "$s_sent_h" ]; then
        ok "$name (up $c_sent_n B sha256 ${c_sent_h:0:12}.., down $c_recv_n B sha256 ${c_recv_h:0:12}..)"
    else
        fail "$name: client '$2 $3 $4 $5 $6 $7' server '$8 $9 ${10} ${11} ${12} ${13}'"
    fi
}

run_client() { # name proxy up down flags rate
    local before after cl sl
    before=$(wc -l <"$E2E_TMP/server.out")
    cl=$("$PEER" client "$2" "ok.$D:$PEER_PORT" "$AUTH" "$3" "$4" "${5:-0}" "${6:-0}")
    for _ in $(seq 1 50); do
        after=$(wc -l <"$E2E_TMP/server.out"); [ "$after" -gt "$before" ] && break; sleep 0.1
    done
    sl=$(tail -n 1 "$E2E_TMP/server.out")
    same_stream "$1" "$cl" "$sl" "$3" "$4"
}

GIB=1073741824
start=$(date +%s.%N)
run_client "1 GiB each way through one tunnel" "127.0.0.1:$PROXY_PORT" $GIB $GIB
echo "# 2 GiB relayed in $(echo "$(date +%s.%N) - $start" | bc) s"
run_client "half-close: upstream answers only after the client's EOF" "127.0.0.1:$PROXY_PORT" 1048576 1048576 1
run_client "unix socket listener" "$E2E_TMP/proxy.sock" 65536 65536

# Reload during a transfer: with keep_tunnels_on_reload the open tunnel is
# unaffected (e2e_faults.sh: without it, it ends), new requests see the new
# table; a bad table is refused and counted, the good one stays.
reload_before=$(wc -l <"$E2E_TMP/server.out")
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "$AUTH" 30000000 30000000 0 20000000 \
    >"$E2E_TMP/reload_client.out" 2>&1 &
RC_PID=$!
sleep 0.4
"$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist-reloaded.yaml" -o "$E2E_TMP/new.ptab" >/dev/null
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/new.ptab"
mv "$E2E_TMP/new.ptab" "$E2E_TMP/table.ptab"
kill -HUP "$PROXY_PID"
sleep 0.3
st=$(printf 'CONNECT ok.%s:%s HTTP/1.1\r\nProxy-Authorization: %s\r\n\r\n' "$D" "$PEER_PORT" "$AUTH" |
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; head -c 12 <&3" | awk '{print $2}')
check "after SIGHUP the new table decides" "403" "$st"
check "reload counted" "1" "$(e2e_metric 'pinhole_proxy_table_reloads_total{result="ok"}')"
wait "$RC_PID"; rc=$?
# The server writes its line once its side is closed, which can be just
# after the client is done: wait for it as run_client does.
for _ in $(seq 1 50); do
    [ "$(wc -l <"$E2E_TMP/server.out")" -gt "$reload_before" ] && break; sleep 0.1
done
cl=$(cat "$E2E_TMP/reload_client.out")
check "transfer across the reload completed" "0" "$rc"
same_stream "bytes intact across the reload" "$cl" "$(tail -n 1 "$E2E_TMP/server.out")" 30000000 30000000
printf 'not a table' >"$E2E_TMP/bad.ptab"; mv "$E2E_TMP/bad.ptab" "$E2E_TMP/table.ptab"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$ADMIN_PORT/reload")
check "POST /reload of a bad table fails" "500" "$code"
check "failed reload counted" "1" "$(e2e_metric 'pinhole_proxy_table_reloads_total{result="failed"}')"
grep -q '"event":"reload_failed"' "$E2E_TMP/proxy.err" && ok "failed reload logged" || fail "failed reload not logged"
"$PEER" client "127.0.0.1:$PROXY_PORT" "other.$D:$PEER_PORT" "$AUTH" 10 10 >/dev/null &&
    ok "the last good table still serves" || fail "the last good table still serves"

# SIGTERM with a transfer in flight: it completes, the proxy exits 0.
"$PEER" client "127.0.0.1:$PROXY_PORT" "other.$D:$PEER_PORT" "$AUTH" 20000000 20000000 0 20000000 \
    >"$E2E_TMP/drain_client.out" 2>&1 &
DC_PID=$!
sleep 0.3
t0=$(date +%s.%N)
kill -TERM "$PROXY_PID"
sleep 0.2
if (exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT) 2>/dev/null; then fail "still accepting while draining"; else ok "stops accepting on SIGTERM"; fi
wait "$DC_PID"; crc=$?
wait "$PROXY_PID"; prc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
check "in-flight transfer completed during the drain" "0" "$crc"
same_stream "drained transfer intact" "$(cat "$E2E_TMP/drain_client.out")" "$(tail -n 1 "$E2E_TMP/server.out")" 20000000 20000000
check "proxy exits 0 after the drain" "0" "$prc"
[ "$(echo "$took < 10" | bc)" = 1 ] && ok "drain finished in ${took}s (deadline 10 s)" || fail "drain took ${took}s"
e2e_finish
