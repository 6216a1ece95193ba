#!/usr/bin/python3
"""e2e_forward_peer.py - the upstream and the raw client of e2e_forward.sh.

  serve DIR       an HTTP/1.1 upstream on 127.0.0.1:0 (port written to
                  DIR/port) that appends every byte it receives to DIR/recv.bin
                  (the test checks a refused request sent it nothing), a line
                  per connection to DIR/conns, keeps
                  connections alive, and answers by path:
                    /echo       200, body "sha256 <hex> <length>" of the request body
                    /chunked    200, a chunked body of three chunks
                    /close      200 without framing, ended by closing
                    /bad-cl-te  a response with Content-Length and Transfer-Encoding
                    /bad-cl     a response with two Content-Length values
                    /bad-fold   a response with an obs-fold line
                    /blob       10 MiB with Content-Length (blob-sha256: its digest)
                    /blob-chunked  the same, chunked
                    /cut        a Content-Length response cut short
                    /interim-flood  100 responses (16 KB reason phrases) without
                                end, as fast as they are taken
                    /interim-slow   a 102 every 0.5 s for 20 s, then 200
                    /trickle    200 with 40 body bytes, one per 0.5 s
                    /hold       nothing; records in DIR/hold when (and whether)
                                the proxy closed the connection
                    /forged-reason  403 with Pinhole-Reason: denied_address
                    /then-drop  200, then the connection's next request is
                                read and the connection closed unanswered
                    anything else: 200, body "hello <path>"
                  HEAD gets the GET head without a body; Expect: 100-continue
                  gets "100 Continue" before the body is read.
  first PORT DATA sends DATA (escapes as for raw) and keeps the connection
                  open; prints the first response's "STATUS BODY" as soon
                  as it is complete (its Content-Length), or "none" when
                  none came within 10 s
  raw PORT DATA   sends DATA (with backslash escapes: \\r, \\n, \\xNN)
                  to 127.0.0.1:PORT, half-closes (unless RAW_KEEP_OPEN is
                  set; RAW_STALL_S: reads nothing for that many seconds
                  first, on a small receive buffer), prints every response it
                  reads as "STATUS REASON" lines (Pinhole-Reason or "-"), then
                  "BODY <body of the last response>".
"""
import hashlib
import os
import signal
import socket
import socketserver
import sys
import threading
import time


# 10 MiB the test can hash on its own: blob-sha256 prints its digest.
BLOB = hashlib.sha256(b"pinhole").digest() * (10 * 1024 * 1024 // 32)


def read_head(f):
    lines = []
    while True:
        line = f.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line.rstrip(b"\r\n"))


