#!/usr/bin/python3
"""execd.python_client - pinhole.execd (guard/python/pinhole/execd.py)
against a fake-mechanism daemon: the ports and the lease through Python,
non-UTF-8 bytes both ways, the error codes.

    python_client.py PINHOLE-EXECD"""
import os
import signal
import socket
import sys
import tempfile

import execd_testlib
from pinhole.execd import Client, ExecdError

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as tmp:
    proc, sock = execd_testlib.start_daemon(sys.argv[1], tmp)
    with Client.unix(sock, hard_cap_ms=10000) as c:
        expect(c.hello["mechanism"] == "fake" and c.hello["hard_cap_ms"] == 10000, "hello")
        env = c.create("t1", "l1")
        r = c.execute("t1", env, ["sh", "-c", "printf '\\377ok'; printf err >&2; "
                                  "echo x > \"$(printf 'n\\377')\"; cat"], stdin=b"\x00in")
        expect(r["stdout"] == b"\xffok\x00in", "stdout bytes: %r" % r["stdout"])
        expect(r["stderr"] == b"err", "stderr")
        expect([c_["path"] for c_ in r["files_changed"]] == [b"n\xff"], "files_changed bytes")
        pieces = []
        r = c.execute("t1", env, ["sh", "-c", "echo one; echo two >&2; sleep 1; echo three"],
                      on_output=lambda stream, data: pieces.append((stream, data)))
        expect(b"".join(d for s_, d in pieces if s_ == "stdout") == r["stdout"] == b"one\nthree\n"
               and b"".join(d for s_, d in pieces if s_ == "stderr") == r["stderr"] == b"two\n",
               "streamed output: %r" % pieces)
        r = c.execute("t1", env, [b"printf", b"%s", b"\xfe"])
        expect(r["stdout"] == b"\xfe", "a non-UTF-8 argv element")
        ws = c.workspace("t1", env)
        c.write("t1", ws, b"dir/\xf0name", b"\x00\x01" * 700000)
        expect(c.read("t1", ws, b"dir/\xf0name", chunk_bytes=65536) == b"\x00\x01" * 700000,
               "streamed read, 1.4 MB in 64 KiB chunks")
        expect(c.stat("t1", ws, "dir")["type"] == "dir", "stat")
        entries, truncated = c.list("t1", ws, "dir")
        expect([e["name"] for e in entries] == [b"\xf0name"] and not truncated, "list")
        for call, code in ((lambda: c.read("t1", ws, "../etc/passwd"), "denied"),
                           (lambda: c.read("t1", ws, "missing"), "not_found"),
                           (lambda: c.execute("t2", env, ["true"]), "not_found"),
                           (lambda: c.read("t1", ws, "dir/\xf0name".encode("latin-1"),
                                           max_bytes=10), "limit")):
            try:
                call()
                expect(False, "no error for %s" % code)
            except ExecdError as e:
                expect(e.code == code, "%s expected, got %s" % (code, e.code))
        c.destroy("t1", env)
        try:
            c.stat("t1", ws, "dir")
            expect(False, "a destroyed environment's workspace")
        except ExecdError as e:
            expect(e.code == "not_found", "destroyed: not_found")

        h = c.lease_open("t1", "l2", 60)
        expect(not c.lease_has_sandbox("t1", h), "lazy")
        lws = c.lease_workspace("t1", h)
        c.write("t1", lws, "k.txt", "k")
        c.hold_begin("t1", h, 100)
        expect(not c.hold_tick("t1", h, 130), "a short hold keeps it")
        expect(c.hold_tick("t1", h, 160), "a long hold destroys it")
        expect(not c.lease_has_sandbox("t1", h), "gone after the hold")
        c.hold_end("t1", h, 161)
        lenv = c.lease_environment("t1", h)
        expect(c.execute("t1", lenv, ["ls"])["stdout"] == b"", "fresh after a long hold")
        c.lease_end("t1", h)
        expect(c.health()["sandboxes"] == 0, "nothing left")
        expect("pinhole_execd_sandboxes_live 0" in c.metrics(), "metrics")
    expect(execd_testlib.stop_daemon(proc) == 0, "clean stop")

    # A socket someone else (uid 65534) serves, even from a directory of
    # its own, never sees a request: the client checks who serves it first.
    os.chmod(tmp, 0o755)
    shared = os.path.join(tmp, "shared")
    os.mkdir(shared)
    os.chown(shared, 65534, 65534)
    os.chmod(shared, 0o755)
    path = os.path.join(shared, "execd.sock")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            signal.alarm(20)
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(1)
            os.write(w, b"r")
            conn, _ = srv.accept()
            os.write(w, b"S" if conn.recv(4096) else b"N")
        finally:
            os._exit(0)
    os.close(w)  # the impostor's alone: EOF if it dies
    if os.read(r, 1) != b"r":
        raise SystemExit("FAIL: the impostor could not listen")
    try:
        Client.unix(path)
        expect(False, "an impostor's socket was trusted")
    except ExecdError as e:
        expect(e.code == "denied" and "execd_peer_untrusted" in e.message, "denied: %s" % e)
    expect(os.read(r, 1) == b"N", "nothing was sent to the impostor")
    os.waitpid(pid, 0)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
