#!/bin/bash
# e2e_revoke.sh - revoking a lease now (--revocations, pinhole-guard revoke):
# lease A's tunnel moving data, its forwarded request in flight and its
# kept-alive forwarding connection end within one reload (end=lease_revoked),
# while lease B's tunnel and kept-alive connection go on, byte-identical; a
# new request of A is refused 407 lease_revoked; a corrupt list is refused
# whole with the old one in force; reload storms (SIGHUP and POST /reload,
# good and corrupt lists) under B's traffic.
# Usage: e2e_revoke.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
D=$E2E_DOMAIN
e2e_two_leases

PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >"$E2E_TMP/serve.out" & E2E_PIDS="$E2E_PIDS $!"
# The upstream's line for the connection that received BYTES: written when
# the upstream finished its side, which may be after the client exited
# (seen beside stress-ng), so it is waited for (10 s at most).
serve_line() { # BYTES
    local l="" i
    for i in $(seq 200); do
        l=$(awk -v n="$1" '$2 == n' "$E2E_TMP/serve.out")
        [ -n "$l" ] && break
        sleep 0.05
    done
    echo "$l"
}
e2e_wait_port "$PEER_PORT"
e2e_start_forward_peer
e2e_start_proxy --revocations "$REV"

reloads() { # ok + failed reloads counted so far
    echo $(( $(e2e_metric 'pinhole_proxy_table_reloads_total{result="ok"}') + \
             $(e2e_metric 'pinhole_proxy_table_reloads_total{result="failed"}') ))
}
wait_reloads() { # n: until n reloads were counted (5 s at most)
    for _ in $(seq 1 100); do [ "$(reloads)" -ge "$1" ] && return 0; sleep 0.05; done
    return 1
}
wait_file() { # path: until it exists (10 s at most)
    for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
# A kept-alive forwarding connection: one request, its answer, then (the
# file $3/ready written) either wait for the proxy to close it (A) or, once
# $3/go exists, send a second request on it (B). Prints what it saw.
keepalive() { # token tag dir
    /usr/bin/python3 - "$PROXY_PORT" "ok.$D:$UP" "$1" "$3" "$2" <<'PY'
import os, socket, sys, time
port, target, token, d, tag = sys.argv[1:]
s = socket.create_connection(("127.0.0.1", int(port)))
s.settimeout(20)
def request(path):
    s.sendall(("GET http://%s/%s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Bearer %s\r\n\r\n"
               % (target, path, target, token)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return "eof"
        buf += chunk
    head, body = buf.split(b"\r\n\r\n", 1)
    n = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
    while len(body) < n:
        body += s.recv(65536)
    return head.split(b" ")[1].decode() + " " + body.decode()
first = request(tag + "-1")
open(os.path.join(d, "ready"), "w").write(first)
if tag == "A":
    t0 = time.monotonic()
    try:
        data = s.recv(1)
        print("first %s; then %s" % (first, "closed by the proxy" if data == b"" else "data"))
    except socket.timeout:
        print("first %s; then still open after 20 s" % first)
else:
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.02)
    print("first %s; second %s" % (first, request(tag + "-2")))
PY
}

# ---- 1. lease A's connections end within one reload; lease B's go on ----------
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN_A" 4000000 1000 0 400000 \
    >"$E2E_TMP/tunnel-a.out" 2>&1 & CA=$!
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN_B" 3000000 70000 0 400000 \
    >"$E2E_TMP/tunnel-b.out" 2>&1 & CB=$!
check "both tunnels open" "2" "$(e2e_wait_metric pinhole_proxy_tunnels_active 2)"
mkdir -p "$E2E_TMP/ka" "$E2E_TMP/kb"
keepalive "$TOKEN_A" A "$E2E_TMP/ka" >"$E2E_TMP/ka.out" 2>&1 & KA=$!
keepalive "$TOKEN_B" B "$E2E_TMP/kb" >"$E2E_TMP/kb.out" 2>&1 & KB=$!
# A forwarded request of A in flight: /trickle sends a body byte every 0.5 s.
curl -sN --max-time 30 -x "http://127.0.0.1:$PROXY_PORT" \
    --proxy-header "Proxy-Authorization: Bearer $TOKEN_A" "http://ok.$D:$UP/trickle" \
    >"$E2E_TMP/trickle.out" 2>/dev/null & TR=$!
wait_file "$E2E_TMP/ka/ready" && wait_file "$E2E_TMP/kb/ready" && wait_file "$E2E_TMP/trickle.out" ||
    fail "the forwarding clients did not start"

"$GRANT" revoke --tenant t1 --lease leaseA --file "$REV" >"$E2E_TMP/revoke.out" ||
    fail "pinhole-guard revoke: $(cat "$E2E_TMP/revoke.out")"
check "pinhole-guard revoke wrote one live entry" "1" \
    "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["entries"])' "$E2E_TMP/revoke.out")"
t0=$(date +%s.%N)
kill -HUP "$PROXY_PID"
wait_reloads 1 || fail "the reload was not counted"
check "exactly one reload, and it worked" "1 0" \
    "$(e2e_metric 'pinhole_proxy_table_reloads_total{result="ok"}') $(e2e_metric 'pinhole_proxy_table_reloads_total{result="failed"}')"
wait "$CA"; rca=$?
wait "$KA"
wait "$TR"
took=$(echo "$(date +%s.%N) - $t0" | bc)
[ "$rca" != 0 ] && ok "lease A's tunnel ended at the reload (its client saw it ${took}s after SIGHUP)" ||
    fail "lease A's tunnel completed its transfer"
check "lease A's kept-alive connection was closed by the proxy" "first 200 hello /A-1; then closed by the proxy" \
    "$(cat "$E2E_TMP/ka.out")"
trickled=$(wc -c <"$E2E_TMP/trickle.out")
[ "$trickled" -lt 40 ] && ok "lease A's forwarded request was cut ($trickled of 40 body bytes)" ||
    fail "lease A's trickle completed ($trickled bytes)"
touch "$E2E_TMP/kb/go"
wait "$KB"
check "lease B's kept-alive connection goes on: a second request on it" \
    "first 200 hello /B-1; second 200 hello /B-2" "$(cat "$E2E_TMP/kb.out")"
wait "$CB"; rcb=$?
# B's bytes, end to end: what its client sent is what the upstream received,
# and the reverse (the upstream's line for the 3000000-byte connection).
read -r _ b_recv b_recv_sha _ b_sent b_sent_sha < <(grep '^recv ' "$E2E_TMP/tunnel-b.out")
read -r _ u_recv u_recv_sha _ u_sent u_sent_sha < <(serve_line 3000000)
check "lease B's tunnel completed (exit 0, 3000000 up, 70000 down)" "0 3000000 70000" "$rcb $b_sent $b_recv"
check "lease B's bytes are identical at both ends" "$b_sent_sha $b_recv_sha" "$u_recv_sha $u_sent_sha"

check "A's tunnel is logged end=lease_revoked, its decision kept" "1" \
    "$(e2e_log_lines 'r["event"] == "connection" and r["lease"] == "leaseA" and r["status"] == 200 and r["end"] == "lease_revoked" and r["bytes_up"] > 0 and r["detail"].startswith("after reload: lease leaseA of tenant t1")')"
check "A's forwarded request in flight is logged end=lease_revoked" "1" \
    "$(e2e_log_lines 'r["event"] == "request" and r["lease"] == "leaseA" and r["end"] == "lease_revoked"')"
check "nothing of lease B ended lease_revoked" "0" \
    "$(e2e_log_lines 'r["lease"] == "leaseB" and r["end"] == "lease_revoked"')"
grep -q '"event":"reload".*revocations replaced, 1 entry' "$E2E_TMP/proxy.err" &&
    ok "the reload event says the revocation list was replaced (1 entry)" ||
    fail "reload event: $(grep '"reload"' "$E2E_TMP/proxy.err")"

# ---- 2. new requests of A are refused 407 lease_revoked -------------------------
check "a new CONNECT of lease A: 407" "407" \
    "$(e2e_raw "CONNECT ok.$D:$PEER_PORT HTTP/1.1\r\nHost: ok.$D:$PEER_PORT\r\nProxy-Authorization: Bearer $TOKEN_A\r\n\r\n")"
check "a new forwarded request of lease A: 407 lease_revoked" "407 lease_revoked" \
    "$(curl -s -o /dev/null -D - --max-time 10 -x "http://127.0.0.1:$PROXY_PORT" \
        --proxy-header "Proxy-Authorization: Bearer $TOKEN_A" "http://ok.$D:$UP/x" | tr -d '\r' |
        awk '/^HTTP\//{c=$2} tolower($1)=="pinhole-reason:"{r=$2} END{print c, r}')"
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN_B" 1000 1000 >/dev/null 2>&1 &&
    ok "lease B still opens tunnels" || fail "lease B refused"
check "metrics count the lease_revoked refusals" "2" \
    "$(e2e_metric 'pinhole_proxy_requests_total{verdict="refused",reason="lease_revoked"}')"

# ---- 3. a corrupt list is refused whole; the old one stays in force -------------
printf 't1 leaseB 1900000000\nt1 leaseA 19x\n' >"$E2E_TMP/rev.new"
chmod 644 "$E2E_TMP/rev.new"
mv "$E2E_TMP/rev.new" "$REV"
n=$(reloads)
kill -HUP "$PROXY_PID"
wait_reloads $((n + 1))
check "the corrupt list's reload failed" "1" "$(e2e_metric 'pinhole_proxy_table_reloads_total{result="failed"}')"
grep -q '"event":"reload_failed".*revocations.*line 2' "$E2E_TMP/proxy.err" &&
    ok "reload_failed names the revocation list and its bad line" ||
    fail "reload_failed event: $(grep reload_failed "$E2E_TMP/proxy.err")"
check "A is still refused (the old list)" "407" \
    "$(e2e_raw "CONNECT ok.$D:$PEER_PORT HTTP/1.1\r\nHost: ok.$D:$PEER_PORT\r\nProxy-Authorization: Bearer $TOKEN_A\r\n\r\n")"
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN_B" 1000 1000 >/dev/null 2>&1 &&
    ok "B is still allowed (the corrupt list's entry for B is not in force)" || fail "lease B refused"
check "POST /reload of the corrupt list: 500, the line named" "500 1" \
    "$(curl -s -o "$E2E_TMP/admin.out" -w '%{http_code}' -X POST "http://127.0.0.1:$ADMIN_PORT/reload") $(grep -c 'line 2' "$E2E_TMP/admin.out")"

# ---- 4. reload storms under B's traffic -----------------------------------------
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN_B" 2000000 50000 0 1000000 \
    >"$E2E_TMP/storm-b.out" 2>&1 & CS=$!
ok_before=$(e2e_metric 'pinhole_proxy_table_reloads_total{result="ok"}')
bad_before=$(e2e_metric 'pinhole_proxy_table_reloads_total{result="failed"}')
posted_ok=0 posted_bad=0
for i in $(seq 1 100); do
    case $((i % 3)) in
        0) printf 't1 leaseA 1900000000\n' ;;
        1) printf 't1 leaseA 1900000000\nt1 leaseB 1900000000 extra\n' ;;
        2) printf '# storm %d\nt1 leaseA 1900000000\nt2 leaseB 1900000000\n' "$i" ;;
    esac >"$E2E_TMP/rev.new"
    chmod 644 "$E2E_TMP/rev.new"
    mv "$E2E_TMP/rev.new" "$REV"
    if [ $((i % 2)) = 0 ]; then
        code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$ADMIN_PORT/reload")
        [ "$code" = 200 ] && posted_ok=$((posted_ok + 1))
        [ "$code" = 500 ] && posted_bad=$((posted_bad + 1))
    else
        kill -HUP "$PROXY_PID"
    fi
