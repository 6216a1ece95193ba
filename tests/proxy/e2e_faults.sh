#!/bin/bash
# e2e_faults.sh - pinhole-proxy survives what a tenant, a DNS server, an
# upstream or an operator can do to it: DNS down, SERVFAIL, truncated (TC)
# and stalling answers; c-ares answering inside ares_getaddrinfo (.onion,
# descriptor exhaustion with uncached names); clients and upstreams
# resetting; a SIGHUP storm during transfers; SIGTERM with lookups in
# flight; a second instance on a held TCP address or unix socket; and
# tunnels ended by grant expiry, key removal and policy revocation. After
# each the proxy is still alive and serving, or exited cleanly where that is
# the point. Under a sanitizer build any report fails the test (e2e_lib.sh).
# Usage: e2e_faults.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/e2e_lib.sh"
NET() { /usr/bin/python3 "$HERE/e2e_faults_net.py" "$@"; }
D=$E2E_DOMAIN

e2e_start_dns
e2e_make_policy
e2e_start_tls
"$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-faults-allowlist.yaml" \
    -o "$E2E_TMP/table.ptab" >/dev/null || { fail "policyc compile"; exit 1; }
"$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-faults-revoked.yaml" \
    -o "$E2E_TMP/revoked.ptab" >/dev/null || { fail "policyc compile"; exit 1; }
cp "$E2E_TMP/table.ptab" "$E2E_TMP/faults.ptab"
cp "$E2E_TMP/grant.key" "$E2E_TMP/grant.key.orig"
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP"/*.ptab

# The misbehaving DNS server (first label decides: ok, servfail, tc, stall, late).
/usr/bin/python3 "$HERE/e2e_faults_dns.py" >"$E2E_TMP/fakedns.out" 2>"$E2E_TMP/fakedns.err" &
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 100); do
    FAKE_DNS_PORT=$(awk '$1=="port"{print $2}' "$E2E_TMP/fakedns.out"); [ -n "$FAKE_DNS_PORT" ] && break; sleep 0.05
done
[ -n "$FAKE_DNS_PORT" ] || { fail "fake DNS server did not start"; exit 1; }

# The byte-checking upstream.
PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >"$E2E_TMP/server.out" & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$PEER_PORT"
AUTH="Bearer $TOKEN"