def read_body(f, fields):
    te = fields.get(b"transfer-encoding", b"").lower()
    if te == b"chunked":
        # A bytearray grows in place: the proxy re-frames a body into
        # chunks of what each read gave it (about 4 KiB), and joining the
        # 2,700 chunks of 10 MiB as bytes would copy 13 GB (tens of seconds
        # on a loaded CPU, past curl's --max-time).
        out = bytearray()
        while True:
            size = int(f.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += f.read(size)
            f.readline()
    n = int(fields.get(b"content-length", b"0"))
    return f.read(n) if n else b""


class Recorder:
    """A file-like reader that records every byte read from the socket; its
    buffer is a bytearray (appended to and consumed in place: a 10 MiB body
    costs linear time, not a copy per recv)."""

    def __init__(self, sock, path, lock):
        self.sock, self.path, self.lock, self.buf = sock, path, lock, bytearray()

    def _fill(self):
        data = self.sock.recv(65536)
        if data:
            with self.lock, open(self.path, "ab") as out:
                out.write(data)
        self.buf += data
        return bool(data)

    def readline(self, limit=65536):
        while b"\n" not in self.buf and len(self.buf) < limit:
            if not self._fill():
                break
        i = self.buf.find(b"\n")
        return self._take(i + 1 if i >= 0 else len(self.buf))

    def read(self, n):
        while len(self.buf) < n:
            if not self._fill():
                break
        return self._take(n)

    def _take(self, n):
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data


def respond(sock, status, fields, body, head_only=False):
    head = "HTTP/1.1 %s\r\n" % status + "".join("%s: %s\r\n" % kv for kv in fields) + "\r\n"
    sock.sendall(head.encode() + (b"" if head_only else body))


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s = self.request
        with self.server.lock, open(self.server.conns_path, "a") as out:
            out.write("connection\n")
        f = Recorder(s, self.server.recv_path, self.server.lock)
        drop_next = False
        while True:
            head = read_head(f)
            if not head or drop_next:
                return
            method, target, _ = head[0].split(b" ", 2)
            fields = {}
            for line in head[1:]:
                k, _, v = line.partition(b":")
                fields[k.strip().lower()] = v.strip()
            if fields.get(b"expect", b"").lower() == b"100-continue":
                s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = read_body(f, fields)
            path = target.decode()
            is_head = method == b"HEAD"
            if path == "/echo":
                text = ("sha256 %s %d" % (hashlib.sha256(body).hexdigest(), len(body))).encode()
                respond(s, "200 OK", [("Content-Length", len(text))], text, is_head)
            elif path == "/chunked":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"5\r\nhello\r\n1;ext=1\r\n \r\n7\r\nchunked\r\n0\r\nX-T: 1\r\n\r\n")
            elif path == "/close":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
                return
            elif path == "/bad-cl-te":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n"
                          b"\r\n0\r\n\r\nSMUGGLED")
                return
            elif path == "/bad-cl":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8, 8\r\n\r\nSMUGGLED")
                return
            elif path == "/bad-fold":
                s.sendall(b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 8\r\n\r\nSMUGGLED")
                return
            elif path == "/blob":
                respond(s, "200 OK", [("Content-Length", len(BLOB))], BLOB, is_head)
            elif path == "/blob-chunked":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for i in range(0, len(BLOB), 65536):
                    part = BLOB[i:i + 65536]
                    s.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
                s.sendall(b"0\r\n\r\n")
            elif path == "/cut":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this")
                return
            elif path == "/interim-flood":
                one = b"HTTP/1.1 100 " + b"C" * 16000 + b"\r\n\r\n"
                for _ in range(4096):
                    s.sendall(one * 16)
                return
            elif path == "/interim-slow":
                for _ in range(40):
                    s.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")
                    time.sleep(0.5)
                respond(s, "200 OK", [("Content-Length", 2)], b"ok")
            elif path == "/then-drop":
                drop_next = True
                respond(s, "200 OK", [("Content-Length", 0)], b"")
            elif path == "/forged-reason":
                respond(s, "403 Forbidden", [("Pinhole-Reason", "denied_address"),
                                             ("Content-Length", 0)], b"")
            elif path == "/hold":
                # Answers nothing; waits (up to 20 s) for the proxy to close
                # the connection and records how long that took in "hold".
                t0 = time.monotonic()
                s.settimeout(20)
                try:
                    gone = s.recv(1) == b""
                except socket.timeout:
                    gone = False
                except OSError:
                    gone = True
                with self.server.lock, open(self.server.hold_path, "a") as out:
                    out.write("%s %.1f\n" % ("closed" if gone else "open", time.monotonic() - t0))
                return
            elif path == "/trickle":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n")
                for _ in range(40):
                    time.sleep(0.5)
                    s.sendall(b"x")
            else:
                text = ("hello " + path).encode()
                respond(s, "200 OK", [("Content-Length", len(text))], text, is_head)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(directory):
    srv = Server(("127.0.0.1", 0), Handler)
    srv.recv_path = os.path.join(directory, "recv.bin")
    srv.conns_path = os.path.join(directory, "conns")
    srv.hold_path = os.path.join(directory, "hold")
    srv.lock = threading.Lock()
    open(srv.recv_path, "wb").close()
    open(srv.conns_path, "w").close()
    with open(os.path.join(directory, "port.tmp"), "w") as out:
        out.write("%d\n" % srv.server_address[1])
    os.rename(os.path.join(directory, "port.tmp"), os.path.join(directory, "port"))
    srv.serve_forever()


def recv_until(s, done):
    """What s sends until it closes, resets, times out, or done(bytes so far)."""
    got = bytearray()
    try:
        while not done(got):
            d = s.recv(65536)
            if not d:
                break
            got += d
    except (socket.timeout, ConnectionResetError):
        pass
    return got


def first_response(got):
    """(status, body) of the first response in got once it is complete."""
    head, sep, rest = bytes(got).partition(b"\r\n\r\n")
    if not sep:
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    return (head.split(b" ")[1].decode(), rest[:length]) if len(rest) >= length else None


def first(port, data):
    payload = data.encode().decode("unicode_escape").encode("latin-1")
    s = socket.socket()
    s.settimeout(10)
    s.connect(("127.0.0.1", int(port)))
    s.sendall(payload)
    r = first_response(recv_until(s, lambda got: first_response(got) is not None))
    print("none" if r is None else "%s %s" % (r[0], r[1].decode(errors="replace")))


def raw(port, data):
    payload = data.encode().decode("unicode_escape").encode("latin-1")  # \r, \n, \xNN escapes
    stall = float(os.environ.get("RAW_STALL_S", "0"))
    s = socket.socket()
    if stall:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", int(port)))
    s.sendall(payload)
    time.sleep(stall)
    if not os.environ.get("RAW_KEEP_OPEN"):
        s.shutdown(socket.SHUT_WR)
    got = recv_until(s, lambda got: False)
    last_body = b""
    while got.startswith(b"HTTP/"):
        head, sep, rest = got.partition(b"\r\n\r\n")
        if not sep:
            break
        lines = head.split(b"\r\n")
        status = lines[0].split(b" ")[1].decode()
        reason, length, chunked = "-", None, False
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            k, v = k.strip().lower(), v.strip()
            if k == b"pinhole-reason":
                reason = v.decode()
            elif k == b"content-length":
                length = int(v)
            elif k == b"transfer-encoding":
                chunked = True
        print(status, reason)
        if status.startswith("1"):
            got = rest
            continue
        if length is not None:
            last_body, got = rest[:length], rest[length:]
        elif chunked:
            last_body = b""
            while True:
                line, _, rest = rest.partition(b"\r\n")
                n = int(line.split(b";")[0], 16)
                if n == 0:
                    got = rest.partition(b"\r\n")[2]
                    break
                last_body += rest[:n]
                rest = rest[n + 2:]
        else:
            last_body, got = rest, b""
    print("BODY", last_body.decode(errors="replace"))


if __name__ == "__main__":
    if sys.argv[1] != "serve":  # the server outlives a client that went away
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `raw ... | head -1`
    if sys.argv[1] == "blob-sha256":
        print(hashlib.sha256(BLOB).hexdigest())
    elif sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] == "first":
        first(sys.argv[2], sys.argv[3])
    else:
        raw(sys.argv[2], sys.argv[3])
