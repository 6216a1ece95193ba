"""support.py - what the Python package's end-to-end tests share.

Real parts only: dnsmasq on a loopback port the kernel handed out (answers
the test names; a hosts file re-read on SIGHUP lets a test change an answer
between two requests), allowlist tables compiled by policyc, HTTP(S) servers
on ports the kernel chose (bind port 0), and libpinhole built with
PINHOLE_TEST_LOOPBACK_UPSTREAM (127.0.0.0/8 and ::1 exempt from the address
denylist, nothing else) passed as --lib.

Every test script is run as
  /usr/bin/python3 SCRIPT --lib LIBPINHOLE --policyc POLICYC [--guard-cli PINHOLE_GUARD]
and exits 0 (pass), 1 (a check failed) or 77 (a prerequisite is missing).
"""
import argparse
import http.server
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
DOMAIN = "pinhole-py.test"

ARGS = None
TMP = None
_FAILS = []
_CLEANUP = []


def skip(msg):
    print("SKIP: " + msg, flush=True)
    sys.exit(77)


def setup(extra_args=()):
    """Parses the command line, points the package at --lib and returns the
    arguments. Call before importing pinhole."""
    global ARGS, TMP
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--policyc", required=True)
    p.add_argument("--guard-cli")
    p.add_argument("--default-lib", help="the production libpinhole (loopback denied)")
    for a in extra_args:
        p.add_argument(a)
    ARGS = p.parse_args()
    if not os.path.exists(ARGS.lib):
        skip("%s is not built" % ARGS.lib)
    os.environ["PINHOLE_LIBRARY"] = ARGS.lib
    sys.path.insert(0, os.path.join(SOURCE, "guard", "python"))
    TMP = tempfile.mkdtemp(prefix="pinhole-py-")
    return ARGS


def need_module(name, package):
    try:
        __import__(name)
    except ImportError:
        skip("python module %s missing (apt-get install %s; scripts/deps.sh)" % (name, package))


def at_exit(fn):
    _CLEANUP.append(fn)


def ok(name):
    print("ok - %s" % name, flush=True)


def fail(name, why):
    print("FAIL - %s: %s" % (name, why), flush=True)
    _FAILS.append(name)


def check(name, expected, actual):
    if expected == actual:
        ok(name)
    else:
        fail(name, "expected %r, got %r" % (expected, actual))


def refused(name, reason, fn, *exc_types):
    """Runs fn, which must raise pinhole.Refused (and every class of
    exc_types) with .reason == reason."""
    import pinhole
    try:
        fn()
    except pinhole.Refused as e:
        bad = [t.__name__ for t in exc_types if not isinstance(e, t)]
        if e.reason != reason:
            fail(name, "refused with %s (%s), expected %s" % (e.reason, e.detail, reason))
        elif bad:
            fail(name, "%s is not a %s" % (type(e).__name__, ", ".join(bad)))
        else:
            ok("%s: %s" % (name, reason))
        return e
    except Exception as e:  # noqa: BLE001 - report whatever it was
        fail(name, "raised %s: %s (expected Refused %s)" % (type(e).__name__, e, reason))
        return None
    fail(name, "not refused (expected %s)" % reason)
    return None


def run(main):
    """Runs main(), then the clean-ups; exits 0 or 1."""
    try:
        main()
    except SystemExit:
        raise
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        _FAILS.append("exception")
    finally:
        for fn in reversed(_CLEANUP):
            try:
                fn()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
        if TMP and not _FAILS:
            shutil.rmtree(TMP, ignore_errors=True)
        elif TMP:
            print("# kept %s" % TMP)
    print("%d failure(s)" % len(_FAILS) if _FAILS else "all passed", flush=True)
    sys.exit(1 if _FAILS else 0)


# ---- ports, DNS -----------------------------------------------------------

def free_port():
    """A loopback port free for TCP and UDP a moment ago (for dnsmasq, which
    cannot listen on port 0 itself)."""
    while True:
        t = socket.socket()
        t.bind(("127.0.0.1", 0))
        port = t.getsockname()[1]
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", port))
            return port
        except OSError:
            pass
        finally:
            u.close()
            t.close()


def _dns_answers(port):
    q = bytes.fromhex("12340100000100000000000005726561647904746573740000010001")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(0.2)
    try:
        s.sendto(q, ("127.0.0.1", port))
        return s.recv(512)[:2] == q[:2]
    except OSError:
        return False
    finally:
        s.close()


