#!/bin/bash
# connect_counts.sh - what one CONNECT costs the proxy in system calls and
# heap allocations, counted (not timed: the machine's load moves neither).
# A client makes N sequential transactions (connect, CONNECT ok.DOMAIN with
# a grant, the 200, 64 bytes there and back through an echo upstream,
# close), the DNS answer cached by a warm-up first (as bench_proxy's).
#   system calls: strace -f -c attached to every thread of the proxy over
#     the N transactions: at most 22.5 per transaction besides the
#     epoll_wait wake-ups (whose count depends on how the peers' bytes fall
#     into loop iterations); docs/pinhole-proxy.md names each of the 22.
#   the listener: a lone connection's 200 leaves before the accept4 that
#     finds the queue empty (strace); each worker's listening socket has the
#     backlog of 4096 it asked for (ss).
#   small messages after bulk: 64-byte echoes on a tunnel that moved 384
#     KiB first go by recv/send, not splice (strace).
#   the log lines of one loop pass: the shutdown lines of idle tunnels
#     ended together at the drain's deadline share their write(2) (strace).
#   heap allocations: the counter of bench_proxy (libbench_alloc_count.so)
#     preloaded into two proxies, one serving the warm-up and N transactions,
#     one the warm-up alone; the difference over N, the log line's JSON
#     included, is at most ALLOC_MAX.
# Usage: connect_counts.sh TEST_PROXY POLICYC PINHOLE_GUARD ALLOC_COUNTER
PROXY=$1 POLICYC=$2 GRANT=$3 COUNTER=$4
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/counts_lib.sh"
N=300
ALLOC_MAX=8

counts_start_echo
# A TTL, so the proxy's cache answers every CONNECT after the warm-up (the
# DNS round trip is not the CONNECT's own work).
e2e_dnsmasq --local=/$E2E_DOMAIN/ --host-record=ok.$E2E_DOMAIN,127.0.0.1 --local-ttl=300
e2e_make_policy

transactions() { # COUNT: sequential transactions through the proxy; prints the failures
    counts_tunnels "ok.$E2E_DOMAIN" "$1"
}

# ---- system calls ----------------------------------------------------------
e2e_start_proxy
check "warm-up transaction" "0" "$(transactions 1)"
counts_wait_lines 1 "$E2E_TMP/proxy.log"
counts_strace_start "$E2E_TMP/strace.txt"
check "$N transactions under strace" "0" "$(transactions $N)"
counts_wait_lines $((N + 1)) "$E2E_TMP/proxy.log"
others=$(counts_strace_stop "$E2E_TMP/strace.txt" $N 2>"$E2E_TMP/strace.sum")
echo "# per transaction: system calls besides epoll_wait $others"
cat "$E2E_TMP/strace.sum"
check "at most 22.5 system calls per transaction besides epoll_wait" "yes" \
    "$(awk -v o="$others" 'BEGIN { print (o > 0 && o <= 22.5) ? "yes" : "no: " o }')"

# ---- the listener ----------------------------------------------------------
# A lone connection's 200 goes out before the accept(2) that finds the
# listener's queue empty (the listener queues its next accept behind the
# connection's own events: docs/pinhole-proxy.md, PERFORMANCE); main
# accepted until EAGAIN first, so every 200 waited for a failing accept4.
ORDER_N=20
counts_strace_attach "$E2E_TMP/strace-order.txt" -s 16 -e trace=accept4,sendto
check "$ORDER_N transactions under strace (order)" "0" "$(transactions $ORDER_N)"
counts_wait_lines $((N + ORDER_N + 1)) "$E2E_TMP/proxy.log"
counts_strace_end
before=$(/usr/bin/python3 - "$E2E_TMP/strace-order.txt" <<'PY'
import re, sys
# Per thread: was an accept4 EAGAIN seen between the accept4 that took a
# connection and the 200 sent to it? (strace -f splits a call of one thread
# interrupted by another's into "<unfinished ...>" and "<... resumed>".)
pending = {}  # tid -> text of an unfinished call
state = {}    # tid -> "accepted" | "eagain" (since the last accepted connection)
first = late = 0
for line in open(sys.argv[1]):
    m = re.match(r"(\d+)\s+(.*)", line)
    if not m:
        continue
    tid, text = m.groups()
    if text.endswith("<unfinished ...>"):
        pending[tid] = text
        continue
    if text.startswith("<..."):
        text = pending.pop(tid, "") + text
    if text.startswith("accept4("):
        if re.search(r"= \d+$", text):
            state[tid] = "accepted"
        elif "EAGAIN" in text and state.get(tid) == "accepted":
            state[tid] = "eagain"
    elif text.startswith("sendto(") and "HTTP/1.1 200" in text:
        if state.get(tid) == "accepted":
            first += 1
        else:
            late += 1
        state[tid] = None
print(f"{first} {late}")
PY
)
echo "# 200s sent before the listener's failing accept4, and after one: $before"
check "the 200 leaves before the listener's failing accept4 (19 of 20 at least)" "yes" \
    "$(echo "$before" | awk -v n=$ORDER_N '{ print ($1 >= n - 1) ? "yes" : "no: " $0 }')"