alive() { kill -0 "$PROXY_PID" 2>/dev/null; }
# wait_exit PID: its exit status, or 124 (and it is stopped) after 10 s.
wait_exit() {
    for _ in $(seq 1 200); do
        kill -0 "$1" 2>/dev/null || { wait "$1"; return; }
        sleep 0.05
    done
    kill "$1"; wait "$1"; return 124
}
# serves NAME: a tunnel through the current proxy to the peer, bytes checked.
serves() {
    local out
    out=$("$PEER" client "127.0.0.1:$PROXY_PORT" "$1:$PEER_PORT" "$AUTH" 20000 30000 2>/dev/null) || return 1
    [ "$(echo "$out" | awk '{print $2, $5}')" = "30000 20000" ]
}
# still_serving WHAT NAME: alive, and a tunnel through it works.
still_serving() {
    if alive && serves "$2"; then ok "$1: the proxy is alive and serving"
    else fail "$1: the proxy died or stopped serving (alive: $(alive && echo yes || echo no))"; fi
}
# A log field of the proxy's connection lines: count of lines matching $2 in $1.log.
log_count() { grep -c -- "$2" "$E2E_TMP/$1.log" 2>/dev/null; }
metric() { curl -s "http://127.0.0.1:$ADMIN_PORT/metrics" | awk -v k="$1" 'index($0, k" ")==1{print $2}'; }
# The peer client in the background, slow: up bytes at rate B/s.
slow_client() { # out_file name up rate [auth]
    "$PEER" client "127.0.0.1:$PROXY_PORT" "$2:$PEER_PORT" "${5:-$AUTH}" "$3" 1000 0 "$4" >"$E2E_TMP/$1" 2>&1 &
}
wait_tunnels() { # n: until n tunnels are open (5 s at most)
    for _ in $(seq 1 100); do [ "$(metric pinhole_proxy_tunnels_active)" = "$1" ] && return 0; sleep 0.05; done
    return 1
}
reload_to() { # file: atomically make it the table, then SIGHUP
    cp "$1" "$E2E_TMP/next.ptab"; [ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/next.ptab"
    mv "$E2E_TMP/next.ptab" "$E2E_TMP/table.ptab"
    kill -HUP "$PROXY_PID"
}
wait_reloads() { # n: until n reloads (ok + failed) were counted
    for _ in $(seq 1 100); do
        [ $(( $(metric 'pinhole_proxy_table_reloads_total{result="ok"}') + \
              $(metric 'pinhole_proxy_table_reloads_total{result="failed"}') )) -ge "$1" ] && return 0
        sleep 0.05
    done
    return 1
}

# ---- 1. DNS answers that fail ------------------------------------------------
# A timeout long enough that the fake server (a Python thread per query)
# answers well inside it with both cores busy; the stall case waits it out.
E2E_PROXY_NAME=dnsfault e2e_start_proxy --dns-servers 127.0.0.1:"$FAKE_DNS_PORT" --dns-timeout-ms 3000
check "SERVFAIL: 502 dns_failure" "502 dns_failure" "$(NET connect "$PROXY_PORT" servfail.fake.test:443 "$AUTH")"
still_serving "after SERVFAIL" ok.fake.test
grep -q "\"host\":\"ok.fake.test\",\"port\":$PEER_PORT,\"dialed\":\"127.0.0.1:$PEER_PORT\",\"checked\":\[\"127.0.0.1\"\]" \
    "$E2E_TMP/dnsfault.log" && ok "a tunnel's log line has the dialed address and the checked list" ||
    fail "dialed/checked missing: $(grep -m1 ok.fake.test "$E2E_TMP/dnsfault.log")"
check "truncated answer (TC over UDP, cut over TCP): 502 dns_failure" "502 dns_failure" \
    "$(NET connect "$PROXY_PORT" tc.fake.test:443 "$AUTH")"
still_serving "after a truncated answer" ok.fake.test
check "stalling server: 504 dns_timeout" "504 dns_timeout" "$(NET connect "$PROXY_PORT" stall.fake.test:443 "$AUTH")"
still_serving "after a stalling server" ok.fake.test

# ---- 2. c-ares answering inside ares_getaddrinfo: .onion --------------------
check ".onion name: 502 dns_failure" "502 dns_failure" "$(NET connect "$PROXY_PORT" abcdefghij.onion:443 "$AUTH")"
check ".onion name again (the cached refusal)" "502 dns_failure" "$(NET connect "$PROXY_PORT" abcdefghij.onion:443 "$AUTH")"
still_serving "after .onion" ok.fake.test

# ---- 3. clients resetting ----------------------------------------------------
lines=$(wc -l <"$E2E_TMP/dnsfault.log")
NET reset-mid-head "$PROXY_PORT" ok.fake.test:443
# Reset while the proxy resolves: the answer comes 300 ms after the client left,
# or never (the lookup times out after the connection is gone).
NET reset-in-lookup "$PROXY_PORT" late.fake.test:443 "$AUTH" 20
NET reset-in-lookup "$PROXY_PORT" stall.fake.test:443 "$AUTH" 20
still_serving "after 41 client resets mid-CONNECT" ok.fake.test
# Until the stalled lookups time out (20 s at most), each ending its line.
for _ in $(seq 1 400); do
    [ $(( $(wc -l <"$E2E_TMP/dnsfault.log") - lines )) -ge 42 ] && break; sleep 0.05
done
check "each reset connection ended with its log line" "42" \
    "$(( $(wc -l <"$E2E_TMP/dnsfault.log") - lines ))"

# ---- 4. an upstream resetting mid-transfer ----------------------------------
/usr/bin/python3 "$HERE/e2e_faults_net.py" rst-upstream >"$E2E_TMP/rst.out" & E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 100); do RST_PORT=$(awk '$1=="port"{print $2}' "$E2E_TMP/rst.out"); [ -n "$RST_PORT" ] && break; sleep 0.05; done
r=$(NET tunnel-reset "$PROXY_PORT" "ok.fake.test:$RST_PORT" "$AUTH")
case "$r" in "200 65536 "*) ok "upstream reset mid-transfer: tunnel cut after its 64 KiB ($r)" ;;
    *) fail "upstream reset mid-transfer: $r" ;; esac
