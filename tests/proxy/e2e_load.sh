#!/bin/bash
# e2e_load.sh - 1,000 slow clients holding connections while ordinary
# requests still succeed; the overall (503) and per-lease (429) limits;
# recovery from descriptor exhaustion (EMFILE) without spinning or dying.
# Usage: e2e_load.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_tls
D=$E2E_DOMAIN
ulimit -n 8192

# 1. 1,000 slow clients. They and the ordinary requests all come from
# 127.0.0.1, one peer: its head-phase cap is raised here, so this measures
# the proxy's capacity (e2e_slow_head.sh tests the per-peer cap).
e2e_start_proxy --header-timeout-ms 20000 --max-head-connections-per-peer 2000
"$PEER" hold "127.0.0.1:$PROXY_PORT" 1000 6 >"$E2E_TMP/hold.out" &
HOLD_PID=$!
for _ in $(seq 1 100); do grep -q opened "$E2E_TMP/hold.out" && break; sleep 0.1; done
check "1,000 slow connections open at once" "1000" "$(e2e_wait_metric pinhole_proxy_connections_active 1000)"
good=0
for i in $(seq 1 20); do
    r=$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)
    [ "$r" = "200 - 200" ] && good=$((good + 1))
done
check "20 ordinary requests succeed beside 1,000 slow clients" "20" "$good"
wait "$HOLD_PID"
check "the slow clients were all held, none answered early" "held 1000" "$(tail -n 1 "$E2E_TMP/hold.out")"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# 2. Overall limit: 503 proxy_overloaded, once the proxy counts all 5 held
# connections (its gauge, polled: no guess of how long accepting takes).
e2e_start_proxy --max-connections 5 --header-timeout-ms 20000
"$PEER" hold "127.0.0.1:$PROXY_PORT" 5 6 >/dev/null &
HOLD_PID=$!
check "the 5 held connections are counted" "5" "$(e2e_wait_metric pinhole_proxy_connections_active 5)"
check "over max_connections: 503" "503 proxy_overloaded 503" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
kill "$HOLD_PID" 2>/dev/null
wait "$HOLD_PID"
check "the held connections are gone" "0" "$(e2e_wait_metric pinhole_proxy_connections_active 0)"
check "below the limit again: 200" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# 3. Per-lease limit: 429 limit_exceeded; another lease is unaffected.
e2e_start_proxy --max-connections-per-lease 1
PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >/dev/null & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$PEER_PORT"
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN" 2000000 0 0 1000000 >/dev/null &
T_PID=$!
check "the lease's first tunnel is open" "1" "$(e2e_wait_metric pinhole_proxy_tunnels_active 1)"
check "second tunnel of one lease: 429" "429 limit_exceeded 429" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
TOKEN_B=$(e2e_issue leaseB e2e)
check "another lease still gets its tunnel" "200 - 200" "$(e2e_curl "leaseB:$TOKEN_B" ok.$D:$TLS_PORT)"
wait "$T_PID"
check "the first tunnel is gone from the proxy" "0" "$(e2e_wait_metric pinhole_proxy_tunnels_active 0)"
check "the lease's slot is free again" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# 4. 64 descriptors: the proxy refuses what it has no room for, then recovers.
(ulimit -n 64; exec "$PROXY" --listen 127.0.0.1:$((PROXY_PORT)) --admin-listen 127.0.0.1:$ADMIN_PORT \
    --table "$E2E_TMP/table.ptab" --grant-key "$E2E_TMP/grant.key" $E2E_USER_OPT \
    --dns-servers 127.0.0.1:"$DNS_PORT" --workers 1 --header-timeout-ms 20000 \
    >"$E2E_TMP/proxy-emfile.log" 2>&1) &
PROXY_PID=$!; E2E_PIDS="$E2E_PIDS $PROXY_PID"
e2e_wait_port "$PROXY_PORT"
"$PEER" hold "127.0.0.1:$PROXY_PORT" 100 4 >/dev/null &
HOLD_PID=$!
# The descriptor reserve caps connections before EMFILE: the excess is
# answered 503 at accept (the accept backoff stays for EMFILE from elsewhere).
# The proxy's CPU time is measured over one second while the held
# connections keep the room full, so every new one meets the reserve: a
# proxy that refuses and waits sleeps; one that spins on the full room burns
# the second.
refusals() { grep -c '"detail":"descriptor reserve reached' "$E2E_TMP/proxy-emfile.log"; }
for _ in $(seq 1 100); do [ "$(refusals)" -gt 0 ] && break; sleep 0.02; done
cpu_pct=$(e2e_cpu_pct "$PROXY_PID")
refused=$(refusals)
[ "${refused:-0}" -gt 0 ] && ok "past the descriptor room: $refused refused 503 at accept" ||
    fail "no 503 at the descriptor reserve"
[ "$cpu_pct" -lt 10 ] && ok "without spinning: ${cpu_pct}% CPU (bound 10%) over 1 s with the room full" ||
    fail "spinning with the room full: ${cpu_pct}% CPU over the window (bound 10%)"
wait "$HOLD_PID"
check "the held connections are gone from the proxy" "0" "$(e2e_wait_metric pinhole_proxy_connections_active 0)"
kill -0 "$PROXY_PID" 2>/dev/null && ok "still running after EMFILE" || fail "proxy died on EMFILE"
check "serves again once descriptors are free" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
e2e_finish
