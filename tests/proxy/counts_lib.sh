# counts_lib.sh - what connect_counts.sh and forward_counts.sh share
# (sourced after e2e_lib.sh): system calls counted by strace attached to
# every thread of the proxy, heap allocations by bench_proxy's preloaded
# counter ($COUNTER, libbench_alloc_count.so), and the log lines the
# counted exchanges write.

# The echo upstream of the tunnel counts (every byte sent back) on a port
# the kernel chose: sets UP.
counts_start_echo() {
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
}

# COUNT sequential tunnels through the proxy ($PROXY_PORT, $TOKEN) to
# HOST:$UP (the echo upstream), each sending its first flight (the bytes of
# FILE; without one, 64 x), reading it back, and closing; prints the
# failures.
counts_tunnels() { # HOST COUNT [FILE]
    PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$1:$UP" \
        "$TOKEN" "$2" "${3:-}" <<'PY'
import sys
from tunnel_http import tunnel
port, dest, token, n, path = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
msg = open(path, "rb").read() if path else b"x" * 64
failed = 0
for _ in range(n):
    try:
        s, f = tunnel(port, token, dest)
        s.sendall(msg)
        failed += f.read(len(msg)) != msg
        f.close()
        s.close()
    except (AssertionError, OSError):
        failed += 1
print(failed)
PY
}

# Waits until LOG holds COUNT lines of status 200: an exchange's line is
# written as it ends, which may be just after its client saw the end.
counts_wait_lines() { # COUNT LOG
    for _ in $(seq 1 400); do
        [ "$(grep -c '"status":200' "$2")" -ge "$1" ] && return 0
        sleep 0.025
    done
    return 1
}

# Attaches strace -f (and OPTIONS) to $PROXY_PID, its output into FILE
# (ST: its pid); returns once every thread names it in its status
# (TracerPid).
counts_strace_attach() { # FILE [OPTIONS...]
    strace -f -q "${@:2}" -o "$1" -p "$PROXY_PID" 2>>"$E2E_TMP/strace.err" &
    ST=$!
    for _ in $(seq 1 200); do
        all=1
        for t in /proc/"$PROXY_PID"/task/*; do
            [ "$(awk '/^TracerPid/{print $2}' "$t/status")" = "$ST" ] || all=0
        done
        [ $all = 1 ] && return 0
        sleep 0.025
    done
}

# counts_strace_attach with -c: a summary of the calls into FILE.
counts_strace_start() { # FILE [OPTIONS...]
    counts_strace_attach "$1" -c "${@:2}"
}

# Detaches strace ($ST) and returns once it has exited, its output written
# (callable from a command substitution, where wait(1) cannot wait for it).
counts_strace_end() {
    kill -INT "$ST"
    while kill -0 "$ST" 2>/dev/null; do sleep 0.01; done
}

# Stops strace and prints the system calls of FILE besides epoll_wait per
# one of N exchanges (the wake-ups depend on how the peers' bytes fall into
# loop iterations), then the summary as comments.
counts_strace_stop() { # FILE N
    counts_strace_end
    awk -v n="$2" '
        $1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" && $NF != "epoll_wait" { o += $4 }
        END { printf "%.2f\n", o / n }' "$1"
    sed 's/^/#   /' "$1" >&2
}

# The heap allocations of a proxy started with the counter preloaded that
# served what `RUN COUNT` made (a warm-up and COUNT exchanges; RUN prints
# its failures), start-up and shutdown included.
counts_allocs() { # COUNT RUN
    E2E_PROXY_NAME=alloc$1 \
    E2E_PROXY_PREFIX="env LD_PRELOAD=$COUNTER PH_ALLOC_COUNT_OUT=$E2E_TMP/allocs-$1.txt" \
        e2e_start_proxy
    local failed
    failed=$("$2" "$1")
    [ "$failed" = 0 ] || fail "exchanges failed while counting allocations: $failed"
    counts_wait_lines $(($1 + 1)) "$E2E_TMP/alloc$1.log"
    kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null
    awk '{ print $2 }' "$E2E_TMP/allocs-$1.txt"
}

# Prints (MANY - FEW) / N, or "none" when either count is missing.
counts_per() { # MANY FEW N
    awk -v a="$1" -v b="$2" -v n="$3" \
        'BEGIN { if (a == "" || b == "") print "none"; else printf "%.2f\n", (a - b) / n }'
}