sleep 0.2
check "logged as end=upstream_error" "1" "$(log_count dnsfault '"end":"upstream_error"')"
still_serving "after an upstream reset" ok.fake.test
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
check "exits 0 afterwards" "0" "$?"

# ---- 5. DNS server down (nothing listens on its port) -----------------------
DEAD_PORT=$(e2e_port)
E2E_PROXY_NAME=dnsdown e2e_start_proxy --dns-servers 127.0.0.1:"$DEAD_PORT" --dns-timeout-ms 800
r=$(NET connect "$PROXY_PORT" ok.fake.test:443 "$AUTH")
case "$r" in "502 dns_failure"|"504 dns_timeout") ok "DNS down: $r" ;; *) fail "DNS down: $r" ;; esac
r=$(NET connect "$PROXY_PORT" other.fake.test:443 "$AUTH")
case "$r" in "502 dns_failure"|"504 dns_timeout") ok "DNS down, another name: $r" ;; *) fail "DNS down: $r" ;; esac
check "DNS down: still deciding (not allowlisted is 403)" "403 not_allowlisted" \
    "$(NET connect "$PROXY_PORT" ok.elsewhere.test:443 "$AUTH")"
alive && ok "DNS down: alive" || fail "DNS down: the proxy died"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

# ---- 6. descriptor exhaustion with uncached names ----------------------------
E2E_PROXY_NAME=emfile E2E_PROXY_PREFIX="prlimit --nofile=64:64" e2e_start_proxy --workers 1
r=$(NET flood "$PROXY_PORT" uncached.$D "$AUTH" 60)
echo "# 60 CONNECTs to uncached names, each beside one more idle connection: $r"
case " $r " in *" 503:"*) ok "over the descriptor reserve: 503 proxy_overloaded ($r)" ;;
    *) fail "no 503 at the descriptor reserve: $r" ;; esac
case " $r " in *" 502:"*) ok "uncached names resolved while descriptors were short (502 NXDOMAIN)" ;;
    *) fail "no lookup completed: $r" ;; esac
grep -q 'descriptor reserve reached' "$E2E_TMP/emfile.log" && ok "the 503s name the descriptor reserve" ||
    fail "503 log lines do not name the descriptor reserve"
sleep 0.3
alive && ok "alive after the flood" || fail "the proxy died in the flood (exit $(wait "$PROXY_PID"; echo $?))"
check "serves again once descriptors are free" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
check "and resolves uncached names again" "502 dns_failure" "$(NET connect "$PROXY_PORT" again.uncached.$D:443 "$AUTH")"
grep -q '"event":"limits".*room for' "$E2E_TMP/emfile.err" && ok "start-up logs the connection room" ||
    fail "no limits event"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
E2E_PROXY_NAME=nofile E2E_PROXY_PREFIX="prlimit --nofile=256:4096" e2e_start_proxy --workers 1
grep -q '"event":"limits","message":"descriptor limit: soft 256 -> 4096' "$E2E_TMP/nofile.err" &&
    ok "the soft descriptor limit is raised to the hard one, and logged" ||
    fail "limit not raised: $(grep limits "$E2E_TMP/nofile.err")"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

# ---- 7. a SIGHUP storm during transfers --------------------------------------
E2E_PROXY_NAME=storm e2e_start_proxy
cp "$E2E_TMP/faults.ptab" "$E2E_TMP/a.ptab"
"$POLICYC" compile "$PH_SOURCE_DIR/tests/proxy/data/e2e-allowlist.yaml" -o "$E2E_TMP/b.ptab" >/dev/null
before=$(wc -l <"$E2E_TMP/server.out")
for i in 1 2 3 4; do
    "$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "$AUTH" $((6000000 + i)) $((5000000 + i)) 0 4000000 \
        >"$E2E_TMP/storm$i.out" 2>&1 &
    eval "STORM$i=\$!"
done
wait_tunnels 4 || fail "the storm's transfers did not start"
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/a.ptab" "$E2E_TMP/b.ptab"
# 100 times in one second: the table replaced (alternately by two tables that
# both allow ok.$D) and SIGHUP.
/usr/bin/python3 - "$E2E_TMP" "$PROXY_PID" <<'PY'
import os, signal, sys, time
d, pid = sys.argv[1], int(sys.argv[2])
t0 = time.monotonic()
for i in range(100):
    os.link(f"{d}/{'ab'[i % 2]}.ptab", f"{d}/next.ptab")
    os.rename(f"{d}/next.ptab", f"{d}/table.ptab")
    os.kill(pid, signal.SIGHUP)
    time.sleep(max(0.0, t0 + (i + 1) / 100 - time.monotonic()))
