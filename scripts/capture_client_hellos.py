#!/usr/bin/python3
"""Captures the ClientHellos real TLS clients on this machine send, as seeds
for fuzz/corpus/tls_hello/ and the cases of tests/proxy/test_tls_hello.c.

Usage: capture_client_hellos.py OUTDIR

Each client (curl, openssl s_client, Python ssl, Node, Go when
installed) connects to a local listener asking for the server name
"allowed.test"; the listener keeps the client's first bytes up to the end of
the handshake records that carry the whole ClientHello, writes them to
OUTDIR/<client>.hello and closes. Clients that are not installed are
skipped (and said so).
"""
import os
import shutil
import socket
import subprocess
import sys
import threading

NAME = "allowed.test"


def read_hello(conn):
    """Reads whole handshake records until the ClientHello they carry ends."""
    data = b""
    conn.settimeout(10)

    def need(n):
        nonlocal data
        while len(data) < n:
            chunk = conn.recv(65536)
            if not chunk:
                raise EOFError("client closed before its ClientHello ended")
            data += chunk

    pos, msg = 0, b""
    while True:
        need(pos + 5)
        length = int.from_bytes(data[pos + 3:pos + 5], "big")
        need(pos + 5 + length)
        msg += data[pos + 5:pos + 5 + length]
        pos += 5 + length
        if len(msg) >= 4 and len(msg) >= 4 + int.from_bytes(msg[1:4], "big"):
            return data[:pos]


def capture(outdir, label, argv_for_port, env=None):
    if shutil.which(argv_for_port(0)[0]) is None:
        print(f"{label}: not installed, skipped")
        return
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    got = {}

    def serve():
        conn, _ = srv.accept()
        try:
            got["hello"] = read_hello(conn)
        finally:
            conn.close()

    t = threading.Thread(target=serve)
    t.start()
    subprocess.run(argv_for_port(port), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=30, env=env)
    t.join(30)
    srv.close()
    if "hello" not in got:
        sys.exit(f"{label}: no ClientHello captured")
    with open(os.path.join(outdir, label + ".hello"), "wb") as f:
        f.write(got["hello"])
    print(f"{label}: {len(got['hello'])} bytes")


PY_CLIENT = """
import socket, ssl, sys
ctx = ssl.create_default_context()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
try:
    ctx.wrap_socket(s, server_hostname=%r)
except Exception:
    pass
""" % NAME

NODE_CLIENT = """
const tls = require('tls');
const s = tls.connect({host: '127.0.0.1', port: +process.argv[1], servername: '%s'});
s.on('error', () => {});
""" % NAME

GO_CLIENT = """package main
import ("crypto/tls"; "os")
func main() { tls.Dial("tcp", "127.0.0.1:"+os.Args[1], &tls.Config{ServerName: "%s"}) }
""" % NAME


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    curl = lambda *opts: lambda p: ["curl", "-s", "--max-time", "10", *opts, "--resolve",
                                    f"{NAME}:{p}:127.0.0.1", f"https://{NAME}:{p}/"]
    capture(outdir, "curl", curl())
    capture(outdir, "curl_tls12", curl("--tls-max", "1.2"))
    capture(outdir, "openssl", lambda p: ["openssl", "s_client", "-connect", f"127.0.0.1:{p}",
                                          "-servername", NAME])
    capture(outdir, "python_ssl", lambda p: ["/usr/bin/python3", "-c", PY_CLIENT, str(p)])
    capture(outdir, "node", lambda p: ["node", "-e", NODE_CLIENT, str(p)])
    if shutil.which("go"):
        src = os.path.join(outdir, "..", "go_client.go")
        with open(src, "w") as f:
            f.write(GO_CLIENT)
        try:
            capture(outdir, "go", lambda p: ["go", "run", src, str(p)])
        finally:
            os.unlink(src)
    else:
        print("go: not installed, skipped")


if __name__ == "__main__":
    main()
