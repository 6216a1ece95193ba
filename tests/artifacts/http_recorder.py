#!/usr/bin/python3
"""http_recorder.py PORTFILE UPSTREAM_PORT LOG: a TCP forwarder on
127.0.0.1 (port from the kernel, written to PORTFILE) to 127.0.0.1:UPSTREAM_PORT
that appends one line per HTTP/1.1 request it carries to LOG:
"METHOD TARGET HOST". Request heads are found in the client's byte stream
(bodies of the tests' requests hold no request lines). Runs until killed."""
import os
import re
import socket
import sys
import threading

HEAD = re.compile(rb"(GET|PUT|POST|DELETE|HEAD) (\S+) HTTP/1\.1\r\n((?:[^\r\n]+\r\n)*?)\r\n")
HOST = re.compile(rb"^host:\s*(\S+)\s*$", re.I | re.M)
KEEP = 16384  # bytes kept between reads: a head split by a read is found in the next
lock = threading.Lock()


def pump(src, dst, log):
    tail, base, seen = b"", 0, -1  # base: stream offset of tail[0]
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            dst.sendall(data)
            if log is None:
                continue
            buf = tail + data
            for m in HEAD.finditer(buf):
                at = base + m.start()
                if at <= seen:
                    continue
                seen = at
                h = HOST.search(m.group(3))
                line = b"%s %s %s\n" % (m.group(1), m.group(2), h.group(1) if h else b"-")
                with lock, open(log, "ab") as f:
                    f.write(line)
            cut = max(0, len(buf) - KEEP)
            tail, base = buf[cut:], base + cut
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, upstream, log):
    try:
        up = socket.create_connection(("127.0.0.1", upstream))
    except OSError:
        conn.close()
        return
    threading.Thread(target=pump, args=(conn, up, log), daemon=True).start()
    threading.Thread(target=pump, args=(up, conn, None), daemon=True).start()


def main():
    portfile, upstream, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    while True:
        conn, _ = ls.accept()
        serve(conn, upstream, log)


main()