print(f"# 100 SIGHUPs in {time.monotonic() - t0:.2f} s")
PY
for i in 1 2 3 4; do
    eval "wait \$STORM$i"; rc=$?
    cl=$(cat "$E2E_TMP/storm$i.out")
    # client "recv N H sent N H"; the server's line for it has the mirror image.
    set -- $cl
    if [ "$rc" = 0 ] && [ "${2:-}" = $((5000000 + i)) ] && [ "${5:-}" = $((6000000 + i)) ] &&
       grep -q "^recv $5 $6 sent $2 $3\$" "$E2E_TMP/server.out"; then
        ok "transfer $i through the storm: bytes intact at both ends (up $5, down $2)"
    else
        fail "transfer $i through the storm: rc=$rc client '$cl'"
    fi
done
wait_reloads 1
sleep 0.5
okr=$(metric 'pinhole_proxy_table_reloads_total{result="ok"}')
check "no reload of the storm failed" "0" "$(metric 'pinhole_proxy_table_reloads_total{result="failed"}')"
[ "${okr:-0}" -ge 50 ] && ok "$okr of 100 SIGHUPs reloaded (signals may coalesce)" || fail "only ${okr:-0} reloads"
still_serving "after the SIGHUP storm" ok.$D
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
check "exits 0 after the storm" "0" "$?"

# ---- 8. SIGTERM with lookups in flight ----------------------------------------
cp "$E2E_TMP/faults.ptab" "$E2E_TMP/table.ptab"
E2E_PROXY_NAME=termdns e2e_start_proxy --dns-servers 127.0.0.1:"$FAKE_DNS_PORT" --drain-timeout-s 1
NET hold-lookups "$PROXY_PORT" stall.fake.test:443 "$AUTH" 20 10 >"$E2E_TMP/hold.out" &
HOLD=$!
for _ in $(seq 1 100); do grep -q sent "$E2E_TMP/hold.out" && break; sleep 0.05; done
NET reset-in-lookup "$PROXY_PORT" late.fake.test:443 "$AUTH" 5 &
sleep 0.3
t0=$(date +%s.%N)
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
check "SIGTERM with 20 lookups in flight: exit 0" "0" "$rc"
[ "$(echo "$took < 3" | bc)" = 1 ] && ok "drained at the 1 s deadline (${took}s)" || fail "drain took ${took}s"
wait "$HOLD"
check "the waiting clients were closed, none answered" "answered 0 closed 20" "$(tail -n 1 "$E2E_TMP/hold.out")"
check "their log lines say end=shutdown" "20" "$(log_count termdns '"end":"shutdown"')"

# ---- 9. a second instance -----------------------------------------------------
E2E_PROXY_NAME=first e2e_start_proxy --unix-socket "$E2E_TMP/px.sock"
FIRST_PID=$PROXY_PID FIRST_PORT=$PROXY_PORT FIRST_ADMIN=$ADMIN_PORT
# second_instance OPTIONS...: starts another proxy; prints its exit status
# (124: it was still running after 10 s), its stderr in second.err.
second_instance() {
    "$PROXY" --admin-listen "" --table "$E2E_TMP/table.ptab" --grant-key "$E2E_TMP/grant.key" \
        --dns-servers 127.0.0.1:"$DNS_PORT" $E2E_USER_OPT "$@" \
        >"$E2E_TMP/second.log" 2>"$E2E_TMP/second.err" &
    wait_exit $!
    echo $?
}
check "second instance on the same TCP address: exit 3" "3" "$(second_instance --listen 127.0.0.1:"$FIRST_PORT")"
grep -q "127.0.0.1:$FIRST_PORT is held by another pinhole-proxy (pid $FIRST_PID)" "$E2E_TMP/second.err" &&
    ok "its error names the held address: $(grep -m1 held "$E2E_TMP/second.err")" || fail "second.err: $(cat "$E2E_TMP/second.err")"
check "second instance on the same unix socket: exit 3" "3" \
    "$(second_instance --listen 127.0.0.1:0 --unix-socket "$E2E_TMP/px.sock")"
