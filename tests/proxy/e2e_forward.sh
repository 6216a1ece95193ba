#!/bin/bash
# e2e_forward.sh - plain-HTTP forwarding (absolute-form requests) through the
# test-loopback proxy: curl (GET, a 10 MiB POST and a chunked upload
# compared by SHA-256 at the upstream, HEAD, Expect: 100-continue, two hosts
# on one kept-alive connection), pipelining on a raw socket, the refusals
# (unlisted host and port, IP literal, private answer, no grant, https://,
# origin-form), every smuggling case answered 400 with nothing sent
# upstream (the upstream records every byte it receives), responses the
# proxy cannot frame not relayed, and the headers the proxy changes, checked
# in the bytes the upstream received.
# Usage: e2e_forward.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"
UPEER="/usr/bin/python3 $PH_SOURCE_DIR/tests/proxy/e2e_forward_peer.py"
command -v curl >/dev/null || { echo "curl missing"; exit 77; }

e2e_start_dns
e2e_make_policy
e2e_start_proxy --header-timeout-ms 1500
D=$E2E_DOMAIN
e2e_start_forward_peer
RECV=$E2E_TMP/up/recv.bin
P="http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"
BEARER="Proxy-Authorization: Bearer $TOKEN"

# curl through the proxy: prints "<status> <Pinhole-Reason or ->" (the last
# status curl got: a 100 when it failed after an interim answer), then curl's
# error when it failed, so a cut transfer never reads as its status alone. The
# body goes to $E2E_TMP/body, which is removed first: a check of the body never
# reads the previous request's.
fcurl() {
    local out rc
    rm -f "$E2E_TMP/body"
    out=$(curl -sS -o "$E2E_TMP/body" --max-time 20 -D - "$@" 2>"$E2E_TMP/curl.err")
    rc=$?
    out=$(printf '%s\n' "$out" | tr -d '\r')
    code=$(printf '%s\n' "$out" | awk '/^HTTP\//{c=$2} END{print c}')
    reason=$(printf '%s\n' "$out" | awk -F': ' 'tolower($1)=="pinhole-reason"{print $2; exit}')
    if [ "$rc" -eq 0 ]; then
        echo "${code:-none} ${reason:--}"
    else
        echo "${code:-none} ${reason:--} (curl exit $rc: $(tail -n 1 "$E2E_TMP/curl.err"))"
    fi
}
raw() { $UPEER raw "$PROXY_PORT" "$1"; }

# ---- curl ------------------------------------------------------------------
check "GET" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/hello")"
check "GET body" "hello /hello" "$(cat "$E2E_TMP/body")"

head -c $((10 * 1024 * 1024)) /dev/urandom >"$E2E_TMP/10m"
want="sha256 $(sha256sum "$E2E_TMP/10m" | cut -d' ' -f1) 10485760"
check "POST 10 MiB" "200 -" "$(fcurl -x "$P" --data-binary @"$E2E_TMP/10m" "http://ok.$D:$UP/echo")"
check "POST 10 MiB arrives byte-identical" "$want" "$(cat "$E2E_TMP/body")"
check "chunked upload" "200 -" "$(fcurl -x "$P" -H 'Transfer-Encoding: chunked' \
    --data-binary @"$E2E_TMP/10m" "http://ok.$D:$UP/echo")"
check "chunked upload arrives byte-identical" "$want" "$(cat "$E2E_TMP/body")"

blob=$($UPEER blob-sha256)
check "GET 10 MiB" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/blob")"
check "GET 10 MiB arrives byte-identical" "$blob" "$(sha256sum "$E2E_TMP/body" | cut -d' ' -f1)"
check "GET 10 MiB chunked" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/blob-chunked")"
check "GET 10 MiB chunked arrives byte-identical" "$blob" "$(sha256sum "$E2E_TMP/body" | cut -d' ' -f1)"
check "HEAD" "200 -" "$(fcurl -x "$P" -I "http://ok.$D:$UP/hello")"
check "HEAD keeps Content-Length, has no body" "content-length: 12|0" \
    "$(curl -sS -o /dev/null -D - -w '%{size_download}' --max-time 20 -x "$P" -I "http://ok.$D:$UP/hello" | tr -d '\r' | awk 'tolower($1)=="content-length:"{printf "content-length: %s|", $2} /^[0-9]+$/{print}')"
