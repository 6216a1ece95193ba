#!/bin/bash
# e2e_proxy_protocol.sh - pinhole-proxy behind a balancer that sends PROXY
# protocol v2 headers (--proxy-protocol 127.0.0.1), the balancer played by
# raw sockets from 127.0.0.1 and clients from 127.0.0.2 and 127.0.0.3:
#   - a header naming a client makes the connection that client's: the log
#     line's peer, and the per-peer head cap counts per named client (one
#     at its cap is refused, another is served, both through 127.0.0.1);
#   - the header whole, cut in pieces, or behind a LOCAL command (the
#     balancer's own address then stands);
#   - refused, each answered, logged and counted with its reason: no header
#     from the balancer (proxy_protocol_missing), a version 1 text header,
#     a bad version, a header cut short by a close (proxy_protocol_malformed),
#     a header from any other source (proxy_protocol_untrusted), and a
#     header not complete in time (http_head_timeout);
#   - another source without a header is served as itself, and one that
#     trickles a signature meets the request parser (http_bad_request_line).
# Each step waits on the state the next check depends on (the proxy's
# pinhole_proxy_connections_active), never on time.
# Usage: e2e_proxy_protocol.sh TEST_PROXY POLICYC PINHOLE_GUARD PEER DEFAULT_PROXY
PROXY=$1 POLICYC=$2 GRANT=$3 PEER=$4
. "$(dirname "$0")/e2e_lib.sh"

e2e_start_dns
e2e_make_policy
e2e_start_proxy --workers 2 --proxy-protocol 127.0.0.1 --max-head-connections-per-peer 2 \
    --header-timeout-ms 1500
D=$E2E_DOMAIN

/usr/bin/python3 - "$PROXY_PORT" "$ADMIN_PORT" "ok.$D" "$TOKEN" >"$E2E_TMP/pp.out" 2>&1 <<'PY'
import socket, struct, sys, time, urllib.request
port, admin, host, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
SIG = b"\r\n\r\n\x00\r\nQUIT\n"

def v2(client, cport, cmd=0x21):
    if client is None:
        return SIG + bytes([cmd, 0x00]) + b"\x00\x00"
    body = socket.inet_aton(client) + socket.inet_aton("127.0.0.1") + struct.pack(">HH", cport, port)
    body += b"\x02\x00\x0a" + b"ok.example"  # an authority TLV, skipped
    return SIG + bytes([cmd, 0x11]) + struct.pack(">H", len(body)) + body

# Port 1 is not on the allowlist: 403 port_not_allowed means the request got
# past every accept-time limit to the decision.
REQ = ("CONNECT %s:1 HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n" % (host, token)).encode()

