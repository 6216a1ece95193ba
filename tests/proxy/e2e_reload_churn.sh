#!/bin/bash
# e2e_reload_churn.sh - reloads in a storm while forwarding connections
# churn in every state a reload can find them in: idle between requests,
# reading a head, resolving (a name whose DNS never answers), dialing (an
# upstream that never accepts), streaming a request body, streaming a
# response, pipelined requests under two leases, HTTP in a tunnel, and
# clients that reset mid-request. Each reload flips lease A's revocation,
# so some pass ends connections and some does not. The proxy must stay up
# and clean under the sanitizers, and log each connection's reload ending
# at most once and never a request after it; a request refused before its
# answer gets the refusal, and only the revoked lease's lines end lease_revoked.
# Usage: e2e_reload_churn.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
D=$E2E_DOMAIN
e2e_two_leases
e2e_start_forward_peer
BH_PORT=$(e2e_port)
"$PEER" blackhole "$BH_PORT" >"$E2E_TMP/bh.out" & E2E_PIDS="$E2E_PIDS $!"
for _ in $(seq 1 100); do [ -s "$E2E_TMP/bh.out" ] && break; sleep 0.02; done
e2e_start_proxy --revocations "$REV"

PYTHONPATH="$PH_SOURCE_DIR/tests/proxy" /usr/bin/python3 - "$PROXY_PORT" "$ADMIN_PORT" "$D" "$UP" \
    "$BH_PORT" "$TOKEN_A" "$TOKEN_B" "$PROXY_PID" "$REV" \
    >"$E2E_TMP/client.out" 2>&1 <<'PY'
import os, random, signal, socket, struct, sys, threading, time, urllib.request
from tunnel_http import reloads
(port, admin, dom, up, bh, tok_a, tok_b, pid, rev) = sys.argv[1:]
ok, web, slow, hole = f"ok.{dom}:{up}", f"web.{dom}:{up}", f"slow.{dom}:{up}", f"blackhole.{dom}:{bh}"
stop = threading.Event()
done = [0]

def conn():
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=5)
    return s

def req(dest, path, tok, method="GET", body=b"", extra=""):
    cl = f"Content-Length: {len(body)}\r\n" if method == "POST" else ""
    return (f"{method} http://{dest}/{path} HTTP/1.1\r\nHost: {dest}\r\n"
            f"Proxy-Authorization: Bearer {tok}\r\n{cl}{extra}\r\n").encode() + body

def drain(s, t=0.3):
    s.settimeout(t)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass

def rst(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()

def one(rng):
    tok = rng.choice((tok_a, tok_b))
    kind = rng.randrange(9)
    s = conn()
    try:
        if kind == 0:    # idle between requests
            s.sendall(req(ok, "a", tok)); time.sleep(rng.random() * 0.3); s.sendall(req(ok, "b", tok))
        elif kind == 1:  # resolving
            s.sendall(req(slow, "s", tok))
        elif kind == 2:  # dialing
            s.sendall(req(hole, "h", tok))
        elif kind == 3:  # a request body in pieces
            s.sendall(req(ok, "echo", tok, "POST", b"x" * 100)[:-60])
            time.sleep(rng.random() * 0.3); s.sendall(b"x" * 60)
        elif kind == 4:  # a response streaming
            s.sendall(req(ok, "trickle", tok))
        elif kind == 5:  # pipelined, two leases
            s.sendall(req(ok, "p1", tok_a) + req(ok, "p2", tok_b) + req(ok, "p3", tok_a))
        elif kind == 6:  # HTTP in a tunnel
            s.sendall(f"CONNECT {web} HTTP/1.1\r\nProxy-Authorization: Bearer {tok}\r\n\r\n".encode())
            time.sleep(0.05)
            s.sendall(f"GET /t HTTP/1.1\r\nHost: {web}\r\n\r\n".encode())
            time.sleep(rng.random() * 0.2)
            s.sendall(f"GET /t2 HTTP/1.1\r\nHost: {web}\r\n\r\n".encode())
        elif kind == 7:  # half a head
            s.sendall(req(ok, "half", tok)[:30])
        else:            # a request, then a reset right away
            s.sendall(req(ok, "big", tok, "POST", b"y" * 5000)[:2000])
            time.sleep(rng.random() * 0.1); rst(s); return
        time.sleep(rng.random() * 0.3)
        if rng.random() < 0.5:
            rst(s)
        else:
            drain(s, rng.random() * 0.3); s.close()
    except OSError:
        s.close()

def churn(seed):
    rng = random.Random(seed)
    while not stop.is_set():
        one(rng)
        done[0] += 1

threads = [threading.Thread(target=churn, args=(i,)) for i in range(12)]
for t in threads:
    t.start()
n = reloads(admin)
for i in range(60):
    with open(rev + ".new", "w") as f:
        f.write("t1 leaseA 1900000000\n" if i % 2 == 0 else "")
    os.chmod(rev + ".new", 0o644)
    os.rename(rev + ".new", rev)
    if i % 3 == 0:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{admin}/reload",
                                                      method="POST"), timeout=10).read()
    else:
        os.kill(int(pid), signal.SIGHUP)
    while reloads(admin) <= n + i:
        time.sleep(0.005)
    time.sleep(random.random() * 0.05)
stop.set()
for t in threads:
    t.join()
print("reloads:", reloads(admin) - n)
print("churned:", done[0], file=sys.stderr)
print("connections:", "many" if done[0] >= 24 else done[0])
PY
sed 's/^/# /' "$E2E_TMP/client.out"
line() { awk -v p="$1 " 'index($0, p) == 1 { print substr($0, length(p) + 1) }' "$E2E_TMP/client.out"; }
check "60 reloads taken" "60" "$(line reloads:)"
check "the clients churned" "many" "$(line connections:)"
check "the proxy is alive" "0" "$(kill -0 "$PROXY_PID"; echo $?)"
ENDS='("lease_revoked", "policy_revoked", "key_revoked", "grant_expired")'
check "a reload ended some connections" "yes" \
    "$(e2e_log_lines 'r["end"] in '"$ENDS" | awk '{print ($1 > 0) ? "yes" : "no"}')"
check "only lease A's lines end lease_revoked (B is never revoked)" "0" \
    "$(e2e_log_lines 'r["end"] == "lease_revoked" and r["lease"] != "leaseA"')"
check "a request a reload refused before its answer was answered the refusal" "0" \
    "$(e2e_log_lines 'r["event"] == "request" and r["end"] == "lease_revoked" and r["status"] == 0')"
check "no connection logged two reload endings, or a line after its reload ending" "0" \
    "$(/usr/bin/python3 -c '
import json, sys
seen, bad = set(), 0
for l in open(sys.argv[1]):
    r = json.loads(l)
    c = r.get("conn_id")
    if c in seen:
        bad += 1
    if r.get("end") in '"$ENDS"':
        seen.add(c)
print(bad)' "$E2E_TMP/proxy.log")"

kill -TERM "$PROXY_PID"; wait "$PROXY_PID"
check "SIGTERM: exit 0" "0" "$?"
e2e_finish