check "chunked response re-framed" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/chunked")"
check "chunked response body" "hello chunked" "$(cat "$E2E_TMP/body")"
out=$(raw "GET http://ok.$D:$UP/chunked HTTP/1.0\r\n$BEARER\r\n\r\n")
check "chunked response to an HTTP/1.0 client: plain, ended by close" "200 - BODY hello chunked" \
    "$(printf '%s\n' "$out" | tr '\n' ' ' | sed 's/ $//')"
check "close-delimited response" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/close")"
check "close-delimited body" "until close" "$(cat "$E2E_TMP/body")"

# Expect: 100-continue: the upstream's 100 reaches curl before it sends the body.
rm -f "$E2E_TMP/body"
curl -sS -v -o "$E2E_TMP/body" --max-time 20 -x "$P" -H 'Expect: 100-continue' \
    --expect100-timeout 10 --data-binary @"$E2E_TMP/10m" "http://ok.$D:$UP/echo" 2>"$E2E_TMP/curl.err"
check "Expect: 100-continue answered 100" "1" "$(grep -c '^< HTTP/1.1 100 Continue' "$E2E_TMP/curl.err")"
check "Expect: 100-continue body" "$want" "$(cat "$E2E_TMP/body")"

# Two hosts on one kept-alive client connection, each decided on its own.
before=$(wc -l <"$E2E_TMP/proxy.log")
curl -sS -v --max-time 20 -x "$P" "http://ok.$D:$UP/one" "http://blackhole.$D:$UP/two" \
    >"$E2E_TMP/body" 2>"$E2E_TMP/curl.err"
check "keep-alive: both answered" "hello /onehello /two" "$(cat "$E2E_TMP/body")"
check "keep-alive: curl reused the connection" "1" "$(grep -c 'Re-using existing connection' "$E2E_TMP/curl.err")"
lines=$(tail -n +$((before + 1)) "$E2E_TMP/proxy.log" | grep '"event":"request"')
check "keep-alive: two request lines on one connection" "1 2" \
    "$(printf '%s\n' "$lines" | grep -o '"conn_id":[0-9]*' | sort -u | wc -l) $(printf '%s\n' "$lines" | wc -l)"
check "keep-alive: each host logged with its rule" "ok.$D blackhole.$D" \
    "$(printf '%s\n' "$lines" | sed -n 's/.*"host":"\([^"]*\)".*"rule":"[^"]*e2e-allowlist.yaml:[0-9]*".*/\1/p' | tr '\n' ' ' | sed 's/ $//')"
check "request log line fields" "1" "$(printf '%s\n' "$lines" | grep -c "\"method\":\"GET\".*\"host\":\"ok.$D\",\"port\":$UP,.*\"status\":200,\"verdict\":\"allowed\",\"reason\":\"allowed\"")"

# The kept-alive upstream connection is reused for the same destination and
# grant only.
TOKEN_B=$(e2e_issue leaseB e2e)
: >"$E2E_TMP/up/conns"
raw "GET http://ok.$D:$UP/a HTTP/1.1\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/b HTTP/1.1\r\n$BEARER\r\n\r\n" >/dev/null
check "upstream connection reused for the same destination and grant" "1" "$(wc -l <"$E2E_TMP/up/conns")"
: >"$E2E_TMP/up/conns"
raw "GET http://ok.$D:$UP/a HTTP/1.1\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/b HTTP/1.1\r\nProxy-Authorization: Bearer $TOKEN_B\r\n\r\n" >/dev/null
check "not reused for another grant's lease" "2" "$(wc -l <"$E2E_TMP/up/conns")"

