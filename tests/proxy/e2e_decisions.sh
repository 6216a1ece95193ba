#!/bin/bash
# e2e_decisions.sh - every verdict of the proxy with real parts: curl through
# the proxy (test-loopback build) to openssl s_server, names from dnsmasq.
# Usage: e2e_decisions.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_tls
e2e_start_proxy --header-timeout-ms 1000 --dns-timeout-ms 1500 --connect-timeout-ms 700
D=$E2E_DOMAIN

# The two yeses, then the pinned dial.
check "allowed: tunnel 200, then the TLS server's 200" "200 - 200" "$(e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT)"
check "Bearer transport works too" "200" \
    "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$E2E_TMP/tls.crt" \
        --proxy "http://127.0.0.1:$PROXY_PORT" --proxy-header "Proxy-Authorization: Bearer $TOKEN" \
        "https://ok.$D:$TLS_PORT/")"
# Python's urllib, the way pip reaches an index through HTTPS_PROXY: Basic
# credentials from the proxy URL, and a CONNECT sent as HTTP/1.0.
check "Python urllib through the proxy (pip's CONNECT, HTTP/1.0)" "200" \
    "$(python3 - "http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT" "https://ok.$D:$TLS_PORT/" \
        "$E2E_TMP/tls.crt" 2>&1 <<'PY'
import ssl, sys, urllib.request
proxy, url, ca = sys.argv[1:]
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"https": proxy}),
    urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca)))
print(opener.open(url, timeout=10).status)
PY
)"
# openssl s_client's -proxy (OSSL_HTTP_proxy_connect) sends HTTP/1.0 too. It
# goes on after a refused CONNECT, so the exit status and the server's
# certificate are what show the tunnel.
s_out=$(echo | timeout 10 openssl s_client -proxy "127.0.0.1:$PROXY_PORT" -proxy_user lease1 \
    -proxy_pass "pass:$TOKEN" -connect "ok.$D:$TLS_PORT" -servername "ok.$D" \
    -CAfile "$E2E_TMP/tls.crt" -verify_return_error -verify_hostname "ok.$D" 2>&1)
check "openssl s_client -proxy -proxy_user: exit 0, the server's certificate verified" "0 1" \
    "$? $(printf '%s\n' "$s_out" | grep -c "^subject=CN = ok.$D\$")"
check "not allowlisted" "403 not_allowlisted 403" "$(e2e_curl "lease1:$TOKEN" notlisted.$D:$TLS_PORT)"
check "wrong port" "403 port_not_allowed 403" "$(e2e_curl "lease1:$TOKEN" ok.$D:443)"
check "IP literal" "403 ip_literal 403" "$(e2e_curl "lease1:$TOKEN" 127.0.0.1:$TLS_PORT)"
check "IPv6 literal" "403 ip_literal 403" "$(e2e_curl "lease1:$TOKEN" "[::1]:$TLS_PORT")"
check "no grant" "407 no_grant 407" "$(e2e_curl "" ok.$D:$TLS_PORT)"
check "forged grant (other key)" "407 grant_invalid 407" "$(e2e_curl "lease1:$TOKEN_FORGED" ok.$D:$TLS_PORT)"
check "expired grant" "407 grant_expired 407" "$(e2e_curl "lease3:$TOKEN_EXPIRED" ok.$D:$TLS_PORT)"
check "Basic user is not the grant's lease" "407 grant_invalid 407" "$(e2e_curl "lease9:$TOKEN" ok.$D:$TLS_PORT)"
check "grant for another list" "403 not_allowlisted 403" "$(e2e_curl "lease2:$TOKEN_OTHER" ok.$D:$TLS_PORT)"
check "private answer" "403 denied_address 403" "$(e2e_curl "lease1:$TOKEN" private.$D:$TLS_PORT)"
check "mixed public+private answer" "403 denied_address 403" "$(e2e_curl "lease1:$TOKEN" mixed.$D:$TLS_PORT)"
check "NXDOMAIN" "502 dns_failure 502" "$(e2e_curl "lease1:$TOKEN" nx.$D:$TLS_PORT)"
check "DNS timeout" "504 dns_timeout 504" "$(e2e_curl "lease1:$TOKEN" slow.$D:$TLS_PORT)"
REFUSED_PORT=$(e2e_port)
check "upstream refusing" "502 upstream_unreachable 502" "$(e2e_curl "lease1:$TOKEN" refused.$D:$REFUSED_PORT)"
BH_PORT=$(e2e_port)
"$PEER" blackhole "$BH_PORT" >"$E2E_TMP/bh.out" & E2E_PIDS="$E2E_PIDS $!"
sleep 0.2
check "upstream not answering" "504 upstream_timeout 504" "$(e2e_curl "lease1:$TOKEN" blackhole.$D:$BH_PORT)"