grep -q "px.sock is held by another pinhole-proxy (pid $FIRST_PID)" "$E2E_TMP/second.err" &&
    ok "its error names the holder: $(grep -m1 held "$E2E_TMP/second.err")" || fail "second.err: $(cat "$E2E_TMP/second.err")"
# A holder that is not pinhole-proxy (SO_REUSEPORT, the same user) is found by the probe.
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
s.bind(("127.0.0.1", 0)); s.listen(8); print(s.getsockname()[1], flush=True); time.sleep(60)' \
    >"$E2E_TMP/holder.out" & HOLDER=$!; E2E_PIDS="$E2E_PIDS $HOLDER"
for _ in $(seq 1 100); do HOLDER_PORT=$(cat "$E2E_TMP/holder.out"); [ -n "$HOLDER_PORT" ] && break; sleep 0.05; done
check "an address another (SO_REUSEPORT) server holds: exit 3" "3" "$(second_instance --listen 127.0.0.1:"$HOLDER_PORT")"
grep -q "127.0.0.1:$HOLDER_PORT: the address is held by a live listener" "$E2E_TMP/second.err" &&
    ok "its error names the held address: $(grep -m1 held "$E2E_TMP/second.err")" ||
    fail "second.err: $(cat "$E2E_TMP/second.err")"
kill "$HOLDER"
ADMIN_PORT=$FIRST_ADMIN
still_serving "the first instance, over TCP" ok.$D
"$PEER" client "$E2E_TMP/px.sock" "ok.$D:$PEER_PORT" "$AUTH" 1000 1000 >/dev/null 2>&1 &&
    ok "the first instance still owns its unix socket" || fail "the unix socket was taken over"
grep -q '"peer":"unix pid=' "$E2E_TMP/first.log" && ok "unix peers are logged with their pid" ||
    fail "unix peer identity missing in the log"
kill -TERM "$FIRST_PID"; wait "$FIRST_PID"
# A stale socket (nothing accepts on it) is replaced.
/usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$E2E_TMP/stale.sock"
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/stale.sock"
E2E_PROXY_NAME=stale e2e_start_proxy --unix-socket "$E2E_TMP/stale.sock"
"$PEER" client "$E2E_TMP/stale.sock" "ok.$D:$PEER_PORT" "$AUTH" 1000 1000 >/dev/null 2>&1 &&
    ok "a stale unix socket is replaced and served" || fail "stale unix socket not replaced"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

# ---- 10. tunnels end with their grant, key or destination ---------------------
now=$(date +%s)
TOKEN_SHORT=$(e2e_issue lease1 e2e --not-before $((now - 100)) --ttl 103)   # about 3 s left
E2E_PROXY_NAME=expiry e2e_start_proxy
t0=$(date +%s.%N)
slow_client expiry.out ok.$D 4000000 400000 "Bearer $TOKEN_SHORT"; C=$!
wait "$C"; rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
[ "$rc" != 0 ] && [ "$(echo "$took < 7" | bc)" = 1 ] && ok "a tunnel ends when its grant expires (after ${took}s)" ||
    fail "grant expiry: client rc=$rc after ${took}s"
check "logged as end=grant_expired" "1" "$(log_count expiry '"end":"grant_expired"')"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