# Pipelining: three requests in one write, answered in order.
out=$(raw "GET http://ok.$D:$UP/p1 HTTP/1.1\r\nHost: x\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/p2 HTTP/1.1\r\nHost: x\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/p3 HTTP/1.1\r\nHost: x\r\n$BEARER\r\nConnection: close\r\n\r\n")
check "pipelined: three answers" "200 - 200 - 200 -" "$(printf '%s\n' "$out" | grep -v '^BODY' | tr '\n' ' ' | sed 's/ $//')"
check "pipelined: the last answer is the last request's" "BODY hello /p3" "$(printf '%s\n' "$out" | grep '^BODY')"
out=$(raw "GET http://ok.$D:$UP/p1 HTTP/1.1\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/p2 HTTP/1.1\r\n$BEARER\r\n\r\n")
check "pipelined: in order" "BODY hello /p2" "$(printf '%s\n' "$out" | grep '^BODY')"
# An answer goes to the client at once, not when the next pipelined
# request's upstream answers (/hold answers nothing).
check "pipelined: the first answer while the next one's upstream holds" "200 hello /p1" \
    "$($UPEER first "$PROXY_PORT" "GET http://ok.$D:$UP/p1 HTTP/1.1\r\n$BEARER\r\n\r\nGET http://ok.$D:$UP/hold HTTP/1.1\r\n$BEARER\r\n\r\n")"

# ---- headers the proxy changes, as the upstream received them --------------
: >"$RECV"
raw "GET http://ok.$D:$UP/hdr?q=1 HTTP/1.1\r\nHost: evil.example\r\n$BEARER\r\nConnection: close, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: 5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\nTrailer: X-T\r\nUpgrade: h2c\r\nX-Keep: yes\r\n\r\n" >/dev/null
got=$(tr -d '\r' <"$RECV")
check "request line in origin form" "GET /hdr?q=1 HTTP/1.1" "$(printf '%s\n' "$got" | head -1)"
check "Host rewritten to the URI's authority" "Host: ok.$D:$UP" "$(printf '%s\n' "$got" | grep -i '^host:')"
check "Via added" "Via: 1.1 pinhole" "$(printf '%s\n' "$got" | grep -i '^via:')"
check "end-to-end field kept" "X-Keep: yes" "$(printf '%s\n' "$got" | grep -i '^x-keep:')"
check "hop-by-hop fields removed" "" \
    "$(printf '%s\n' "$got" | grep -iE '^(connection|x-hop|keep-alive|proxy-connection|te|trailer|upgrade|proxy-authorization):')"

# ---- refusals ----------------------------------------------------------------
check "unlisted host" "403 not_allowlisted" "$(fcurl -x "$P" "http://unlisted.$D:$UP/")"
# A refused request's body is read and dropped after the answer, so the
# answer is not lost to a reset (curl sends the body without waiting).
head -c 2000000 /dev/urandom >"$E2E_TMP/2m"
check "refused POST with a body still gets its answer" "403 not_allowlisted" \
    "$(fcurl -x "$P" -H 'Expect:' --data-binary @"$E2E_TMP/2m" "http://unlisted.$D:$UP/")"
check "unlisted port" "403 port_not_allowed" "$(fcurl -x "$P" "http://ok.$D:80/")"
check "IP literal" "403 ip_literal" "$(fcurl -x "$P" "http://127.0.0.1:$UP/")"
check "private answer" "403 denied_address" "$(fcurl -x "$P" "http://private.$D:$UP/")"
check "no grant" "407 no_grant" "$(fcurl -x "http://127.0.0.1:$PROXY_PORT" "http://ok.$D:$UP/")"
check "another list's grant" "403 not_allowlisted" "$(fcurl -x "http://lease2:$TOKEN_OTHER@127.0.0.1:$PROXY_PORT" "http://ok.$D:$UP/")"
check "https absolute-form" "400 https_use_connect" \
    "$(raw "GET https://ok.$D:$UP/ HTTP/1.1\r\n$BEARER\r\n\r\n" | head -1)"
