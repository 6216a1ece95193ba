#!/usr/bin/python3
"""e2e_faults_net.py - the raw-socket clients and upstreams of e2e_faults.sh.

  connect PORT AUTHORITY AUTH        one CONNECT; prints "<status> <reason>"
                                     ("none -" when the proxy closed first)
  reset-mid-head PORT AUTHORITY      half a CONNECT head, then a TCP reset
  reset-in-lookup PORT AUTHORITY AUTH N
                                     N CONNECTs, each reset right after its
                                     head (the proxy is still resolving)
  hold-lookups PORT AUTHORITY AUTH N SECONDS
                                     N CONNECTs left waiting for their lookup,
                                     SECONDS at most; prints "answered <k>
                                     closed <m>" (closed: no answer, EOF)
  flood PORT DOMAIN AUTH N           N times: a CONNECT to n<i>.DOMAIN:443
                                     (an uncached name) kept open, plus one
                                     more idle connection (half a head); prints the count
                                     of each status line seen, e.g.
                                     "503:40 502:12 none:0"
  rst-upstream                       an upstream that, per connection, reads
                                     64 KiB, writes 64 KiB, then resets;
                                     prints "port N" once it listens
  tunnel-reset PORT AUTHORITY AUTH   CONNECT to an rst-upstream; sends 1 MiB;
                                     prints "<status> <bytes received> <how
                                     it ended>" (reset, eof, timeout)
"""
import socket
import struct
import sys
import threading
import time


def head(authority, auth):
    h = f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n"
    if auth != "-":
        h += f"Proxy-Authorization: {auth}\r\n"
    return (h + "\r\n").encode()


def status_of(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(4096)
        if not chunk:
            break
        buf += chunk
    if not buf:
        return "none", "-", b""
    first = buf.split(b"\r\n")[0].split()
    code = first[1].decode() if len(first) > 1 else "none"
    reason = "-"
    for line in buf.split(b"\r\n"):
        if line.lower().startswith(b"pinhole-reason:"):
            reason = line.split(b":", 1)[1].strip().decode()
    rest = buf.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in buf else b""
    return code, reason, rest


def rst_close(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def dial(port):
    return socket.create_connection(("127.0.0.1", int(port)), timeout=10)


def cmd_connect(port, authority, auth):
    s = dial(port)
    s.sendall(head(authority, auth))
    code, reason, _ = status_of(s)
    print(code, reason)


def cmd_reset_mid_head(port, authority):
    s = dial(port)
    s.sendall(head(authority, "-")[:20])
    time.sleep(0.1)
    rst_close(s)


def cmd_reset_in_lookup(port, authority, auth, n):
    for _ in range(int(n)):
        s = dial(port)
        s.sendall(head(authority, auth))
        time.sleep(0.01)
        rst_close(s)


def cmd_hold_lookups(port, authority, auth, n, seconds):
    socks = []
    for _ in range(int(n)):
        s = dial(port)
        s.settimeout(float(seconds))
        s.sendall(head(authority, auth))
        socks.append(s)
    print("sent", len(socks), flush=True)
    answered = closed = 0
    for s in socks:
        try:
            code, _, _ = status_of(s)
            if code == "none":
                closed += 1
            else:
                answered += 1
        except OSError:
            closed += 1
    print("answered", answered, "closed", closed)


def cmd_flood(port, domain, auth, n):
    held, counts = [], {}
    for i in range(int(n)):
        try:
            s = dial(port)
            s.settimeout(5)
            s.sendall(head(f"n{i}.{domain}:443", auth))
            code, _, _ = status_of(s)
            counts[code] = counts.get(code, 0) + 1
            held.append(s)
            # Half a request head: the listener defers accept until a
            # connection's first bytes, and this one must hold descriptors.
            idle = dial(port)
            idle.sendall(b"CONNECT ")
            held.append(idle)
        except OSError:
            counts["error"] = counts.get("error", 0) + 1
    print(" ".join(f"{k}:{v}" for k, v in sorted(counts.items())))
    for s in held:
        s.close()


def rst_conn(c):
    try:
        got = 0
        while got < 65536:
            chunk = c.recv(65536 - got)
            if not chunk:
                break
            got += len(chunk)
        c.sendall(b"d" * 65536)
        time.sleep(0.2)
    except OSError:
        pass
    rst_close(c)


def cmd_rst_upstream():
    t = socket.socket()
    t.bind(("127.0.0.1", 0))
    t.listen(16)
    print("port", t.getsockname()[1], flush=True)
    while True:
        c, _ = t.accept()
        threading.Thread(target=rst_conn, args=(c,), daemon=True).start()


def cmd_tunnel_reset(port, authority, auth):
    s = dial(port)
    s.sendall(head(authority, auth))
    code, _, rest = status_of(s)
    got, how = len(rest), "eof"
    s.settimeout(10)
    try:
        s.sendall(b"u" * (1 << 20))
    except OSError:
        pass
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += len(chunk)
    except ConnectionResetError:
        how = "reset"
    except socket.timeout:
        how = "timeout"
    except OSError:
        how = "reset"
    print(code, got, how)


def main():
    cmds = {"connect": cmd_connect, "reset-mid-head": cmd_reset_mid_head,
            "reset-in-lookup": cmd_reset_in_lookup, "hold-lookups": cmd_hold_lookups,
            "flood": cmd_flood, "rst-upstream": cmd_rst_upstream,
            "tunnel-reset": cmd_tunnel_reset}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    cmds[sys.argv[1]](*sys.argv[2:])


if __name__ == "__main__":
    main()
