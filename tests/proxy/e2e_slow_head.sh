#!/bin/bash
# e2e_slow_head.sh - request heads arriving slowly.
# 1. A head near the 8 KiB cap sent a byte at a time is parsed twice (the
#    proxy's pinhole_proxy_head_parses_total; re-parsing from its first byte
#    on every piece made 8000), CONNECT and forwarded heads; the proxy's CPU
#    for it against a head an eighth of its size is printed beside (from
#    /proc/PID/task/*/schedstat).
# 2. max_head_connections_per_peer: one peer's slow heads are refused past
#    the cap (503 peer_head_limit_exceeded, a JSON log line, the metric)
#    while another peer is served, and the slot comes back once a head is
#    complete; on the unix socket the peer is the connecting process. Each
#    step waits on the state the next check depends on (the proxy's
#    pinhole_proxy_connections_active), never on time, so it holds with both
#    cores busy.
# Usage: e2e_slow_head.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
D=$E2E_DOMAIN

# ---- 1. CPU linear in the head's size ---------------------------------------
e2e_start_proxy --workers 1
out=$(/usr/bin/python3 - "$PROXY_PID" "$PROXY_PORT" "ok.$D" "$ADMIN_PORT" <<'PY'
import glob, socket, sys, time, urllib.request
pid, port, host, admin = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])

def parses():
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=5).read()
    for line in text.decode().splitlines():
        if line.startswith("pinhole_proxy_head_parses_total "):
            return int(line.split()[1])
    return -1

def cpu_ns():
    t = 0
    for f in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            t += int(open(f).read().split()[0])
        except OSError:
            pass
    return t

def head(kind, size):
    # No grant: the head is decided (407) and nothing is resolved or dialed.
    pre = {"connect": "CONNECT %s:1 HTTP/1.1\r\nX-Pad: " % host,
           "forward": "GET http://%s:1/ HTTP/1.1\r\nHost: %s:1\r\nX-Pad: " % (host, host)}[kind]
    pre = pre.encode()
    return pre + b"a" * (size - len(pre) - 4) + b"\r\n\r\n"

def bytewise(h):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for i in range(len(h)):
        s.send(h[i:i + 1])
        time.sleep(0.0001)  # each byte its own segment, its own read
    s.settimeout(10)
    status = s.recv(200).split(b"\r\n")[0].decode()
    s.close()
    return status

def cost(kind, size):
    c0 = cpu_ns()
    status = bytewise(head(kind, size))
    return cpu_ns() - c0, status

def parses_of(kind, size):
    p0 = parses()
    bytewise(head(kind, size))
    p1 = parses()
    return p1 - p0 if p0 >= 0 and p1 >= 0 else -1

for kind in ("connect", "forward"):
    small, big = [], []
    for i in range(5):  # the least of several runs of each: other load only adds
        c, st_small = cost(kind, 1000)
        small.append(c)
        if i < 3:
            c, st_big = cost(kind, 8000)
            big.append(c)
    ratio = min(big) / max(min(small), 1)
    print("%s %s %s %.1f %.1f %.1f %d" % (kind, st_small.split()[1], st_big.split()[1],
                                        min(small) / 1e6, min(big) / 1e6, ratio,
                                        parses_of(kind, 8000)))
PY
)
echo "$out" | sed 's/^/# kind status(1000 B) status(8000 B) cpu_ms(1000 B) cpu_ms(8000 B) ratio parses(8000 B): /'
while read -r kind s1 s2 c1 c2 ratio np; do
    # The deterministic side: one 8000-byte head sent a byte at a time is
    # parsed at its first line's end and at its end (the old code: 8000).
    check "$kind: a head of 8000 pieces is parsed twice" "2" "$np"
    check "$kind: heads sent a byte at a time are decided (no grant: 407)" "407 407" "$s1 $s2"
    # The CPU ratio is printed, not asserted: linear is 8 (measured
    # 7.3-8.0 alone), re-parsing from byte 0 measured 16.2, and a busy
    # sibling CPU alone doubles a process's CPU time on these VMs (15.0 seen
    # in a loaded CI run of this code), so no bound separates the two
    # reliably; the parse count above is what pins the behaviour.
    echo "# $kind: 8x the head, ${ratio}x the proxy's CPU (${c1} -> ${c2} ms)"
done <<<"$out"
kill "$PROXY_PID"; wait "$PROXY_PID" 2>/dev/null

# ---- 2. the per-peer head-phase cap ----------------------------------------
e2e_start_proxy --workers 1 --max-head-connections-per-peer 4 --header-timeout-ms 20000 \
    --unix-socket "$E2E_TMP/proxy.sock"
