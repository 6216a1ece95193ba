#!/bin/bash
# e2e_peer_slots.sh - the per-peer limit's table (proxy/src/limits.c) cannot
# be aimed at: a peer's slot is placed by a keyed hash, so 64 connections
# from 64 loopback source addresses chosen to collide under an unkeyed hash
# (djb2 of "ip ADDR", the table's probe window is 64 slots of 8192) do not
# refuse another peer, who holds no connection at all.
# Usage: e2e_peer_slots.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --workers 1
D=$E2E_DOMAIN

out=$(/usr/bin/python3 - "$PROXY_PORT" "ok.$D" "$TOKEN" <<'PY'
import socket, sys, time
port, host, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def djb2_window(s):
    h = 5381
    for ch in s.encode():
        h = (h * 33 + ch) & 0xFFFFFFFFFFFFFFFF
    return h % 8192
victim = "127.0.0.1"
target = djb2_window("ip " + victim)
addrs = []
for b in range(1, 256):
    for c in range(256):
        for d in range(1, 255):
            a = "127.%d.%d.%d" % (b, c, d)
            if djb2_window("ip " + a) == target:
                addrs.append(a)
        if len(addrs) >= 64:
            break
    if len(addrs) >= 64:
        break
held = []
for a in addrs[:64]:
    s = socket.socket()
    s.bind((a, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"C")  # a first byte: the listener defers accept until one came
    held.append(s)
time.sleep(0.3)  # the proxy accepted them all (half a head: head phase)
v = socket.create_connection(("127.0.0.1", port), timeout=5)
v.sendall(("CONNECT %s:1 HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n" % (host, token)).encode())
print(len(held), v.recv(200).split(b"\r\n")[0].decode())
PY
)
# Port 1 is not on the allowlist: 403 means the victim got past every
# accept-time limit to the decision; 503 would be the per-peer refusal.
check "64 colliding peers do not refuse another peer" "64 HTTP/1.1 403 Forbidden" "$out"
e2e_finish