check "origin-form" "400 origin_form" "$(raw "GET / HTTP/1.1\r\nHost: ok.$D\r\n\r\n" | head -1)"
check "another scheme" "400 parse_error" "$(raw "GET ftp://ok.$D:$UP/ HTTP/1.1\r\n$BEARER\r\n\r\n" | head -1)"
# The scheme is the guard's to judge (its URL parser, once): a target that is
# not origin form is a URL, and an IP literal is refused before anything else.
check "no scheme: not a URL to the guard" "400 parse_error" \
    "$(raw "GET ok.$D:$UP HTTP/1.1\r\n$BEARER\r\n\r\n" | head -1)"
check "https with an IP literal: ip_literal first" "403 ip_literal" \
    "$(raw "GET https://127.0.0.1:$UP/ HTTP/1.1\r\n$BEARER\r\n\r\n" | head -1)"
out=$(raw "GET http://ok.$D:$UP/a HTTP/1.1\r\n$BEARER\r\n\r\nGET http://unlisted.$D:$UP/ HTTP/1.1\r\n$BEARER\r\n\r\n")
check "each request decided on its own" "200 - 403 not_allowlisted" "$(printf '%s\n' "$out" | grep -v '^BODY' | tr '\n' ' ' | sed 's/ $//')"
out=$(raw "GET http://ok.$D:$UP/a HTTP/1.1\r\n$BEARER\r\n\r\nCONNECT ok.$D:$UP HTTP/1.1\r\n$BEARER\r\n\r\n")
check "CONNECT after a forwarded request" "200 - 400 origin_form" "$(printf '%s\n' "$out" | grep -v '^BODY' | tr '\n' ' ' | sed 's/ $//')"

# A head not complete within header_timeout_ms.
check "head timeout" "408 http_head_timeout" "$(RAW_KEEP_OPEN=1 raw "GET http://ok.$D:$UP/ HTTP/1.1\r\nX-A: 1\r\n" | head -1)"

# The limits, on a second proxy with a short idle timeout and one slot per
# lease: a request in flight holds the lease's slot.
MAIN_PORT=$PROXY_PORT MAIN_ADMIN=$ADMIN_PORT
E2E_PROXY_NAME=limits e2e_start_proxy --idle-timeout-s 2 --max-connections-per-lease 1
P="http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"
# The first request sends half its body and holds its slot until the idle
# timeout ends it.
: >"$RECV"
RAW_KEEP_OPEN=1 raw "POST http://ok.$D:$UP/hold HTTP/1.1\r\n$BEARER\r\nContent-Length: 10\r\n\r\nhalf!" >/dev/null & hold=$!
for _ in $(seq 1 200); do grep -q "POST /hold" "$RECV" && break; sleep 0.05; done
check "per-lease limit" "429 limit_exceeded" "$(fcurl -x "$P" "http://ok.$D:$UP/")"
wait $hold
check "the slot is free again" "200 -" "$(fcurl -x "$P" "http://ok.$D:$UP/")"

# A kept-alive connection without a request ends after idle_timeout_s.
t0=$(date +%s)
out=$(RAW_KEEP_OPEN=1 raw "GET http://ok.$D:$UP/idle HTTP/1.1\r\n$BEARER\r\n\r\n")
t1=$(date +%s)
check "idle keep-alive connection closed by the proxy" "BODY hello /idle fast" \
    "$(printf '%s\n' "$out" | grep '^BODY') $([ $((t1 - t0)) -lt 8 ] && echo fast || echo slow)"
PROXY_PORT=$MAIN_PORT ADMIN_PORT=$MAIN_ADMIN
P="http://lease1:$TOKEN@127.0.0.1:$PROXY_PORT"

