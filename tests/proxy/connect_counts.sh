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
#   small messages after bulk: 64-byte echoes on a tunnel that moved 384
#     KiB first go by recv/send, not splice (strace).
#   heap allocations: the counter of bench_proxy (libbench_alloc_count.so)
#     preloaded into two proxies, one serving the warm-up and N transactions,
#     one the warm-up alone; the difference over N, the log line's JSON
#     included, is at most ALLOC_MAX.
# Usage: connect_counts.sh TEST_PROXY POLICYC PINHOLE_GUARD ALLOC_COUNTER
PROXY=$1 POLICYC=$2 GRANT=$3 COUNTER=$4
. "$(dirname "$0")/e2e_lib.sh"
N=300
ALLOC_MAX=7

/usr/bin/python3 - >"$E2E_TMP/echo.port" 2>"$E2E_TMP/echo.err" <<'PY' &
import selectors, socket
sel = selectors.DefaultSelector()
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(128)
print(ls.getsockname()[1], flush=True)
sel.register(ls, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj is ls:
            sel.register(ls.accept()[0], selectors.EVENT_READ)
            continue
        data = key.fileobj.recv(65536)
        if data:
            key.fileobj.sendall(data)
        else:
            sel.unregister(key.fileobj)
            key.fileobj.close()
PY
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 200); do [ -s "$E2E_TMP/echo.port" ] && break; sleep 0.025; done
UP=$(cat "$E2E_TMP/echo.port")
[ -n "$UP" ] || { fail "echo upstream did not start: $(cat "$E2E_TMP/echo.err")"; e2e_finish; }
# A TTL, so the proxy's cache answers every CONNECT after the warm-up (the
# DNS round trip is not the CONNECT's own work).
e2e_dnsmasq --local=/$E2E_DOMAIN/ --host-record=ok.$E2E_DOMAIN,127.0.0.1 --local-ttl=300
e2e_make_policy

transactions() { # COUNT: sequential transactions through the proxy; prints the failures
    PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "ok.$E2E_DOMAIN:$UP" \
        "$TOKEN" "$1" <<'PY'
import sys
from tunnel_http import tunnel
port, dest, token, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
failed = 0
for _ in range(n):
    try:
        s, f = tunnel(port, token, dest)
        s.sendall(b"x" * 64)
        failed += f.read(64) != b"x" * 64
        f.close()
        s.close()
    except (AssertionError, OSError):
        failed += 1
print(failed)
PY
}

# The log line of every transaction is written when the tunnel ends, which
# may be just after the client's close: wait for COUNT lines.
wait_lines() { # COUNT
    for _ in $(seq 1 400); do
        [ "$(grep -c '"status":200' "$E2E_TMP/proxy.log")" -ge "$1" ] && return 0
        sleep 0.025
    done
    return 1
}

# strace ($ST) has attached to every thread of the proxy once each names it
# in its status (TracerPid).
wait_attached() {
    for _ in $(seq 1 200); do
        all=1
        for t in /proc/"$PROXY_PID"/task/*; do
            [ "$(awk '/^TracerPid/{print $2}' "$t/status")" = "$ST" ] || all=0
        done
        [ $all = 1 ] && return 0
        sleep 0.025
    done
}

# ---- system calls ----------------------------------------------------------
e2e_start_proxy
check "warm-up transaction" "0" "$(transactions 1)"
wait_lines 1
strace -f -c -q -o "$E2E_TMP/strace.txt" -p "$PROXY_PID" 2>"$E2E_TMP/strace.err" &
ST=$!
wait_attached
check "$N transactions under strace" "0" "$(transactions $N)"
wait_lines $((N + 1))
kill -INT $ST; wait $ST
others=$(awk -v n=$N '
    $1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" && $NF != "epoll_wait" { o += $4 }
    END { printf "%.2f\n", o / n }' "$E2E_TMP/strace.txt")
echo "# per transaction: system calls besides epoll_wait $others"
sed 's/^/#   /' "$E2E_TMP/strace.txt"
check "at most 22.5 system calls per transaction besides epoll_wait" "yes" \
    "$(awk -v o="$others" 'BEGIN { print (o > 0 && o <= 22.5) ? "yes" : "no: " o }')"

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
strace -f -c -q -e trace=splice,recvfrom,sendto -o "$E2E_TMP/strace-small.txt" \
    -p "$PROXY_PID" 2>>"$E2E_TMP/strace.err" &
ST=$!
wait_attached
touch "$E2E_TMP/echo.ctl.go"
wait $CLIENT
kill -INT $ST; wait $ST
check "$ECHOES echoes after the bulk" "$ECHOES" "$(cat "$E2E_TMP/echo.ctl.done" 2>/dev/null)"
splices=$(awk -v n=$ECHOES '$NF == "splice" { s = $4 } END { printf "%.2f\n", s / n }' \
    "$E2E_TMP/strace-small.txt")
echo "# splice calls per 64-byte echo after 384 KiB of bulk: $splices"
sed 's/^/#   /' "$E2E_TMP/strace-small.txt"
check "small messages after bulk leave splice (at most 0.1 splice per echo)" "yes" \
    "$(awk -v x="$splices" 'BEGIN { print (x <= 0.1) ? "yes" : "no: " x }')"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# ---- heap allocations ------------------------------------------------------
allocs() { # COUNT: the proxy's allocations serving a warm-up and COUNT transactions
    E2E_PROXY_NAME=alloc$1 \
    E2E_PROXY_PREFIX="env LD_PRELOAD=$COUNTER PH_ALLOC_COUNT_OUT=$E2E_TMP/allocs-$1.txt" \
        e2e_start_proxy
    local failed
    failed=$( (transactions 1; transactions "$1") | awk '{ s += $1 } END { print s }')
    [ "$failed" = 0 ] || fail "transactions failed while counting: $failed"
    for _ in $(seq 1 400); do
        [ "$(grep -c '"status":200' "$E2E_TMP/alloc$1.log")" -ge $(($1 + 1)) ] && break
        sleep 0.025
    done
    kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null
    awk '{ print $2 }' "$E2E_TMP/allocs-$1.txt"
}
few=$(allocs 0)
many=$(allocs $N)
per=$(awk -v a="$many" -v b="$few" -v n=$N 'BEGIN { if (a == "" || b == "") print "none"; else printf "%.2f\n", (a - b) / n }')
echo "# heap allocations per transaction: $per ($many with $N transactions, $few without)"
check "at most $ALLOC_MAX heap allocations per transaction" "yes" \
    "$(awk -v p="$per" -v m=$ALLOC_MAX 'BEGIN { print (p != "none" && p + 0 > 0 && p + 0 <= m) ? "yes" : "no: " p }')"
e2e_finish
