#!/usr/bin/python3
"""e2e_forward_stream.py - seeded random exchanges for e2e_forward_stream.sh.

  serve DIR        an HTTP/1.1 upstream on 127.0.0.1:0 (port in DIR/port);
                   GET /r/SEED/SIZE/MODE answers SIZE bytes made from SEED,
                   MODE cl (Content-Length), ch (chunked, random chunk
                   sizes) or eof (ended by closing), sent in random pieces
                   with random pauses; POST /echo answers the request body
                   (Content-Length or chunked) with Content-Length
  client PORT AUTH URLBASE SEED ROUNDS
                   one connection per round (to the proxy on PORT, or
                   straight to the upstream when AUTH is "-"), a random
                   number of random requests written in random pieces
                   (pipelined), read back slowly (a small receive buffer,
                   random pauses); every body is compared with what its
                   request asked for; prints "ok N" (N responses checked)
                   or the first difference
"""
import hashlib
import os
import random
import socket
import socketserver
import sys
import threading
import time


def body_of(seed, size):
    out = bytearray()
    h = hashlib.sha256(b"%d" % seed).digest()
    while len(out) < size:
        out += h
        h = hashlib.sha256(h).digest()
    return bytes(out[:size])


def send_pieces(s, data, rng, pause):
    i = 0
    while i < len(data):
        n = rng.choice([1, 7, 100, 1500, 16384, 200000])
        s.sendall(data[i:i + n])
        i += n
        if pause and rng.random() < 0.05:
            time.sleep(rng.random() * 0.02)


class Reader:
    def __init__(self, s, rng=None):
        self.s, self.buf, self.rng = s, b"", rng

    def more(self):
        if self.rng is not None and self.rng.random() < 0.1:
            time.sleep(self.rng.random() * 0.02)
        d = self.s.recv(self.rng.choice([1, 100, 4096, 65536]) if self.rng else 65536)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def exact(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self):
        lines = [self.line()]
        while lines[-1] != b"":
            lines.append(self.line())
        fields = {}
        for line in lines[1:-1]:
            k, _, v = line.partition(b":")
            fields[k.strip().lower()] = v.strip()
        return lines[0], fields

    def body(self, fields, eof_ok):
        if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
            out = b""
            while True:
                n = int(self.line().split(b";")[0], 16)
                if n == 0:
                    while self.line() != b"":
                        pass
                    return out
                out += self.exact(n)
                if self.exact(2) != b"\r\n":
                    raise ValueError("chunk without CRLF")
        if b"content-length" in fields:
            return self.exact(int(fields[b"content-length"]))
        if not eof_ok:
            raise ValueError("no framing")
        try:
            while True:
                self.more()
        except EOFError:
            pass
        out, self.buf = self.buf, b""
        return out


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        r = Reader(s)
        rng = random.Random(os.getpid() ^ id(self))
        try:
            while True:
                line, fields = r.head()
                method, target = line.split(b" ")[0:2]
                if method == b"POST":
                    data = r.body(fields, False)
                    send_pieces(s, b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data)
                                + data, rng, True)
                    continue
                _, _, seed, size, mode = target.decode().split("/")
                data = body_of(int(seed), int(size))
                if mode == "cl":
                    out = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data
                elif mode == "ch":
                    out, i = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0
                    while i < len(data):
                        n = rng.choice([1, 10, 1000, 70000])
                        out += b"%x\r\n" % len(data[i:i + n]) + data[i:i + n] + b"\r\n"
                        i += n
                    out += b"0\r\n\r\n"
                else:
                    send_pieces(s, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + data, rng,
                                True)
                    return
                send_pieces(s, out, rng, True)
        except (EOFError, ConnectionError, ValueError):
            return


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(directory):
    srv = Server(("127.0.0.1", 0), Handler)
    with open(os.path.join(directory, "port.tmp"), "w") as out:
        out.write("%d\n" % srv.server_address[1])
    os.rename(os.path.join(directory, "port.tmp"), os.path.join(directory, "port"))
    srv.serve_forever()


def client(port, auth, base, seed, rounds):
    rng = random.Random(seed)
    direct = auth == "-"
    checked = 0
    for rnd in range(rounds):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rng.choice([4096, 65536, 1 << 20]))
        s.settimeout(30)
        s.connect(("127.0.0.1", port))
        reqs, want = b"", []
        for i in range(rng.randint(1, 4)):
            size = rng.choice([0, 1, 100, 5000, 70000, 300000, 3000000])
            kind = rng.choice(["cl", "ch", "cl", "ch", "post", "postch", "eof"])
            last = kind == "eof" or i == 3
            target = base if not direct else ""
            if kind.startswith("post"):
                data = body_of(rng.randrange(1 << 30), size)
                if kind == "post":
                    framing = b"Content-Length: %d\r\n" % len(data)
                    payload = data
                else:
                    framing, payload, j = b"Transfer-Encoding: chunked\r\n", b"", 0
                    while j < len(data):
                        n = rng.choice([1, 50, 5000, 100000])
                        payload += b"%x\r\n" % len(data[j:j + n]) + data[j:j + n] + b"\r\n"
                        j += n
                    payload += b"0\r\n\r\n"
                head = b"POST %s/echo HTTP/1.1\r\nHost: x\r\n%s" % (target.encode(), framing)
            else:
                bseed = rng.randrange(1 << 30)
                data = body_of(bseed, size)
                payload = b""
                head = b"GET %s/r/%d/%d/%s HTTP/1.1\r\nHost: x\r\n" % (target.encode(), bseed,
                                                                       size, kind.encode())
            if not direct:
                head += b"Proxy-Authorization: Bearer %s\r\n" % auth.encode()
            reqs += head + b"\r\n" + payload
            want.append(data)
            if last:
                break
        writer_rng = random.Random(rng.randrange(1 << 30))
        t = threading.Thread(target=send_pieces, args=(s, reqs, writer_rng, True))
        t.start()
        r = Reader(s, random.Random(rng.randrange(1 << 30)))
        for i, data in enumerate(want):
            try:
                line, fields = r.head()
                while line.split(b" ")[1].startswith(b"1"):
                    line, fields = r.head()
                got = r.body(fields, True)
            except (EOFError, ValueError, socket.timeout, ConnectionError) as e:
                print("round %d response %d: %r" % (rnd, i, e))
                return 1
            if line.split(b" ")[1] != b"200" or got != data:
                print("round %d response %d: %s, %d bytes, want 200, %d bytes, equal %s" %
                      (rnd, i, line.decode(errors="replace"), len(got), len(data), got == data))
                return 1
            checked += 1
        t.join()
        s.close()
    print("ok %d" % checked)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(client(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]),
                        int(sys.argv[6])))
