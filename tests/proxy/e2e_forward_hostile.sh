#!/bin/bash
# e2e_forward_hostile.sh - plain-HTTP forwarding against a hostile allowed
# upstream (tests/proxy/e2e_forward_peer.py): interim responses without end
# to a client that does not read stay within buffer_bytes of the proxy's
# memory, and a forwarded request ends at the earliest of max_lifetime_s and
# its grant's expiry however its upstream keeps it busy (1xx every 0.5 s, a
# body trickled a byte at a time): 504 upstream_timeout or 407
# grant_expired before a response started, the response cut short after;
# an upstream cannot forge the proxy's Pinhole-Reason; and only an idempotent
# request is sent again on a new connection.
# Usage: e2e_forward_hostile.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --max-lifetime-s 4 --idle-timeout-s 3 --buffer-bytes 65536
D=$E2E_DOMAIN
e2e_start_forward_peer
BEARER="Proxy-Authorization: Bearer $TOKEN"
raw() { $UPEER raw "$PROXY_PORT" "$1"; }
rss() { awk '$1=="VmRSS:"{print $2}' "/proc/$PROXY_PID/status"; }
now() { date +%s.%N; }
secs_since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b - a}'; }
under() { awk -v v="$1" -v m="$2" 'BEGIN{print (v < m) ? "yes" : "no (" v ")"}'; }
# The request's log line (the last "request" event for PATH).
req_line() { grep '"event":"request"' "$E2E_TMP/proxy.log" | grep "$1" | tail -1; }

# ---- interim responses to a client that does not read ----------------------
# The upstream sends 100s (16 KB each) as fast as the proxy takes them; the
# client reads nothing for 3.5 s. Without backpressure the proxy queued them
# all (about 140 MiB in 10 s on a 2-CPU VM).
rss0=$(rss)
RAW_STALL_S=3.5 raw "GET http://ok.$D:$UP/interim-flood HTTP/1.1\r\n$BEARER\r\n\r\n" >/dev/null &
client=$!
peak=$rss0
for _ in $(seq 1 14); do
    sleep 0.25
    r=$(rss); [ "$r" -gt "$peak" ] && peak=$r
done
wait $client
check "interim flood: the proxy's memory grew less than 16 MiB" "yes" \
    "$(under $(( (peak - rss0) / 1024 )) 16)"

# ---- the request's life --------------------------------------------------------
t0=$(now)
out=$(raw "GET http://ok.$D:$UP/interim-slow HTTP/1.1\r\n$BEARER\r\n\r\n")
took=$(secs_since "$t0")
check "102 every 0.5 s: answered 504 at max_lifetime_s" "504 upstream_timeout" \
    "$(printf '%s\n' "$out" | grep -v '^BODY' | grep -v '^102 ' | tail -1)"
check "102 every 0.5 s: interim answers relayed before" "yes" \
    "$(under 2 "$(printf '%s\n' "$out" | grep -c '^102 ')")"
check "102 every 0.5 s: ended within 4 s + margin" "yes" "$(under "$took" 7.5)"
check "102 every 0.5 s: logged" "1" \
    "$(req_line '"status":504' | grep -c 'did not complete within max_lifetime_s')"

t0=$(now)
out=$(raw "GET http://ok.$D:$UP/trickle HTTP/1.1\r\n$BEARER\r\n\r\n")
took=$(secs_since "$t0")
check "trickled body: the response started" "200 -" "$(printf '%s\n' "$out" | head -1)"
check "trickled body: cut at max_lifetime_s" "yes" "$(under "$took" 7.5)"
check "trickled body: logged end=max_lifetime" "1" \
    "$(req_line '"status":200' | grep -c '"end":"max_lifetime"')"

SHORT=$(e2e_issue lease-short e2e --ttl 3)
t0=$(now)
out=$(raw "GET http://ok.$D:$UP/interim-slow HTTP/1.1\r\nProxy-Authorization: Bearer $SHORT\r\n\r\n")
took=$(secs_since "$t0")
check "grant expiring during the request: 407 grant_expired" "407 grant_expired" \
    "$(printf '%s\n' "$out" | grep -v '^BODY' | grep -v '^102 ' | tail -1)"
check "grant expiring during the request: ended near the expiry" "yes" "$(under "$took" 5.5)"

SHORT=$(e2e_issue lease-short2 e2e --ttl 3)
t0=$(now)
out=$(raw "GET http://ok.$D:$UP/trickle HTTP/1.1\r\nProxy-Authorization: Bearer $SHORT\r\n\r\n")
took=$(secs_since "$t0")
check "grant expiring during the response: cut near the expiry" "yes" "$(under "$took" 5.5)"
check "grant expiring during the response: logged end=grant_expired" "1" \
    "$(req_line '"lease":"lease-short2"' | grep -c '"end":"grant_expired"')"

# An upstream's own Pinhole-Reason never reaches the client: only the
# proxy's refusals carry one.
check "a forged Pinhole-Reason is removed" "403 -" \
    "$(raw "GET http://ok.$D:$UP/forged-reason HTTP/1.1\r\n$BEARER\r\n\r\n" | head -1)"

# A kept-alive upstream that closes a reused connection without answering:
# a bodiless GET goes once more on a new connection, a POST (not idempotent,
# RFC 9110 9.2.2: the upstream may have acted on it) is never repeated.
for m in GET POST; do
    out=$(raw "GET http://ok.$D:$UP/then-drop HTTP/1.1\r\n$BEARER\r\n\r\n$m http://ok.$D:$UP/dropped-$m HTTP/1.1\r\n$BEARER\r\n\r\n")
    sent=$(grep -a -c "^$m /dropped-$m " "$E2E_TMP/up/recv.bin")
    if [ $m = GET ]; then
        check "reused connection closed unanswered: GET sent again and answered" "200 - 200 - 2" \
            "$(printf '%s\n' "$out" | grep -v '^BODY' | tr '\n' ' ')$sent"
    else
        check "reused connection closed unanswered: POST not repeated, 502" "200 - 502 upstream_bad_response 1" \
            "$(printf '%s\n' "$out" | grep -v '^BODY' | tr '\n' ' ')$sent"
    fi
done

# A request that completes in time is not touched, and the connection serves
# the next request (the deadline belongs to one request).
out=$(raw "GET http://ok.$D:$UP/a HTTP/1.1\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/b HTTP/1.1\r\n$BEARER\r\n\r\n")
check "requests within their life: both answered" "200 - 200 - BODY hello /b" \
    "$(printf '%s\n' "$out" | tr '\n' ' ' | sed 's/ $//')"
kill -0 "$PROXY_PID" 2>/dev/null && ok "proxy alive" || fail "proxy died"
e2e_finish
