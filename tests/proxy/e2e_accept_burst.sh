#!/bin/bash
# e2e_accept_burst.sh - one peer's burst of connects does not keep a worker
# from its other descriptors and timers: the listener accepts at most 64
# connections in one loop pass, then the worker's next epoll_wait serves
# what else is ready before the rest of the burst.
# A worker holding two connections (heads still coming) is stopped
# (SIGSTOP); 400 connections, each with its first byte sent (so
# TCP_DEFER_ACCEPT hands them over), are queued on its listening socket,
# waited for in the socket's accept queue (ss: Recv-Q); strace -f follows
# accept4 and epoll_wait of every thread when it runs again (SIGCONT). The
# longest run of accept4 calls that returned a connection with no
# epoll_wait between them is at most 64 (it was the whole burst).
# Usage: e2e_accept_burst.sh TEST_PROXY POLICYC PINHOLE_GUARD ...
PROXY=$1 POLICYC=$2 GRANT=$3
. "$(dirname "$0")/e2e_lib.sh"
. "$(dirname "$0")/counts_lib.sh"
BURST=400

e2e_start_dns
e2e_make_policy
e2e_start_proxy --workers 1

queue_len() { # the accept queue of the proxy's listening socket
    ss -Hltn "sport = :$PROXY_PORT" | awk '{ print $2; exit }'
}

/usr/bin/python3 - "$PROXY_PORT" "$BURST" "$E2E_TMP/burst" <<'PY' &
import os, socket, sys, time
port, n, ctl = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def wait_for(name):
    while not os.path.exists(ctl + "." + name):
        time.sleep(0.02)
held = []
for _ in range(2):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"CONNECT ")  # a head still coming: the connection stays
    held.append(s)
open(ctl + ".held", "w").close()
wait_for("stopped")
burst = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"C")
    burst.append(s)
open(ctl + ".queued", "w").close()
wait_for("done")
PY
CLIENT=$!
E2E_PIDS="$E2E_PIDS $CLIENT"

for _ in $(seq 1 400); do [ -e "$E2E_TMP/burst.held" ] && break; sleep 0.025; done
check "the two held connections are open" "2" \
    "$(e2e_wait_metric pinhole_proxy_connections_active 2)"
kill -STOP "$PROXY_PID"
touch "$E2E_TMP/burst.stopped"
for _ in $(seq 1 400); do [ -e "$E2E_TMP/burst.queued" ] && break; sleep 0.025; done
q=""
for _ in $(seq 1 400); do
    q=$(queue_len)
    [ "$q" = "$BURST" ] && break
    sleep 0.025
done
check "the burst waits in the stopped worker's accept queue" "$BURST" "$q"

counts_strace_attach "$E2E_TMP/strace-burst.txt" -e trace=accept4,epoll_wait
kill -CONT "$PROXY_PID"
for _ in $(seq 1 800); do
    q=$(queue_len)
    [ "$q" = 0 ] && break
    sleep 0.025
done
check "the burst is accepted" "0" "$q"
counts_strace_end
touch "$E2E_TMP/burst.done"

# Per thread: the longest run of accept4 returning a descriptor without an
# epoll_wait between.
run=$(awk '
    $2 ~ /^accept4\(/ && $NF ~ /^[0-9]+$/ && $(NF-1) == "=" { r[$1]++; if (r[$1] > m) m = r[$1] }
    $2 ~ /^epoll_wait\(/ || $2 == "<..." && $3 == "epoll_wait" { r[$1] = 0 }
    END { print m + 0 }' "$E2E_TMP/strace-burst.txt")
echo "# the longest run of accepts without an epoll_wait: $run of $BURST"
[ "$run" -ge 1 ] && [ "$run" -le 64 ] ||
    fail "a burst of $BURST connects kept the worker from epoll_wait for $run accepts (at most 64)"

e2e_finish