out=$(/usr/bin/python3 - "$PROXY_PORT" "ok.$D" "$TOKEN" "$E2E_TMP/proxy.sock" "$ADMIN_PORT" <<'PY'
import socket, sys, time, urllib.request
port, host, token, path, admin = (int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4],
                                  int(sys.argv[5]))

def active():
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith("pinhole_proxy_connections_active "):
            return int(line.split()[1])
    return -1

def wait_active(n):
    # The proxy holds exactly n connections (accepted, heads pending; the
    # refused ones closed). Bounded only so a broken proxy ends the test.
    end = time.monotonic() + 60
    while active() != n and time.monotonic() < end:
        time.sleep(0.01)
    return active()

def slow(src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"CONNECT ")  # the listener defers accept until a first byte
    return s

def status(s, rest=b""):
    s.settimeout(10)
    if rest:
        s.sendall(rest)
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(400)
        if not d:
            break
        data += d
    lines = data.split(b"\r\n")
    reason = [l.split(b": ", 1)[1] for l in lines if l.lower().startswith(b"pinhole-reason:")]
    return "%s %s" % (lines[0].split()[1].decode() if lines[0] else "none",
                      reason[0].decode() if reason else "-")

rest = ("%s:1 HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n" % (host, token)).encode()
held = [slow("127.0.0.2") for _ in range(4)]
print("held_tcp", wait_active(4))  # accepted: each holds a head slot of peer 127.0.0.2
print("fifth_same_peer", status(slow("127.0.0.2")))
print("other_peer", status(slow("127.0.0.1"), rest))
print("held_head_completes", status(held.pop(), rest))
print("slot_back", status(slow("127.0.0.2"), rest))
# The unix socket: the peer is this process (SO_PEERCRED pid). Nothing
# defers its accept: a head may start before or after it.
def uslow():
    u = socket.socket(socket.AF_UNIX)
    u.connect(path)
    u.sendall(b"CONNECT ")
    return u
print("before_unix", wait_active(3))  # the three TCP heads still held
uheld = [uslow() for _ in range(4)]
print("held_unix", wait_active(7))
# The fifth sends nothing: it is refused at accept, and a byte it sent
# after the proxy's read and before its close would reset the answer away.
u = socket.socket(socket.AF_UNIX)
u.connect(path)
print("unix_fifth_same_process", status(u))
for s in held + uheld:
    s.close()
PY
)
echo "$out" | sed 's/^/# /'
get() { echo "$out" | awk -v k="$1" '$1==k{print $2, $3}'; }
check "the proxy held the peer's four heads" "4" "$(get held_tcp | cut -d' ' -f1)"
check "a peer past its head cap is refused" "503 peer_head_limit_exceeded" "$(get fifth_same_peer)"
check "another peer is served meanwhile" "403 port_not_allowed" "$(get other_peer)"
check "a held head completes and is decided" "403 port_not_allowed" "$(get held_head_completes)"
check "a completed head gives the peer's slot back" "403 port_not_allowed" "$(get slot_back)"
check "the proxy held the process's four heads on the unix socket" "7" \
    "$(get held_unix | cut -d' ' -f1)"
check "on the unix socket the peer is the process" "503 peer_head_limit_exceeded" \
    "$(get unix_fifth_same_process)"
check "the refusals are counted" "2" \
    "$(e2e_metric 'pinhole_proxy_requests_total{verdict="refused",reason="peer_head_limit_exceeded"}')"
line=$(grep '"reason":"peer_head_limit_exceeded"' "$E2E_TMP/proxy.log" | head -1)
echo "# $line"
/usr/bin/python3 -c '
import json, sys
o = json.loads(sys.argv[1])
assert o["event"] == "connection" and o["status"] == 503 and o["verdict"] == "refused", o
assert o["peer"].startswith("127.0.0.2:"), o
assert "max_head_connections_per_peer" in o["detail"], o
' "$line" && ok "the refusal is one JSON log line naming the peer and the cap" ||
    fail "log line: $line"
grep -q '"reason":"peer_head_limit_exceeded".*"peer":"unix pid=' "$E2E_TMP/proxy.log" ||
    grep -q '"peer":"unix pid=[0-9]* uid=[0-9]*".*"reason":"peer_head_limit_exceeded"' "$E2E_TMP/proxy.log" &&
    ok "the unix refusal names the process" || fail "no unix refusal line: $(tail -3 "$E2E_TMP/proxy.log")"
e2e_finish