def conn(src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(10)
    return s

def answer(s):
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            d = s.recv(4096)
            if not d:
                break
            data += d
    except OSError:
        pass
    s.close()
    if not data:
        return "closed"
    lines = data.split(b"\r\n")
    reason = [l.split(b": ", 1)[1].decode() for l in lines if l.lower().startswith(b"pinhole-reason:")]
    return "%s %s" % (lines[0].split()[1].decode(), reason[0] if reason else "-")

def ask(data, src="127.0.0.1"):
    s = conn(src)
    s.sendall(data)
    return answer(s)

def metric(name):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return line.split()[1]
    return None

def wait_active(n):
    for _ in range(400):
        if metric("pinhole_proxy_connections_active") == str(n):
            return True
        time.sleep(0.025)
    return False

print("whole", ask(v2("127.0.0.2", 40001) + REQ))
# In pieces: the signature's first bytes, then the rest of the header, then the request.
s = conn()
h = v2("127.0.0.3", 40002)
s.sendall(h[:5])
wait_active(1)  # the proxy holds it, waiting for the rest of its header
s.sendall(h[5:])
s.sendall(REQ)
print("pieces", answer(s))
print("local", ask(v2(None, 0, cmd=0x20) + REQ))
print("missing", ask(REQ))
print("v1", ask(b"PROXY TCP4 127.0.0.2 127.0.0.1 40003 %d\r\n" % port + REQ))
bad = bytearray(v2("127.0.0.2", 40004)); bad[12] = 0x11
print("version", ask(bytes(bad) + REQ))
print("untrusted", ask(v2("127.0.0.9", 40005) + REQ, src="127.0.0.2"))
print("direct", ask(REQ, src="127.0.0.2"))
# A signature trickled in pieces by another source: the request parser refuses it.
s = conn("127.0.0.2"); s.sendall(SIG[:3]); wait_active(1); s.sendall(v2("127.0.0.9", 40008)[3:] + REQ)
print("trickled", answer(s))
wait_active(0)

# Cut short by a close, and late: the header's first half only.
s = conn(); s.sendall(v2("127.0.0.2", 40006)[:20]); wait_active(1); s.close()
wait_active(0)
print("cut", "logged")
s = conn(); s.sendall(v2("127.0.0.2", 40007)[:20])
print("late", answer(s))
wait_active(0)

# The per-peer head cap (2) per named client, all through 127.0.0.1.
held = []
for i in range(2):
    s = conn(); s.sendall(v2("127.0.0.2", 41000 + i) + b"CONNECT " + host.encode()); held.append(s)
wait_active(2)
print("capped", ask(v2("127.0.0.2", 41002) + REQ))
print("other", ask(v2("127.0.0.3", 41003) + REQ))
for s in held:
    s.close()
wait_active(0)
for r in ("untrusted", "missing", "malformed"):
    print("metric_" + r, metric('pinhole_proxy_requests_total{verdict="refused",reason="proxy_protocol_%s"}' % r))
PY
cat "$E2E_TMP/pp.out"
got() { awk -v k="$1" '$1==k{$1=""; sub(/^ /, ""); print; exit}' "$E2E_TMP/pp.out"; }
check "a whole header: the request is decided" "403 port_not_allowed" "$(got whole)"
check "a header in pieces" "403 port_not_allowed" "$(got pieces)"
check "a LOCAL header: the balancer stands for itself" "403 port_not_allowed" "$(got local)"
check "no header from the balancer" "400 proxy_protocol_missing" "$(got missing)"
check "a version 1 text header" "400 proxy_protocol_malformed" "$(got v1)"
check "a bad version" "400 proxy_protocol_malformed" "$(got version)"
check "a header from another source" "403 proxy_protocol_untrusted" "$(got untrusted)"
check "another source without a header is served as itself" "403 port_not_allowed" "$(got direct)"
check "another source's signature in pieces: no request" "400 http_bad_request_line" "$(got trickled)"
check "a header not complete in time" "408 http_head_timeout" "$(got late)"
check "one named client at its head cap is refused" "503 peer_head_limit_exceeded" "$(got capped)"
check "another named client is served" "403 port_not_allowed" "$(got other)"
check "metric proxy_protocol_untrusted" "1" "$(got metric_untrusted)"
check "metric proxy_protocol_missing" "1" "$(got metric_missing)"
check "metric proxy_protocol_malformed (v1, version, cut short)" "3" "$(got metric_malformed)"

# The log lines: the named clients as peers, the balancer for the refusals.
peer_of() { # the peer of the log line with port_not_allowed/REASON and detail or peer matching $2
    grep -F "\"reason\":\"$1\"" "$E2E_TMP/proxy.log" | grep -F "$2" | head -1 |
        /usr/bin/python3 -c 'import json,sys; l=sys.stdin.readline(); print(json.loads(l)["peer"] if l else "none")'
}
check "log: the whole header's client" "127.0.0.2:40001" "$(peer_of port_not_allowed 127.0.0.2:40001)"
check "log: the pieces' client" "127.0.0.3:40002" "$(peer_of port_not_allowed 127.0.0.3:40002)"
check "log: the capped client" "127.0.0.2:41002" "$(peer_of peer_head_limit_exceeded 127.0.0.2:41002)"
check "log: the untrusted source" "127.0.0.2" "$(peer_of proxy_protocol_untrusted 127.0.0.2 | cut -d: -f1)"
check "log: cut short" "127.0.0.1" \
    "$(peer_of proxy_protocol_malformed 'closed before the PROXY header' | cut -d: -f1)"
n_local=$(grep -F '"reason":"port_not_allowed"' "$E2E_TMP/proxy.log" | grep -c '"peer":"127.0.0.1:')
check "log: the LOCAL header's connection is the balancer's" "1" "$n_local"
e2e_finish