done
printf 't1 leaseA 1900000000\n' >"$E2E_TMP/rev.new"; chmod 644 "$E2E_TMP/rev.new"; mv "$E2E_TMP/rev.new" "$REV"
check "the storm's last POST /reload works" "200" \
    "$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$ADMIN_PORT/reload")"
wait "$CS"; rcs=$?
read -r _ s_recv s_recv_sha _ s_sent s_sent_sha < <(grep '^recv ' "$E2E_TMP/storm-b.out")
read -r _ _ u_recv_sha _ _ u_sent_sha < <(serve_line 2000000)
check "B's transfer through the storm: complete and identical" "0 2000000 50000 $s_sent_sha $s_recv_sha" \
    "$rcs $s_sent $s_recv $u_recv_sha $u_sent_sha"
ok_after=$(e2e_metric 'pinhole_proxy_table_reloads_total{result="ok"}')
bad_after=$(e2e_metric 'pinhole_proxy_table_reloads_total{result="failed"}')
ok "storm: $((ok_after - ok_before)) reloads in force, $((bad_after - bad_before)) refused whole ($posted_ok + $posted_bad of 50 POSTs answered 200 + 500; SIGHUPs may coalesce)"
check "every POST /reload was answered 200 or 500, as its list was good or not" "50" "$((posted_ok + posted_bad))"
[ "$posted_bad" -ge 16 ] && [ "$posted_ok" -ge 16 ] && ok "POSTs of corrupt lists refused, good ones in force" ||
    fail "POST results: $posted_ok ok, $posted_bad refused"
check "after the storm A is refused" "407" \
    "$(e2e_raw "CONNECT ok.$D:$PEER_PORT HTTP/1.1\r\nHost: ok.$D:$PEER_PORT\r\nProxy-Authorization: Bearer $TOKEN_A\r\n\r\n")"
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN_B" 1000 1000 >/dev/null 2>&1 &&
    ok "and B allowed" || fail "lease B refused after the storm"
check "no B line ever ended lease_revoked" "0" \
    "$(e2e_log_lines 'r["lease"] == "leaseB" and r["end"] == "lease_revoked"')"

kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
check "SIGTERM: exit 0" "0" "$?"
e2e_finish