# ---- smuggling: 400 with a stable reason, nothing sent upstream -------------
R="GET http://ok.$D:$UP/s HTTP/1.1\r\n$BEARER\r\n"
smuggle() { # name expected-reason request
    : >"$RECV"
    local got
    got=$(raw "$3" | head -1)
    check "$1" "$2" "$got"
    check "$1: nothing sent upstream" "0" "$(wc -c <"$RECV")"
}
smuggle "CL and TE" "400 http_cl_te" "${R}Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
smuggle "CL list" "400 http_bad_content_length" "${R}Content-Length: 1, 1\r\n\r\nx"
smuggle "two CL" "400 http_bad_content_length" "${R}Content-Length: 1\r\nContent-Length: 1\r\n\r\nx"
smuggle "CL sign" "400 http_bad_content_length" "${R}Content-Length: +1\r\n\r\nx"
smuggle "CL inner space" "400 http_bad_content_length" "${R}Content-Length: 1 0\r\n\r\nx"
smuggle "CL overflow" "400 http_bad_content_length" "${R}Content-Length: 99999999999999999999999\r\n\r\nx"
smuggle "TE list" "400 http_bad_transfer_encoding" "${R}Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
smuggle "TE twice" "400 http_bad_transfer_encoding" "${R}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
smuggle "TE not chunked" "400 http_bad_transfer_encoding" "${R}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n"
smuggle "TE on HTTP/1.0" "400 http_bad_transfer_encoding" "GET http://ok.$D:$UP/s HTTP/1.0\r\n$BEARER\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
smuggle "obs-fold" "400 http_obs_fold" "${R}X-A: 1\r\n folded\r\n\r\n"
smuggle "bare CR" "400 http_bare_cr" "${R}X-A: 1\rX-B: 2\r\n\r\n"
smuggle "bare LF" "400 http_bare_lf" "${R}X-A: 1\n\r\n"
smuggle "space before colon" "400 http_bad_field" "${R}Content-Length : 1\r\n\r\nx"
smuggle "bad field name" "400 http_bad_field" "${R}X@A: 1\r\n\r\n"
smuggle "control byte in value" "400 http_bad_field" "${R}X-A: a\x01b\r\n\r\n"
smuggle "DEL in value" "400 http_bad_field" "${R}X-A: a\x7fb\r\n\r\n"
smuggle "NUL in value" "400 http_bad_field" "${R}X-A: a\x00b\r\n\r\n"
smuggle "two Host" "400 http_bad_field" "${R}Host: a\r\nHost: b\r\n\r\n"
smuggle "two Proxy-Authorization" "400 http_bad_field" "${R}$BEARER\r\n\r\n"
long=$(head -c 5000 /dev/zero | tr '\0' a)
smuggle "target too long" "414 http_target_too_long" "GET http://ok.$D:$UP/$long HTTP/1.1\r\n$BEARER\r\n\r\n"
smuggle "head over 8 KiB" "431 http_head_too_large" "${R}X-Long: $(head -c 9000 /dev/zero | tr '\0' a)\r\n\r\n"
smuggle "bad version" "400 http_bad_request_line" "GET http://ok.$D:$UP/ HTTP/1.2\r\n$BEARER\r\n\r\n"

# A malformed chunk comes after the head went upstream: the client gets 400,
# the upstream the head and no byte of the body.
: >"$RECV"
check "chunk size overflow" "400 http_bad_chunk" \
    "$(raw "POST http://ok.$D:$UP/echo HTTP/1.1\r\n$BEARER\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n" | head -1)"
check "chunk size overflow: no chunk data upstream" "0" "$(grep -c fffff "$RECV")"

# ---- responses the proxy cannot frame are not relayed -----------------------
for path in bad-cl-te bad-cl bad-fold; do
    out=$(raw "GET http://ok.$D:$UP/$path HTTP/1.1\r\n$BEARER\r\n\r\n")
    check "response /$path: 502" "502 upstream_bad_response" "$(printf '%s\n' "$out" | head -1)"
    check "response /$path: nothing of it relayed" "0" "$(printf '%s\n' "$out" | grep -c SMUGGLED)"
done
out=$(raw "GET http://ok.$D:$UP/cut HTTP/1.1\r\n$BEARER\r\n\r\n")
check "a response cut short ends the connection" "200 -" "$(printf '%s\n' "$out" | head -1)"

check "refusals counted" "1" "$(e2e_metric 'pinhole_proxy_requests_total{verdict="refused",reason="http_cl_te"}')"
e2e_finish
