#!/bin/bash
# e2e_forward_edges.sh - forwarding at the edges of an exchange, through the
# test-loopback proxy:
#   - an upstream that answers early (413, Connection: close) and resets the
#     connection while the body is still being sent: the client gets the 413,
#     every time (a reached upstream is never upstream_unreachable);
#   - a client that sends a complete request, the start of another, then
#     half-closes: it gets the first answer whole;
#   - a 417 to Expect: 100-continue ends the connection and says so
#     (Connection: close);
#   - upstream response heads: 100 field lines relayed, 101 refused (502
#     upstream_bad_response);
#   - "http://host:port?x=1" (an empty path before a query) forwarded as
#     "/?x=1", "?@" after the authority refused;
#   - a body trickled until max_lifetime_s is the client's: 408
#     client_timeout;
#   - duration_s in the request lines: to the microsecond.
# Usage: e2e_forward_edges.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }
EDGE="/usr/bin/python3 $PH_SOURCE_DIR/tests/proxy/e2e_forward_edges.py"

e2e_start_dns
e2e_make_policy
e2e_start_proxy
D=$E2E_DOMAIN
e2e_start_upstream "$EDGE" edge
P="http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"
AUTH="Proxy-Authorization: Bearer $TOKEN"

# "<status> <Pinhole-Reason or ->" of the last response curl got.
fcurl() {
    curl -s -o /dev/null -D - --max-time 20 "$@" 2>/dev/null | tr -d '\r' | awk '
        /^HTTP\//{c=$2; r="-"} tolower($1)=="pinhole-reason:"{r=$2}
        END{print (c==""?"none":c), (r==""?"-":r)}'
}

# ---- an early answer, then a reset -------------------------------------------
head -c $((4 * 1024 * 1024)) /dev/zero >"$E2E_TMP/4m"
got=""
for i in $(seq 1 20); do
    got="$got$(fcurl -x "$P" -H 'Expect:' --data-binary @"$E2E_TMP/4m" "http://ok.$D:$UP/early-413")|"
done
check "early 413 then a reset: relayed, 20 of 20" "0" "$(printf '%s' "$got" | tr '|' '\n' | grep -vc '^413 -$')"
[ "$(printf '%s' "$got" | tr '|' '\n' | grep -vc '^413 -$')" = 0 ] ||
    echo "# answers: $(printf '%s' "$got" | tr '|' '\n' | sort | uniq -c | tr '\n' ';')"
check "early 413: never logged upstream_unreachable" "0" \
    "$(grep -c '"reason":"upstream_unreachable"' "$E2E_TMP/proxy.log")"
# The start of an answer, then a reset: nothing relayed, the upstream's fault.
check "a partial early head, then a reset" "502 upstream_bad_response" \
    "$(fcurl -x "$P" -H 'Expect:' --data-binary @"$E2E_TMP/4m" "http://ok.$D:$UP/early-partial")"
# An early answer from an upstream that keeps the connection: the client is
# told the connection ends (32 MiB cannot all be sent before the answer, and
# where its body ends is then unknown to the proxy).
head -c $((32 * 1024 * 1024)) /dev/zero >"$E2E_TMP/32m"
check "an early 413 that keeps the connection: Connection: close to the client" "413 close" \
    "$(curl -s -o /dev/null -D - --max-time 20 -x "$P" -H 'Expect:' --data-binary @"$E2E_TMP/32m" \
        "http://ok.$D:$UP/early-keep" | tr -d '\r' | awk '/^HTTP\//{c=$2}
        tolower($0)=="connection: close"{k="close"} END{print c, (k==""?"keep":k)}')"

# ---- a half-close after a complete request and the start of another ---------
: >"$E2E_TMP/edge/lines"
got=$($EDGE halfclose "$PROXY_PORT" "$AUTH" "http://ok.$D:$UP/big")
check "half-close after a request and a partial one: the answer whole" "200 1048576 eof" "$got"
for i in 1 2 3 4 5; do
    got=$($EDGE halfclose "$PROXY_PORT" "$AUTH" "http://ok.$D:$UP/small$i")
    check "half-close, small answer $i" "200 7 eof" "$got"
done
check "half-close: the unfinished request never went upstream" "6 0" \
    "$(wc -l <"$E2E_TMP/edge/lines") $(grep -c start-of-another "$E2E_TMP/edge/lines")"

# ---- 417 ends the connection and says so ------------------------------------
check "417 to Expect: 100-continue: Connection: close, then the end" "417 close eof" \
    "$($EDGE expect417 "$PROXY_PORT" "$AUTH" "http://ok.$D:$UP/expect-417")"

# ---- the response head's field cap ------------------------------------------
check "100 response fields relayed" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/fields-100")"
check "101 response fields refused" "502 upstream_bad_response" \
    "$(fcurl -x "$P" "http://ok.$D:$UP/fields-101")"

# ---- an empty path before a query ------------------------------------------
: >"$E2E_TMP/edge/lines"
rm -f "$E2E_TMP/body"
check "http://host:port?x=1 forwarded" "200 -" "$(curl -s -o "$E2E_TMP/body" -D - --max-time 20 \
    --request-target "http://ok.$D:$UP?x=1" -x "$P" "http://ok.$D:$UP/" | tr -d '\r' |
    awk '/^HTTP\//{c=$2} END{print c, "-"}')"
check "... as /?x=1" "GET /?x=1 HTTP/1.1" "$(cat "$E2E_TMP/edge/lines")"
check "'?@' after the authority refused" "400 parse_error" \
    "$(fcurl -x "$P" --request-target "http://ok.$D:$UP?@evil.example/" "http://ok.$D:$UP/")"

# ---- duration_s -------------------------------------------------------------
lines=$(grep -c '"event":"request"' "$E2E_TMP/proxy.log")
check "duration_s to the microsecond in every request line" "$lines" \
    "$(grep -cE '"duration_s":[0-9]+\.[0-9]{6},' "$E2E_TMP/proxy.log")"

# ---- a body trickled until max_lifetime_s -----------------------------------
E2E_PROXY_NAME=short e2e_start_proxy --max-lifetime-s 2
check "a trickled body at max_lifetime_s is the client's" "408 client_timeout" \
    "$($EDGE trickle "$PROXY_PORT" "$AUTH" "http://ok.$D:$UP/slurp")"
check "logged as client_timeout" "1" "$(grep -c '"reason":"client_timeout"' "$E2E_TMP/short.log")"
e2e_finish
