#!/usr/bin/python3
"""e2e_faults_dns.py - a misbehaving DNS server for e2e_faults.sh, on UDP and
TCP of one loopback port the kernel chooses (printed as "port N" once it
listens). What it does depends on the first label of the name asked:

  ok.*        A 127.0.0.1 (TTL 0); AAAA: no data
  servfail.*  SERVFAIL
  tc.*        over UDP an empty reply with TC set; over TCP the length
              prefix and half a message, then close (a truncated answer)
  stall.*     never answers
  late.*      answers like ok.*, 300 ms later
  anything    NXDOMAIN

usage: e2e_faults_dns.py
"""
import socket
import struct
import sys
import threading
import time


def parse(q):
    qid, flags = struct.unpack("!HH", q[:4])
    i, labels = 12, []
    while i < len(q) and q[i]:
        n = q[i]
        labels.append(q[i + 1:i + 1 + n].decode("ascii", "replace").lower())
        i += 1 + n
    qtype = struct.unpack("!H", q[i + 1:i + 3])[0]
    question = q[12:i + 5]
    return qid, flags, labels, qtype, question


def reply(qid, flags, question, rcode=0, answers=b"", ancount=0, tc=False):
    f = 0x8000 | (flags & 0x0100) | 0x0080 | rcode  # QR, RD copied, RA
    if tc:
        f |= 0x0200
    return struct.pack("!HHHHHH", qid, f, 1, ancount, 0, 0) + question + answers


def answer(q, over_tcp):
    """The reply to q, or None for no reply."""
    qid, flags, labels, qtype, question = parse(q)
    kind = labels[0] if labels else ""
    if kind == "stall":
        return None
    if kind == "servfail":
        return reply(qid, flags, question, rcode=2)
    if kind == "tc":
        if over_tcp:
            full = reply(qid, flags, question)
            return struct.pack("!H", len(full)) + full[: len(full) // 2]
        return reply(qid, flags, question, tc=True)
    if kind in ("ok", "late"):
        if kind == "late":
            time.sleep(0.3)
        if qtype == 1:
            rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 0, 4) + socket.inet_aton("127.0.0.1")
            return reply(qid, flags, question, answers=rr, ancount=1)
        return reply(qid, flags, question)
    return reply(qid, flags, question, rcode=3)


def serve_udp(u):
    while True:
        q, peer = u.recvfrom(4096)
        def one(q=q, peer=peer):
            try:
                r = answer(q, False)
                if r is not None:
                    u.sendto(r, peer)
            except Exception:
                pass
        threading.Thread(target=one, daemon=True).start()


def serve_tcp_conn(c):
    try:
        while True:
            hdr = c.recv(2)
            if len(hdr) < 2:
                return
            n = struct.unpack("!H", hdr)[0]
            q = b""
            while len(q) < n:
                chunk = c.recv(n - len(q))
                if not chunk:
                    return
                q += chunk
            r = answer(q, True)
            if r is None:
                time.sleep(3600)
                return
            if parse(q)[2][:1] == ["tc"]:
                c.sendall(r)
                return
            c.sendall(struct.pack("!H", len(r)) + r)
    except OSError:
        pass
    finally:
        c.close()


def main():
    while True:
        t = socket.socket()
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
            break
        except OSError:
            u.close()
            t.close()
    t.listen(64)
    threading.Thread(target=serve_udp, args=(u,), daemon=True).start()
    print("port", port, flush=True)
    while True:
        c, _ = t.accept()
        threading.Thread(target=serve_tcp_conn, args=(c,), daemon=True).start()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
