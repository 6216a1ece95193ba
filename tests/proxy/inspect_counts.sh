#!/bin/bash
# inspect_counts.sh - what a tunnel's inspection (docs/pinhole-proxy.md,
# TUNNEL INSPECTION) adds to a CONNECT in system calls and heap
# allocations, counted (not timed: the machine's load moves neither).
# Two workloads of N sequential transactions each (connect, CONNECT with a
# grant, the 200, a real ClientHello as the first flight there and back
# through an echo upstream, close), the DNS answers cached by a warm-up:
# to ok.DOMAIN, whose rule says protocol: tcp (relayed uninspected), and
# to tls.DOMAIN (the default: the hello is read and its name checked).
#   system calls: strace -f -c attached to every thread of the proxy over
#     each workload. A hello that came in one read is checked where it was
#     read and sent on in the same pass, by the calls of an uninspected
#     tunnel: no writev (c077e3f held it in a buffer and wrote that out:
#     1.00 writev per transaction), and the calls besides epoll_wait and
#     accept4 (whose counts depend on how the peers' bytes fall into loop
#     iterations) at most 0.1 per transaction more than uninspected ones.
#   heap allocations: bench_proxy's counter (libbench_alloc_count.so)
#     preloaded into proxies serving a warm-up and N transactions, or the
#     warm-up alone, of each workload: the inspected transaction's count
#     (7 here) at most 0.1 over the uninspected one's and at most ALLOC_MAX
#     (c077e3f: 10, an inspection state and a 16 KiB hold buffer per
#     tunnel, and its evbuffer).
# Usage: inspect_counts.sh TEST_PROXY POLICYC PINHOLE_GUARD ALLOC_COUNTER
PROXY=$1 POLICYC=$2 GRANT=$3 COUNTER=$4
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/counts_lib.sh"
N=300
ALLOC_MAX=8

counts_start_echo
e2e_dnsmasq --local=/$E2E_DOMAIN/ --host-record=ok.$E2E_DOMAIN,127.0.0.1 \
    --host-record=tls.$E2E_DOMAIN,127.0.0.1 --local-ttl=300
e2e_make_policy

# The first flight: the ClientHello Python's ssl module (OpenSSL) sends for
# tls.DOMAIN, one record.
/usr/bin/python3 - "tls.$E2E_DOMAIN" "$E2E_TMP/hello.bin" <<'PY'
import ssl, sys
ctx = ssl.create_default_context()
out = ssl.MemoryBIO()
tls = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname=sys.argv[1])
try:
    tls.do_handshake()
except ssl.SSLWantReadError:
    pass
open(sys.argv[2], "wb").write(out.read())
PY
[ -s "$E2E_TMP/hello.bin" ] || { fail "no ClientHello"; e2e_finish; }

raw() { counts_tunnels "ok.$E2E_DOMAIN" "$1" "$E2E_TMP/hello.bin"; }
inspected() { counts_tunnels "tls.$E2E_DOMAIN" "$1" "$E2E_TMP/hello.bin"; }

# Prints the calls per transaction (of N) in strace -c's FILE besides
# epoll_wait and accept4, then the writev calls.
calls() { # FILE
    awk -v n=$N '
        $1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" && $NF != "epoll_wait" && $NF != "accept4" { o += $4 }
        $NF == "writev" { w = $4 }
        END { printf "%.2f %.2f\n", o / n, w / n }' "$1"
}

# ---- system calls ----------------------------------------------------------
e2e_start_proxy
check "warm-up transactions" "0 0" "$(raw 1) $(inspected 1)"
counts_wait_lines 2 "$E2E_TMP/proxy.log"
lines=2
for w in raw inspected; do
    counts_strace_start "$E2E_TMP/strace-$w.txt"
    check "$N transactions ($w) under strace" "0" "$($w $N)"
    lines=$((lines + N))
    counts_wait_lines $lines "$E2E_TMP/proxy.log"
    counts_strace_end
    echo "# $w: system calls per transaction"
    sed 's/^/#   /' "$E2E_TMP/strace-$w.txt"
done
check "every inspected tunnel's log line names its sni" "$((N + 1))" \
    "$(grep -c '"sni":"tls.pinhole-e2e.test"' "$E2E_TMP/proxy.log")"
read -r raw_calls raw_writev <<<"$(calls "$E2E_TMP/strace-raw.txt")"
read -r insp_calls insp_writev <<<"$(calls "$E2E_TMP/strace-inspected.txt")"
echo "# per transaction besides epoll_wait and accept4: uninspected $raw_calls, inspected" \
    "$insp_calls; writev: $raw_writev, $insp_writev"
check "the inspected hello goes on by send(2), not from a buffer (writev per transaction)" \
    "0.00" "$insp_writev"
check "inspection adds at most 0.1 system call per transaction" "yes" \
    "$(awk -v a="$insp_calls" -v b="$raw_calls" 'BEGIN { print (a > 0 && a <= b + 0.1) ? "yes" : "no: " a " against " b }')"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# ---- heap allocations ------------------------------------------------------
warm_raw() { raw $(($1 + 1)); }
warm_inspected() { inspected $(($1 + 1)); }
per_raw=$(counts_per "$(counts_allocs $N warm_raw)" "$(counts_allocs 0 warm_raw)" $N)
per_insp=$(counts_per "$(counts_allocs $N warm_inspected)" "$(counts_allocs 0 warm_inspected)" $N)
echo "# heap allocations per transaction: uninspected $per_raw, inspected $per_insp"
check "inspection adds at most 0.1 heap allocation per transaction, at most $ALLOC_MAX in all" "yes" \
    "$(awk -v a="$per_insp" -v b="$per_raw" -v m=$ALLOC_MAX 'BEGIN {
        print (a != "none" && b != "none" && a + 0 > 0 && a + 0 <= b + 0.1 && a + 0 <= m) ? "yes" : "no: " a " against " b }')"
e2e_finish