class Dnsmasq:
    """dnsmasq answering `records` (name -> [addresses]) from a hosts file;
    set(name, addresses) rewrites the file and makes dnsmasq re-read it.
    Names under DOMAIN not in the file are NXDOMAIN; slow.DOMAIN is
    forwarded to a port nobody answers on (a DNS timeout)."""

    def __init__(self, records):
        if shutil.which("dnsmasq") is None:
            skip("dnsmasq is not on PATH (install dnsmasq-base)")
        self.records = dict(records)
        self.hosts = os.path.join(TMP, "hosts")
        self._silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._silent.bind(("127.0.0.1", 0))
        self._write()
        for _ in range(10):
            self.port = free_port()
            self.proc = subprocess.Popen(
                ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv",
                 "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.1",
                 "--port=%d" % self.port, "--pid-file=", "--user=", "--log-facility=/dev/null",
                 "--local-ttl=0", "--local=/%s/" % DOMAIN, "--addn-hosts=" + self.hosts,
                 "--server=/slow.%s/127.0.0.1#%d" % (DOMAIN, self._silent.getsockname()[1])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                if _dns_answers(self.port):
                    at_exit(self.stop)
                    self.server = "127.0.0.1:%d" % self.port
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
            self.stop()
        raise RuntimeError("dnsmasq did not start")

    def _write(self):
        tmp = self.hosts + ".tmp"
        with open(tmp, "w") as f:
            for name, addrs in self.records.items():
                for a in addrs:
                    f.write("%s %s\n" % (a, name))
        os.replace(tmp, self.hosts)

    def set(self, name, addrs):
        self.records[name] = list(addrs)
        self._write()
        self.proc.send_signal(signal.SIGHUP)
        # SIGHUP is asynchronous: wait until the answer is the new one.
        want = sorted(addrs)
        got = None
        for _ in range(100):
            try:
                got = self._ask(name)
            except OSError:
                got = None
            if got == want:
                return
            time.sleep(0.05)
        raise RuntimeError("dnsmasq still answers %s for %s" % (got, name))

    def _ask(self, name):
        """The A records dnsmasq now answers for name (a minimal query)."""
        qname = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
        q = b"\x43\x21\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + qname + b"\x00\x01\x00\x01"
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(0.5)
        try:
            s.sendto(q, ("127.0.0.1", self.port))
            r = s.recv(4096)
        finally:
            s.close()
        an = int.from_bytes(r[6:8], "big")
        i = 12 + len(qname) + 4
        out = []
        for _ in range(an):
            if r[i] & 0xC0 == 0xC0:
                i += 2
            else:
                while r[i]:
                    i += 1 + r[i]
                i += 1
            rtype = int.from_bytes(r[i:i + 2], "big")
            rdlen = int.from_bytes(r[i + 8:i + 10], "big")
            rdata = r[i + 10:i + 10 + rdlen]
            if rtype == 1:
                out.append(socket.inet_ntoa(rdata))
            i += 10 + rdlen
        return sorted(out)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()


def compile_table(yaml_text, name="table"):
    """Compiles yaml_text with policyc into TMP/<name>.ptab (atomically
    replacing an earlier one) and returns its path."""
    src = os.path.join(TMP, name + ".yaml")
    with open(src, "w") as f:
        f.write(yaml_text)
    out = os.path.join(TMP, name + ".ptab")
    r = subprocess.run([ARGS.policyc, "compile", src, "-o", out], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("policyc compile failed: %s%s" % (r.stdout, r.stderr))
    return out


def allowlist(lists):
    """YAML for {list: [(host, [ports])]}."""
    lines = ["version: 1", "lists:"]
    for name, rules in lists.items():
        lines += ["  %s:" % name, "    rules:"]
        for host, ports in rules:
            lines += ['      - host: "%s"' % host,
                      "        ports: [%s]" % ", ".join(str(p) for p in ports)]
    return "\n".join(lines) + "\n"


# ---- HTTP servers ---------------------------------------------------------

class Server:
    """An HTTP/1.1 server on 127.0.0.1, port from the kernel. routes: path ->
    fn(handler) returning (status, headers dict, body bytes), or a tuple.
    Every request is recorded in .seen as (method, path, headers dict with
    lowercase names, body). tls: (certfile, keyfile) to serve HTTPS;
    client_ca: ask every client for a certificate (optional, verified
    against this CA file) and record in .certs (path, whether one was
    presented)."""

    def __init__(self, routes=None, tls=None, name="server", client_ca=None):
        self.routes = dict(routes or {})
        self.seen = []
        self.certs = []
        self.name = name
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Head and body are separate writes: with Nagle's algorithm
            # each response would wait for the client's delayed ACK.
            disable_nagle_algorithm = True

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.seen.append((self.command, self.path,
                                   {k.lower(): v for k, v in self.headers.items()}, body))
                if client_ca:
                    outer.certs.append((self.path, bool(self.connection.getpeercert())))
                route = outer.routes.get(self.path.split("?")[0])
                if route is None:
                    status, headers, payload = 404, {}, b"not found\n"
                elif callable(route):
                    status, headers, payload = route(self)
                else:
                    status, headers, payload = route
                if status is None:  # the route answered itself
                    return
                self.send_response(status)
                for k, v in headers.items():
                    for one in (v if isinstance(v, list) else [v]):
                        self.send_header(k, one)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = _any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            if client_ca:
                ctx.verify_mode = ssl.CERT_OPTIONAL
                ctx.load_verify_locations(client_ca)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        at_exit(self.stop)

    def paths(self):
        return [s[1] for s in self.seen]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def make_cert(names):
    """A self-signed certificate for names (the first is the subject):
    returns (certfile, keyfile), which is also the CA to trust."""
    if shutil.which("openssl") is None:
        skip("openssl is not on PATH")
    cert = os.path.join(TMP, names[0] + ".crt")
    key = os.path.join(TMP, names[0] + ".key")
    san = ",".join("DNS:" + n for n in names)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
                    "/CN=" + names[0], "-addext", "subjectAltName=" + san, "-keyout", key,
                    "-out", cert], check=True, capture_output=True)
    return cert, key


class Blackhole:
    """A listener whose backlog is full: a new connection's SYN is dropped,
    so connecting to it times out (upstream_timeout)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = self.sock.getsockname()[1]
        self.fillers = []
        for _ in range(8):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            except OSError:
                pass
            self.fillers.append(s)
        at_exit(self.stop)

    def stop(self):
        for s in self.fillers:
            s.close()
        self.sock.close()


class Silent:
    """Accepts connections and never answers (a read timeout)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        at_exit(self.stop)

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def stop(self):
        self.sock.close()
        for c in self.conns:
            c.close()


def dumps(o):
    return json.dumps(o, sort_keys=True)