# The 403 names the denied block in its one-line body.
body=$(printf 'CONNECT private.%s:%s HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n' "$D" "$TLS_PORT" "$TOKEN" |
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; cat <&3" | tail -n 1)
case "$body" in *10.1.2.3*10.0.0.0/8*) ok "denied_address body names the block: $body" ;;
    *) fail "denied_address body: $body" ;; esac
auth407=$(printf 'CONNECT ok.%s:%s HTTP/1.1\r\n\r\n' "$D" "$TLS_PORT" |
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; cat <&3" | tr -d '\r' | grep -i '^Proxy-Authenticate:')
check "407 carries Proxy-Authenticate" 'Proxy-Authenticate: Basic realm="pinhole"' "$auth407"

# Request-level refusals.
check "origin-form is 400" "400" "$(e2e_raw 'GET / HTTP/1.1\r\nHost: x\r\n\r\n')"
check "absolute-form without a grant is 407" "407" "$(e2e_raw 'GET http://ok.pinhole-e2e.test/ HTTP/1.1\r\n\r\n')"
check "malformed is 400" "400" "$(e2e_raw 'CONNECT ok.pinhole-e2e.test:443 HTTP/1.1\n\n')"
check "bad authority is 400" "400" "$(e2e_raw 'CONNECT ok.pinhole-e2e.test HTTP/1.1\r\n\r\n')"
big=$(head -c 9000 /dev/zero | tr '\0' a)
check "oversized headers are 431" "431" "$(e2e_raw "CONNECT ok.$D:443 HTTP/1.1\\r\\nX: $big\\r\\n\\r\\n")"
slow=$( (printf 'CONNECT ok.%s:443 HTTP/1.1\r\n' "$D"; sleep 3) |
    timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3 & head -c 12 <&3" | awk '{print $2}')
check "slow headers are 408" "408" "$slow"
check "garbage is 400 at once" "400" "$(e2e_raw '\x16\x03\x01\x00\x05hello')"

# Logs and metrics.
grep -q '"reason":"denied_address"' "$E2E_TMP/proxy.log" && grep -q '"rule":"e2e-allowlist.yaml:' "$E2E_TMP/proxy.log" &&
    ok "JSON log lines carry reason and rule file:line" || fail "log lines: $(head -3 "$E2E_TMP/proxy.log")"
python_free_json=$(head -1 "$E2E_TMP/proxy.log" | grep -c '^{.*}$')
check "log lines are single JSON objects" "1" "$python_free_json"
check "metrics count allowed requests (2 curl, Python, openssl)" "4" "$(e2e_metric 'pinhole_proxy_requests_total{verdict="allowed",reason="allowed"}')"
check "metrics count denied_address (2 curl + 1 raw)" "3" "$(e2e_metric 'pinhole_proxy_requests_total{verdict="refused",reason="denied_address"}' | head -1)"
check "healthz" "ok" "$(curl -s "http://127.0.0.1:$ADMIN_PORT/healthz")"
check "readyz" "ready" "$(curl -s "http://127.0.0.1:$ADMIN_PORT/readyz")"
check "GET /reload is 405" "405" "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN_PORT/reload")"

# One parser for every head (proxy/src/http1.c): a CONNECT head gets the
# limits and the reasons a forwarded one gets, but for its request line,
# its destination, refused as the guard refuses a malformed authority (after
# the metrics above: the last check adds an allowed tunnel).
answer() { # the status and Pinhole-Reason of the proxy's answer to raw request $1
    printf "$1" | timeout 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PROXY_PORT; cat >&3; cat <&3" \
        2>/dev/null | tr -d '\r' | awk 'NR==1{s=$2} tolower($1)=="pinhole-reason:"{r=$2} END{print s, r}'
}
two_auth="Proxy-Authorization: Bearer $TOKEN\r\nProxy-Authorization: Bearer $TOKEN\r\n\r\n"
check "CONNECT with two Proxy-Authorization fields" "400 http_bad_field" \
    "$(answer "CONNECT ok.$D:$TLS_PORT HTTP/1.1\r\n$two_auth")"
check "forwarded request with two Proxy-Authorization fields" "400 http_bad_field" \
    "$(answer "GET http://ok.$D:$TLS_PORT/ HTTP/1.1\r\n$two_auth")"
check "CONNECT with a bare LF in a field" "400 http_bare_lf" \
    "$(answer "CONNECT ok.$D:443 HTTP/1.1\r\nX-A: 1\n\r\n")"
check "CONNECT with a bare LF ending its request line (the destination's)" "400 parse_error" \
    "$(answer "CONNECT ok.$D:443 HTTP/1.1\n\n")"
check "CONNECT with a Content-Length" "400 http_bad_content_length" \
    "$(answer "CONNECT ok.$D:$TLS_PORT HTTP/1.1\r\nContent-Length: 0\r\n\r\n")"
check "CONNECT target over 4096 bytes (the destination's)" "400 parse_error" \
    "$(answer "CONNECT $(head -c 5000 /dev/zero | tr '\0' a):443 HTTP/1.1\r\n\r\n")"
check "CONNECT authority longer than any host: the guard's" "400 parse_error" \
    "$(answer "CONNECT $(head -c 600 /dev/zero | tr '\0' a).$D:443 HTTP/1.1\r\n\r\n")"
fields=()
for i in $(seq 1 80); do fields+=(--proxy-header "X-Field-$i: $i"); done
check "CONNECT head of 80 fields (every head may have 100)" "200" \
    "$(curl -s -o /dev/null -w '%{http_connect}' --max-time 10 --cacert "$E2E_TMP/tls.crt" \
        --proxy "http://127.0.0.1:$PROXY_PORT" --proxy-header "Proxy-Authorization: Bearer $TOKEN" \
        "${fields[@]}" "https://ok.$D:$TLS_PORT/")"

