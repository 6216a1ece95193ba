#!/bin/bash
# forward_counts.sh - what one forwarded plain-HTTP request costs the proxy
# on a kept-alive client connection whose upstream connection is reused
# (the steady state of HTTP_PROXY clients), counted, not timed: the
# machine's load moves neither count.
# A client sends N sequential keep-alive GETs (absolute-form, a Bearer
# grant) on one connection to an origin that answers each with 64 bytes;
# a warm-up request first fills the DNS cache and opens the upstream.
#   system calls: strace -f -c attached to every thread of the proxy over
#     the N requests: at most SYS_MAX per request besides epoll_wait (7:
#     the head read (libevent's reader: ioctl FIONREAD, then readv), sent
#     upstream at once (sendto), the answer read (ioctl, readv), the log
#     line (write), the answer written at once (writev); c077e3f made 9:
#     two epoll_ctl MOD to the same events as the client's socket was
#     watched while its request waited; a8135e1 made 12, waiting a loop
#     pass for each write), with no epoll_ctl.
#   heap allocations: bench_proxy's counter (libbench_alloc_count.so)
#     preloaded into two proxies, one serving the warm-up and N requests,
#     one the warm-up alone; the difference over N is at most ALLOC_MAX
#     (6: the upstream's path and libevent's buffer chains; a8135e1 made 19,
#     13 of them verifying the same grant again).
#   one log line per request, and one upstream connection for them all.
# Usage: forward_counts.sh TEST_PROXY POLICYC PINHOLE_GUARD ALLOC_COUNTER
PROXY=$1 POLICYC=$2 GRANT=$3 COUNTER=$4
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/counts_lib.sh"
N=300
SYS_MAX=7.5
ALLOC_MAX=8

# The origin: every request head gets 200 and 64 bytes, kept alive; it
# prints its port, then the connections it accepted, one line each.
/usr/bin/python3 - >"$E2E_TMP/origin.out" 2>"$E2E_TMP/origin.err" <<'PY' &
import selectors, socket
sel = selectors.DefaultSelector()
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(128)
print(ls.getsockname()[1], flush=True)
sel.register(ls, selectors.EVENT_READ)
reply = (b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + b"0123456789abcdef" * 4)
bufs = {}
while True:
    for key, _ in sel.select():
        if key.fileobj is ls:
            c = ls.accept()[0]
            print("accepted", flush=True)
            bufs[c] = b""
            sel.register(c, selectors.EVENT_READ)
            continue
        c = key.fileobj
        data = c.recv(65536)
        if not data:
            sel.unregister(c)
            c.close()
            del bufs[c]
            continue
        bufs[c] += data
        while b"\r\n\r\n" in bufs[c]:
            bufs[c] = bufs[c].split(b"\r\n\r\n", 1)[1]
            c.sendall(reply)
PY
E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 200); do [ -s "$E2E_TMP/origin.out" ] && break; sleep 0.025; done
UP=$(head -1 "$E2E_TMP/origin.out")
[ -n "$UP" ] || { fail "origin did not start: $(cat "$E2E_TMP/origin.err")"; e2e_finish; }
e2e_dnsmasq --local=/$E2E_DOMAIN/ --host-record=ok.$E2E_DOMAIN,127.0.0.1 --local-ttl=300
e2e_make_policy

# Starts a client holding one connection to the proxy: it sends the
# warm-up request, touches CTL.warm, waits for CTL.go, sends COUNT more
# requests on the same connection, and writes the failures to CTL.done.
client() { # COUNT CTL
    PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "ok.$E2E_DOMAIN:$UP" \
        "$TOKEN" "$1" "$2" <<'PY' &
import os, socket, sys, time
from tunnel_http import response
port, dest, token, n, ctl = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
s = socket.create_connection(("127.0.0.1", int(port)))
f = s.makefile("rb")
req = ("GET http://%s/x HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Bearer %s\r\n\r\n"
       % (dest, dest, token)).encode()
def one():
    s.sendall(req)
    status, body, _ = response(f)
    return status.startswith("HTTP/1.1 200") and len(body) == 64
failed = 0 if one() else 1
open(ctl + ".warm", "w").close()
while not os.path.exists(ctl + ".go"):
    time.sleep(0.01)
for _ in range(n):
    failed += 0 if one() else 1
open(ctl + ".done", "w").write(str(failed))
PY
    CLIENT=$!
    for _ in $(seq 1 400); do [ -e "$2.warm" ] && break; sleep 0.025; done
}

# ---- system calls ----------------------------------------------------------
e2e_start_proxy
client $N "$E2E_TMP/sys"
counts_wait_lines 1 "$E2E_TMP/proxy.log"
counts_strace_start "$E2E_TMP/strace.txt"
touch "$E2E_TMP/sys.go"
wait $CLIENT
check "$N kept-alive requests under strace" "0" "$(cat "$E2E_TMP/sys.done" 2>/dev/null)"
counts_wait_lines $((N + 1)) "$E2E_TMP/proxy.log"
others=$(counts_strace_stop "$E2E_TMP/strace.txt" $N 2>"$E2E_TMP/strace.sum")
echo "# per request: system calls besides epoll_wait $others"
cat "$E2E_TMP/strace.sum"
check "at most $SYS_MAX system calls per request besides epoll_wait" "yes" \
    "$(awk -v o="$others" -v m="$SYS_MAX" 'BEGIN { print (o > 0 && o <= m) ? "yes" : "no: " o }')"
# The client's socket is watched while its request waits (forward-int.h,
# px_fwd_watch_client) with its epoll interest unchanged: c077e3f made two
# EPOLL_CTL_MOD per request (2.00).
ctls=$(awk -v n=$N '$NF == "epoll_ctl" { c = $4 } END { printf "%.2f\n", c / n }' "$E2E_TMP/strace.txt")
check "no epoll_ctl per kept-alive request" "yes" \
    "$(awk -v c="$ctls" 'BEGIN { print (c < 0.05) ? "yes" : "no: " c }')"
check "one log line per request" "$((N + 1))" "$(grep -c '"method":"GET"' "$E2E_TMP/proxy.log")"
check "one upstream connection for every request" "1" "$(grep -c accepted "$E2E_TMP/origin.out")"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# ---- heap allocations ------------------------------------------------------
requests() { # COUNT: a warm-up and COUNT requests on one connection; prints the failures
    client "$1" "$E2E_TMP/req$1"
    touch "$E2E_TMP/req$1.go"
    wait $CLIENT
    cat "$E2E_TMP/req$1.done" 2>/dev/null || echo "no client"
}
few=$(counts_allocs 0 requests)
many=$(counts_allocs $N requests)
per=$(counts_per "$many" "$few" $N)
echo "# heap allocations per request: $per ($many with $N requests, $few without)"
check "at most $ALLOC_MAX heap allocations per request" "yes" \
    "$(awk -v p="$per" -v m=$ALLOC_MAX 'BEGIN { print (p != "none" && p + 0 >= 0 && p + 0 <= m) ? "yes" : "no: " p }')"
e2e_finish
