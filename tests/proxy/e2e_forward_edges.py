#!/usr/bin/python3
"""e2e_forward_edges.py - the upstream and the raw clients of
e2e_forward_edges.sh.

  serve DIR        an HTTP/1.1 upstream on 127.0.0.1:0 (port written to
                   DIR/port) that appends each request line to DIR/lines and
                   answers by path:
                     /early-413   reads the head only, answers 413 with
                                  Connection: close, then resets the
                                  connection (SO_LINGER 0) while the body
                                  is still coming
                     /early-partial  reads the head only, sends the start of
                                  a response head, then resets the connection
                     /early-keep  reads the head only, answers 413 (nothing
                                  says close), then reads the body and serves on
                     /expect-417  to Expect: 100-continue: 417, the body
                                  never asked for (the connection stays open)
                     /fields-N    200 with N header field lines
                     /big         200 with 1 MiB of "x"
                     /slurp       reads the body whole, then 200
                     anything else: 200, body the request target
  halfclose PORT AUTH URL
                   sends a complete GET of URL, then the start of another
                   request, then half-closes; prints "STATUS BODYLENGTH" of
                   the first answer ("none 0" without one) and "eof" when
                   the proxy closed after it
  expect417 PORT AUTH URL
                   a POST with Expect: 100-continue and no body sent;
                   prints the status, "close" when the head says
                   Connection: close ("keep" otherwise), and "eof" when the
                   connection ended after the answer
  trickle PORT AUTH URL
                   a POST whose 1000-byte body is sent a byte every 0.1 s;
                   prints "STATUS REASON" of the answer that came
"""
import os
import select
import socket
import socketserver
import struct
import sys
import threading

from e2e_forward_peer import Server  # the forwarding tests' threaded server


def read_head(sock, buf):
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            return None, buf
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def fields_of(head):
    out = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        out[k.strip().lower()] = v.strip()
    return out


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        buf = b""
        while True:
            head, buf = read_head(s, buf)
            if head is None:
                return
            line = head.split(b"\r\n")[0]
            with self.server.lock, open(self.server.lines_path, "ab") as out:
                out.write(line + b"\n")
            target = line.split(b" ")[1].decode()
            f = fields_of(head)
            if target == "/early-413":
                s.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n"
                          b"Connection: close\r\n\r\n")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
                return
            if target == "/early-partial":
                s.sendall(b"HTTP/1.1 413 Payload")
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
                return
            if target == "/early-keep":
                s.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n")
            if target == "/expect-417":
                s.sendall(b"HTTP/1.1 417 Expectation Failed\r\nContent-Length: 0\r\n\r\n")
                continue
            n = int(f.get(b"content-length", b"0"))
            while len(buf) < n:
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            buf = buf[n:]
            if target == "/early-keep":
                continue
            if target.startswith("/fields-"):
                k = int(target[len("/fields-"):])
                extra = "".join("X-F%d: %d\r\n" % (i, i) for i in range(k - 1))
                s.sendall(("HTTP/1.1 200 OK\r\n%sContent-Length: 2\r\n\r\nok" % extra).encode())
            elif target == "/big":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (1 << 20) +
                          b"x" * (1 << 20))
            else:
                body = target.encode()
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def serve(directory):
    srv = Server(("127.0.0.1", 0), Handler)
    srv.lines_path = os.path.join(directory, "lines")
    srv.lock = threading.Lock()
    open(srv.lines_path, "wb").close()
    with open(os.path.join(directory, "port.tmp"), "w") as out:
        out.write("%d\n" % srv.server_address[1])
    os.rename(os.path.join(directory, "port.tmp"), os.path.join(directory, "port"))
    srv.serve_forever()


def connect(port):
    s = socket.create_connection(("127.0.0.1", int(port)))
    s.settimeout(15)
    return s


def read_all(s):
    got = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return got, True
            got += d
    except (socket.timeout, ConnectionResetError):
        return got, False


def halfclose(port, auth, url):
    s = connect(port)
    s.sendall(("GET %s HTTP/1.1\r\n%s\r\n\r\n" % (url, auth)).encode() +
              b"GET http://start-of-another/ HTTP/1.1\r\nX-Part: ")
    s.shutdown(socket.SHUT_WR)
    got, eof = read_all(s)
    head, _, body = got.partition(b"\r\n\r\n")
    status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "none"
    n = int(fields_of(head).get(b"content-length", b"-1"))
    # The answer's body whole, and nothing after it.
    print(status, len(body) if len(body) == n else "%d/%d" % (len(body), n), "eof" if eof else "open")


def expect417(port, auth, url):
    s = connect(port)
    s.sendall(("POST %s HTTP/1.1\r\n%s\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
               % (url, auth)).encode())
    got, eof = read_all(s)
    head = got.partition(b"\r\n\r\n")[0]
    status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "none"
    conn = fields_of(head).get(b"connection", b"").lower()
    print(status, "close" if conn == b"close" else "keep", "eof" if eof else "open")


def trickle(port, auth, url):
    s = connect(port)
    s.sendall(("POST %s HTTP/1.1\r\n%s\r\nContent-Length: 1000\r\n\r\n" % (url, auth)).encode())
    got = b""
    for _ in range(1000):
        r, _, _ = select.select([s], [], [], 0.1)
        if r:
            d = s.recv(65536)
            if not d:
                break
            got += d
            if b"\r\n\r\n" in got:
                break
            continue
        try:
            s.sendall(b"x")
        except OSError:
            break
    head = got.partition(b"\r\n\r\n")[0]
    status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "none"
    print(status, fields_of(head).get(b"pinhole-reason", b"-").decode())


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        {"halfclose": halfclose, "expect417": expect417, "trickle": trickle}[sys.argv[1]](
            *sys.argv[2:5])
