#!/usr/bin/python3
"""http_origin.py - the plain-HTTP origin of the real-client tests.

Serves ROOT over HTTP/1.1 (keep-alive) on 127.0.0.1, on a port the kernel
chooses, written to READY_FILE once it listens:

  GET/HEAD /PATH   the file ROOT/PATH (Content-Length), 404 when absent;
                   a path ending in / serves its index.html
  POST /echo       the request body back (Content-Length or chunked in,
                   Content-Length out), with X-Body-Sha256 of what it read;
                   GET /echo too (busybox 1.35's wget --post-data sends GET
                   with the body)

and appends one JSON line per request to LOG_FILE: the request line, the
header fields exactly as received (in order) and the body's length and
SHA-256, so a failing client's exchange can be read back (what the origin got
through the proxy, and what it answered).

Usage: http_origin.py ROOT READY_FILE LOG_FILE
"""
import hashlib
import http.server
import json
import os
import sys
import threading
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pinhole-test-origin"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass

    def record(self, status, body=b"", sent=0):
        entry = {
            "request": self.requestline,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "status": status,
            "sent": sent,
        }
        with self.server.log_lock, open(self.server.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailer fields
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def send(self, status, body, ctype="application/octet-stream", extra=(), head=False):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def serve_file(self, head):
        # An origin is sent origin-form; absolute-form (a proxy that passed
        # the target on unchanged) is served too, and visible in the log.
        rel = urllib.parse.urlsplit(self.path).path or "/"
        if rel.endswith("/"):
            rel += "index.html"
        path = os.path.realpath(os.path.join(self.server.root, rel.lstrip("/")))
        if not path.startswith(self.server.root + os.sep) or not os.path.isfile(path):
            self.record(404)
            self.send(404, b"not found\n", "text/plain", head=head)
            return
        with open(path, "rb") as f:
            data = f.read()
        ctype = "text/html" if path.endswith(".html") else "application/octet-stream"
        self.record(200, sent=0 if head else len(data))
        self.send(200, data, ctype, head=head)

    def do_GET(self):
        if urllib.parse.urlsplit(self.path).path == "/echo":
            self.do_POST()
        else:
            self.serve_file(False)

    def do_HEAD(self):
        self.serve_file(True)

    def do_POST(self):
        body = self.read_body()
        digest = hashlib.sha256(body).hexdigest()
        if urllib.parse.urlsplit(self.path).path != "/echo":
            self.record(404, body)
            self.send(404, b"not found\n", "text/plain")
            return
        self.record(200, body, len(body))
        self.send(200, body, extra=[("X-Body-Sha256", digest)])


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    root, ready, log = sys.argv[1:]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.root = os.path.realpath(root)
    server.log_path = log
    server.log_lock = threading.Lock()
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.rename(tmp, ready)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