E2E_PROXY_NAME=keyrevoke e2e_start_proxy --dns-servers 127.0.0.1:"$FAKE_DNS_PORT"
slow_client keyrevoke.out ok.$D 4000000 400000; C=$!
wait_tunnels 1 || fail "key removal: tunnel did not open"
# Beside the tunnel, a connection still resolving (its name never answers).
NET connect "$PROXY_PORT" stall.fake.test:443 "$AUTH" >"$E2E_TMP/keyrevoke-lookup.out" 2>&1 & L=$!
for _ in $(seq 1 100); do [ "$(metric pinhole_proxy_connections_active)" = 2 ] && break; sleep 0.05; done
"$GRANT" keygen --kid rotated --output "$E2E_TMP/new.key"
[ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/new.key"
mv "$E2E_TMP/new.key" "$E2E_TMP/grant.key"
kill -HUP "$PROXY_PID"
wait "$C"; rc=$?
[ "$rc" != 0 ] && ok "a tunnel ends when its grant's key is removed" || fail "key removal: transfer completed"
wait "$L"
check "a connection still resolving is refused at the reload" "407 grant_invalid" \
    "$(cat "$E2E_TMP/keyrevoke-lookup.out")"
check "both logged as end=key_revoked, the detail after reload" "2" \
    "$(log_count keyrevoke '"detail":"after reload: .*"end":"key_revoked"')"
check "the tunnel's line keeps its decision (grant, host, rule, policy, addresses)" "1" \
    "$(/usr/bin/python3 -c '
import json, sys
n = 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("end") == "key_revoked" and r["status"] == 200:
        n += (r["tenant"], r["lease"], r["list"], r["host"]) == ("t1", "lease1", "e2e", sys.argv[2]) and \
             r["port"] > 0 and r["rule"].startswith("e2e-faults-allowlist.yaml:") and \
             len(r["policy_id"]) == 64 and r["checked"] == ["127.0.0.1"] and \
             r["dialed"] == "127.0.0.1:%d" % r["port"] and r["bytes_up"] > 0
print(n)' "$E2E_TMP/keyrevoke.log" "ok.$D")"
check "a new request with that grant: 407 grant_invalid" "407 grant_invalid" \
    "$(NET connect "$PROXY_PORT" ok.$D:$PEER_PORT "$AUTH")"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
cp "$E2E_TMP/grant.key.orig" "$E2E_TMP/grant.key"

E2E_PROXY_NAME=polrevoke e2e_start_proxy --dns-servers 127.0.0.1:"$FAKE_DNS_PORT"
slow_client polrevoke.out ok.$D 4000000 400000; C=$!
wait_tunnels 1 || fail "policy revocation: tunnel did not open"
reload_to "$E2E_TMP/revoked.ptab"
wait "$C"; rc=$?
[ "$rc" != 0 ] && ok "a tunnel ends when a reload stops allowing its destination" ||
    fail "policy revocation: transfer completed"
check "logged as end=policy_revoked" "1" "$(log_count polrevoke '"end":"policy_revoked"')"
still_serving "after the revocation (a destination still allowed)" ok.fake.test
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

cp "$E2E_TMP/faults.ptab" "$E2E_TMP/table.ptab"
E2E_PROXY_NAME=keep e2e_start_proxy --keep-tunnels-on-reload true
slow_client keep.out ok.$D 1200000 400000; C=$!
wait_tunnels 1 || fail "keep_tunnels_on_reload: tunnel did not open"
reload_to "$E2E_TMP/revoked.ptab"
wait "$C"
check "keep_tunnels_on_reload: the tunnel outlives the reload, bytes intact" "1200000" \
    "$(awk '{print $5}' "$E2E_TMP/keep.out")"
check "while new requests see the new table" "403 not_allowlisted" "$(NET connect "$PROXY_PORT" ok.$D:$PEER_PORT "$AUTH")"
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"

# ---- 11. a reload is whole or nothing -------------------------------------------
cp "$E2E_TMP/faults.ptab" "$E2E_TMP/table.ptab"
E2E_PROXY_NAME=partial e2e_start_proxy
# A new table that no longer allows ok.$D, beside a key file that cannot load.
cp "$E2E_TMP/revoked.ptab" "$E2E_TMP/next.ptab"; printf 'not a key file\n' >"$E2E_TMP/bad.key"
chmod 600 "$E2E_TMP/bad.key"; [ "$(id -u)" = 0 ] && chown nobody "$E2E_TMP/next.ptab" "$E2E_TMP/bad.key"
mv "$E2E_TMP/next.ptab" "$E2E_TMP/table.ptab"; mv "$E2E_TMP/bad.key" "$E2E_TMP/grant.key"
kill -HUP "$PROXY_PID"
wait_reloads 1
check "table fine, keys broken: the reload fails" "1" "$(metric 'pinhole_proxy_table_reloads_total{result="failed"}')"
check "and the old table still decides (ok.$D allowed)" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
grep -q '"event":"reload_failed".*grant keys' "$E2E_TMP/partial.err" && ok "reload_failed names the key file" ||
    fail "reload_failed event: $(grep reload "$E2E_TMP/partial.err")"
still_serving "after the failed reload" ok.$D
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
check "exits 0 at the end" "0" "$?"
e2e_finish