# The accept queue of each worker's listening socket is the 4096 the proxy
# asks listen(2) for (ss: Send-Q of a listening socket); main's listener
# (evconnlistener_new with backlog -1) listened again with libevent's 128.
check "listen backlog 4096 on every worker's socket" "4096 4096" \
    "$(ss -ltnH "sport = :$PROXY_PORT" | awk '{ print $3 }' | sort | xargs)"

# ---- small messages after bulk ---------------------------------------------
# One tunnel moves 384 KiB each way (past the relay's splice mark), then
# ECHOES 64-byte round trips: those go by recv/send again, not by two
# splice(2) calls and a pipe per hop (main: 4 splice calls per echo).
ECHOES=300
PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "ok.$E2E_DOMAIN:$UP" \
    "$TOKEN" "$E2E_TMP/echo.ctl" $ECHOES <<'PY' &
import os, sys, time
from tunnel_http import tunnel
port, dest, token, ctl, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
s, f = tunnel(port, token, dest)
for _ in range(6):
    s.sendall(b"y" * 65536)
    assert f.read(65536) == b"y" * 65536
open(ctl + ".bulk", "w").close()
while not os.path.exists(ctl + ".go"):
    time.sleep(0.01)
ok = 0
for _ in range(n):
    s.sendall(b"x" * 64)
    ok += f.read(64) == b"x" * 64
open(ctl + ".done", "w").write(str(ok))
PY
CLIENT=$!
for _ in $(seq 1 400); do [ -e "$E2E_TMP/echo.ctl.bulk" ] && break; sleep 0.025; done
counts_strace_start "$E2E_TMP/strace-small.txt" -e trace=splice,recvfrom,sendto
touch "$E2E_TMP/echo.ctl.go"
wait $CLIENT
counts_strace_end
check "$ECHOES echoes after the bulk" "$ECHOES" "$(cat "$E2E_TMP/echo.ctl.done" 2>/dev/null)"
splices=$(awk -v n=$ECHOES '$NF == "splice" { s = $4 } END { printf "%.2f\n", s / n }' \
    "$E2E_TMP/strace-small.txt")
echo "# splice calls per 64-byte echo after 384 KiB of bulk: $splices"
sed 's/^/#   /' "$E2E_TMP/strace-small.txt"
check "small messages after bulk leave splice (at most 0.1 splice per echo)" "yes" \
    "$(awk -v x="$splices" 'BEGIN { print (x <= 0.1) ? "yes" : "no: " x }')"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# ---- the log lines of one loop pass ----------------------------------------
# A worker writes the lines one pass of its loop finished with one write(2)
# (log_json.h). TUNNELS idle tunnels are open when SIGTERM comes; at the
# drain's deadline each worker ends all of its own in one callback: their
# lines go out a few KiB per write(2) (at most 4096 bytes each), not one
# write per line (c077e3f: as many writes as lines).
TUNNELS=24
E2E_PROXY_NAME=drain e2e_start_proxy --drain-timeout-s 1
PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "ok.$E2E_DOMAIN:$UP" \
    "$TOKEN" "$E2E_TMP/idle.ctl" $TUNNELS <<'PY' &
import os, sys, time
from tunnel_http import tunnel
port, dest, token, ctl, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
held = [tunnel(port, token, dest) for _ in range(n)]
open(ctl + ".open", "w").close()
for s, f in held:
    f.read()  # until the proxy ends the tunnel
PY
IDLE=$!
for _ in $(seq 1 400); do [ -e "$E2E_TMP/idle.ctl.open" ] && break; sleep 0.025; done
counts_strace_attach "$E2E_TMP/strace-drain.txt" -e trace=write
kill -TERM "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null
while kill -0 "$ST" 2>/dev/null; do sleep 0.01; done
wait $IDLE
lines=$(grep -c '"end":"shutdown"' "$E2E_TMP/drain.log")
writes=$(grep -c 'write(1,' "$E2E_TMP/strace-drain.txt")
echo "# $lines shutdown lines in $writes write(2) calls to stdout"
check "one shutdown line per idle tunnel" "$TUNNELS" "$lines"
check "the lines of a pass share their write(2) (at most a third as many writes as lines)" "yes" \
    "$(awk -v l="$lines" -v w="$writes" 'BEGIN { print (w > 0 && w * 3 <= l) ? "yes" : "no: " w " writes for " l " lines" }')"

# ---- heap allocations ------------------------------------------------------
warm_transactions() { # COUNT: a warm-up and COUNT transactions; prints the failures
    transactions $(($1 + 1))
}
few=$(counts_allocs 0 warm_transactions)
many=$(counts_allocs $N warm_transactions)
per=$(counts_per "$many" "$few" $N)
echo "# heap allocations per transaction: $per ($many with $N transactions, $few without)"
check "at most $ALLOC_MAX heap allocations per transaction" "yes" \
    "$(awk -v p="$per" -v m=$ALLOC_MAX 'BEGIN { print (p != "none" && p + 0 > 0 && p + 0 <= m) ? "yes" : "no: " p }')"
e2e_finish