kill -TERM "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
check "SIGTERM with nothing open exits 0" "0" "$rc"

# The DNS cache (one worker, so one cache): failures are cached briefly,
# answers only as long as their TTL (dnsmasq gives local names TTL 0).
e2e_start_proxy --workers 1 --drain-timeout-s 1 --dns-negative-ttl-s 30
e2e_curl "lease1:$TOKEN" nx.$D:$TLS_PORT >/dev/null
e2e_curl "lease1:$TOKEN" nx.$D:$TLS_PORT >/dev/null
check "NXDOMAIN cached: one query for two requests" "1" "$(e2e_metric pinhole_proxy_dns_seconds_count)"
e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT >/dev/null
e2e_curl "lease1:$TOKEN" ok.$D:$TLS_PORT >/dev/null
check "TTL 0 answers are not cached: two more queries" "3" "$(e2e_metric pinhole_proxy_dns_seconds_count)"

# The drain deadline: a tunnel still open then is closed, the exit is 0.
PEER_PORT=$(e2e_port)
"$PEER" serve "$PEER_PORT" >/dev/null & E2E_PIDS="$E2E_PIDS $!"
e2e_wait_port "$PEER_PORT"
"$PEER" client "127.0.0.1:$PROXY_PORT" "ok.$D:$PEER_PORT" "Bearer $TOKEN" 10000000 0 0 1000000 \
    >"$E2E_TMP/cut.out" 2>&1 &
SLOW_PID=$!
check "the slow transfer's tunnel is open before SIGTERM" "1" "$(e2e_wait_metric pinhole_proxy_tunnels_active 1)"
t0=$(date +%s.%N)
kill -TERM "$PROXY_PID"; wait "$PROXY_PID"; rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
check "past the drain deadline: exit 0" "0" "$rc"
[ "$(echo "$took < 2.5" | bc)" = 1 ] && ok "tunnel closed at the 1 s deadline (${took}s)" || fail "drain took ${took}s"
wait "$SLOW_PID"; src=$?
# Started, then cut: the client got its 200 and sent some of its 10 MB (its
# "recv .. sent N .." line), and the proxy's log line for that tunnel says
# end=shutdown with bytes relayed upstream.
sent=$(awk '/^recv /{print $5}' "$E2E_TMP/cut.out")
[ "$src" != 0 ] && [ "${sent:-0}" -gt 0 ] && [ "$sent" -lt 10000000 ] &&
    ok "the unfinished transfer was cut, not completed ($sent of 10000000 bytes sent)" ||
    fail "slow transfer: exit $src, sent '${sent}' of 10000000: $(head -c 200 "$E2E_TMP/cut.out")"
up=$(/usr/bin/python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r.get("event") == "connection" and r.get("status") == 200 and r.get("end") == "shutdown":
        print(r["bytes_up"])' "$E2E_TMP/proxy.log")
[ "${up:-0}" -gt 0 ] 2>/dev/null && ok "its log line says end=shutdown after $up bytes relayed upstream" ||
    fail "no end=shutdown log line of a tunnel that relayed bytes (bytes_up '${up}')"
e2e_finish
