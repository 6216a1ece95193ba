"""tunnel_http.py - HTTP/1 in clear inside a CONNECT tunnel, for
e2e_tunnel_inspect.sh's, e2e_reload_forward.sh's and connect_counts.sh's raw
clients, a response read off a forwarding connection for
e2e_forward_redecide.sh's and forward_counts.sh's (imported: PYTHONPATH is
this directory), the proxy's reload count and a reload waited on, for
those that reload, and TLS ClientHello records for e2e_tunnel_fronting.sh.
"""
import os
import signal
import socket
import struct
import time
import urllib.request


def tunnel(port, token, dest):
    """A socket and its reader past the proxy's 200 for CONNECT dest."""
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    s.sendall(f"CONNECT {dest} HTTP/1.1\r\nProxy-Authorization: Bearer {token}\r\n\r\n".encode())
    f = s.makefile("rb")
    assert f.readline().startswith(b"HTTP/1.1 200")
    while f.readline() not in (b"\r\n", b""):
        pass
    return s, f


def response(f):
    """The next response on f: its status line, body and Pinhole-Reason."""
    status = f.readline().decode().strip()
    n = 0
    reason = ""
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, _, v = line.decode().partition(":")
        if k.lower() == "content-length":
            n = int(v)
        if k.lower() == "pinhole-reason":
            reason = v.strip()
    return status, f.read(n).decode(), reason


def metric(admin, name):
    """The value of the metric name (with its labels, as the exposition
    spells them) in the proxy's admin /metrics; 0 when absent."""
    url = f"http://127.0.0.1:{admin}/metrics"
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.split(" ")[0] == name:
            return int(float(line.split()[-1]))
    return 0


def reloads(admin):
    """The proxy's successful reloads so far (its admin port's /metrics)."""
    return metric(admin, 'pinhole_proxy_table_reloads_total{result="ok"}')


def reload(admin, pid):
    """SIGHUP to the proxy pid; returns once its reload count grew."""
    n = reloads(admin)
    os.kill(int(pid), signal.SIGHUP)
    while reloads(admin) <= n:
        time.sleep(0.02)


def u16(b):
    """b after its length in two bytes (a TLS vector)."""
    return struct.pack(">H", len(b)) + b


def tls_ext(t, body):
    """A TLS extension of type t."""
    return struct.pack(">H", t) + u16(body)


def client_hello(names, extra=b"", share=b"", sid=bytes(32), rnd=bytes(32)):
    """A TLS 1.3 ClientHello record (e2e_tunnel_fronting.sh): a server_name
    extension per name in names, X25519 offered with the key share given
    (none: the server answers with a HelloRetryRequest), extra extensions
    last."""
    exts = b"".join(tls_ext(0, u16(b"\x00" + u16(n.encode()))) for n in names)
    exts += (tls_ext(0x002b, b"\x02\x03\x04") + tls_ext(0x000a, u16(b"\x00\x1d"))
             + tls_ext(0x000d, u16(b"\x04\x03\x08\x04")) + tls_ext(0x0033, u16(share)) + extra)
    body = b"\x03\x03" + rnd + bytes([len(sid)]) + sid + u16(b"\x13\x01") + b"\x01\x00" + u16(exts)
    msg = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + u16(msg)
