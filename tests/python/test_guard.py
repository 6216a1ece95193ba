#!/usr/bin/python3
"""test_guard.py - pinhole.Guard over the test-loopback libpinhole: the
struct layout check, check_url verdicts, resolve, dial, reload of a
replaced table, 8 threads of checks and dials, and `python3 -m pinhole
check` printing what `pinhole-guard check` prints (text, JSON, stdin, exit
statuses). Also the production library refusing a loopback answer."""
import ctypes
import os
import subprocess
import sys
import threading
import time

import support
from support import DOMAIN as D, check, fail, ok, refused

support.setup()
import pinhole  # noqa: E402
from pinhole import _lib  # noqa: E402


def main():
    dns = support.Dnsmasq({
        "ok." + D: ["127.0.0.1"],
        "mixed." + D: ["127.0.0.1", "10.0.0.5"],
        "meta." + D: ["169.254.169.254"],
        "later." + D: ["127.0.0.1"],
    })
    srv = support.Server({"/": (200, {}, b"hi\n")})
    yaml = support.allowlist({
        "default": [("ok." + D, [srv.port]), ("mixed." + D, [srv.port]),
                    ("meta." + D, [srv.port]), ("nx." + D, [srv.port])],
        "other": [("*.%s" % D, [443])],
    })
    table = support.compile_table(yaml)
    g = pinhole.Guard(table, dns_servers=dns.server, reload_interval_ms=100)

    # -- the library and its layout --------------------------------------
    check("library from PINHOLE_LIBRARY", os.path.realpath(support.ARGS.lib),
          os.path.realpath(pinhole.library_path()))
    check("test-loopback build", True, pinhole.build_is_test_loopback())
    lib = _lib.lib()
    for cname, mirror in _lib.MIRRORED.items():
        check("sizeof %s matches the C struct" % cname, ctypes.sizeof(mirror),
              lib.ph_abi_struct_size(cname.encode()))
    check("unknown struct name", _lib.PH_ABI_UNKNOWN, lib.ph_abi_struct_size(b"ph_nothing"))
    check("unknown field name", _lib.PH_ABI_UNKNOWN,
          lib.ph_abi_field_offset(b"ph_verdict", b"nothing"))

    class WrongVerdict(ctypes.Structure):
        _fields_ = _lib.CVerdict._fields_[:-1]
    saved = _lib.MIRRORED["ph_verdict"]
    _lib.MIRRORED["ph_verdict"] = WrongVerdict
    try:
        _lib._check_abi(lib)
        fail("a mirror of the wrong size is refused", "accepted")
    except pinhole.LibraryError as e:
        check("a mirror of the wrong size is refused", True, "ph_verdict" in str(e))
    finally:
        _lib.MIRRORED["ph_verdict"] = saved
    r = subprocess.run([sys.executable, "-c", "import pinhole; pinhole.Guard('x')"],
                       env=dict(os.environ, PINHOLE_LIBRARY="/nonexistent/libpinhole.so",
                                PYTHONPATH=os.path.join(support.SOURCE, "guard", "python")),
                       capture_output=True, text=True)
    check("PINHOLE_LIBRARY naming nothing: LibraryError", True,
          "LibraryError" in r.stderr and "/nonexistent/libpinhole.so" in r.stderr)
    package_surface()

    # -- check_url ---------------------------------------------------------
    v = g.check_url("HTTP://OK.%s:%d/x?y" % (D.upper(), srv.port), "default")
    check("allowed verdict", (True, "allowed", "ok." + D, srv.port, "http"),
          (v.allowed, v.reason, v.host, v.port, v.scheme))
    check("rule provenance file:line", "table.yaml:5", v.rule_location)
    check("rule list and pattern", ("default", "ok." + D), (v.rule.list, v.rule.host))
    check("policy id", 64, len(v.policy_id))
    for url, lst, reason in [
            ("http://unlisted.%s:%d/" % (D, srv.port), "default", "not_allowlisted"),
            ("http://ok.%s:%d/" % (D, srv.port + 1 if srv.port < 65535 else 1), "default",
             "port_not_allowed"),
            ("http://127.0.0.1:%d/" % srv.port, "default", "ip_literal"),
            ("http://2130706433/", "default", "ip_literal"),
            ("http://[::1]/", "default", "ip_literal"),
            ("http://ok.%s/" % D, "nolist", "unknown_list"),
            ("http://ok.%s\0.evil/" % D, "default", "parse_error"),
            ("http://bücher.%s/" % D, "default", "parse_error"),
            ("ftp://ok.%s/" % D, "default", "parse_error"),
            ("http://user@ok.%s/" % D, "default", "parse_error")]:
        v = g.check_url(url, lst)
        check("check_url %r: %s" % (url, reason), (False, reason), (v.allowed, v.reason))
    check("refused verdict has a detail", True, bool(g.check_url("http://x.%s/" % D).detail))
    try:
        g.check_url("http://ok.%s:%d/" % (D, srv.port), "default\0other")
        fail("a list name with a NUL byte is refused", "accepted")
    except pinhole.GuardError as e:
        check("a list name with a NUL byte is refused (not cut short)", "invalid", e.status)

    # -- redirect_check ------------------------------------------------------
    base = "http://ok.%s:%d/a/b" % (D, srv.port)
    r = g.redirect_check(base, "../c?x=1", 0)
    check("redirect_check: relative Location, same origin", ("http://ok.%s:%d/c?x=1" % (
        D, srv.port), True, False), (r.url, r.same_origin, r.drop_credentials))
    for loc, reason in [("http://169.254.169.254/", "ip_literal"),
                        ("http://unlisted.%s:%d/" % (D, srv.port), "not_allowlisted"),
                        ("/\\evil.%s/" % D, "redirect_bad_location"),
                        ("/ok\0http://evil/", "redirect_bad_location")]:
        refused("redirect_check %r" % loc, reason, lambda: g.redirect_check(base, loc, 0))
    refused("redirect_check past the hop limit", "redirect_limit",
            lambda: g.redirect_check(base, "/x", 3, max_hops=3))

    # -- resolve, dial -----------------------------------------------------
    addrs = g.resolve("http://ok.%s:%d/" % (D, srv.port))
    check("resolve: the checked addresses", [("127.0.0.1", srv.port)],
          [(a.host, a.port) for a in addrs])
    refused("resolve mixed answer", "denied_address",
            lambda: g.resolve("http://mixed.%s:%d/" % (D, srv.port)))
    refused("resolve name of the metadata address", "denied_address",
            lambda: g.resolve("http://meta.%s:%d/" % (D, srv.port)))
    refused("resolve NXDOMAIN", "dns_failure",
            lambda: g.resolve("http://nx.%s:%d/" % (D, srv.port)))
    # The guard's DNS cache (on by default): the NXDOMAIN is kept for the
    # negative TTL (5 s) though the name now exists; a guard with the cache
    # off asks and sees it.
    dns.set("nx." + D, ["127.0.0.1"])
    refused("resolve NXDOMAIN again within the negative TTL (cached)", "dns_failure",
            lambda: g.resolve("http://nx.%s:%d/" % (D, srv.port)))
    with pinhole.Guard(table, dns_servers=dns.server, dns_cache=False) as g_nc:
        check("dns_cache=False: the new answer", ["127.0.0.1"],
              [a.host for a in g_nc.resolve("http://nx.%s:%d/" % (D, srv.port))])
    dns.set("nx." + D, [])
    refused("resolve unlisted", "not_allowlisted",
            lambda: g.resolve("http://unlisted.%s:%d/" % (D, srv.port)))
    sock, res = g.dial_with_result("http://ok.%s:%d/" % (D, srv.port), "default", timeout=5)
    with sock:
        check("dial: connected to the server", ("127.0.0.1", srv.port), sock.getpeername())
        check("dial: a blocking socket", None, sock.gettimeout())
        check("dial result names the address", ("127.0.0.1", srv.port),
              (res.address.host, res.address.port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: ok\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        check("dial: the server answers", True, data.startswith(b"HTTP/1.1 200"))
    refused("dial unlisted", "not_allowlisted",
            lambda: g.dial("http://unlisted.%s:%d/" % (D, srv.port)))
    refused("dial_authority IPv6 literal", "ip_literal", lambda: g.dial_authority("::1", 80))
    bh = support.Blackhole()
    slow = support.compile_table(support.allowlist({"default": [("ok." + D, [bh.port])]}), "bh")
    with pinhole.Guard(slow, dns_servers=dns.server) as g2:
        t0 = time.monotonic()
        refused("dial a black hole", "upstream_timeout",
                lambda: g2.dial("http://ok.%s:%d/" % (D, bh.port), timeout=0.5))
        check("the deadline held (< 3 s)", True, time.monotonic() - t0 < 3)

    # -- reload --------------------------------------------------------------
    url_later = "http://later.%s:%d/" % (D, srv.port)
    check("before the reload: not listed", "not_allowlisted", g.check_url(url_later).reason)
    support.compile_table(yaml.replace("    rules:\n", "    rules:\n      - host: \"later.%s\"\n"
                                       "        ports: [%d]\n" % (D, srv.port), 1))
    deadline = time.monotonic() + 5
    while g.check_url(url_later).reason != "allowed" and time.monotonic() < deadline:
        time.sleep(0.05)
    check("after the table is replaced: allowed (reload_interval_ms)", "allowed",
          g.check_url(url_later).reason)
    with open(table + ".tmp", "wb") as f:
        f.write(b"not a table")
    os.replace(table + ".tmp", table)
    time.sleep(0.3)
    check("a broken replacement keeps the old table", "allowed", g.check_url(url_later).reason)
    try:
        g.reload()
        fail("reload of a broken table raises GuardError", "no error")
    except pinhole.GuardError as e:
        ok("reload of a broken table raises GuardError (%s)" % e.status)
    table = support.compile_table(yaml)

    # -- threads -----------------------------------------------------------
    g3 = pinhole.Guard(table, dns_servers=dns.server)
    errors = []
    counts = [0] * 8
    urls = [("http://ok.%s:%d/a" % (D, srv.port), "allowed"),
            ("http://x%d.%s:%d/" % (7, D, srv.port), "not_allowlisted"),
            ("http://10.0.0.1/", "ip_literal"),
            ("https://ok.%s/" % D, "port_not_allowed")]

    def worker(i):
        try:
            for n in range(2000):
                u, want = urls[(n + i) % len(urls)]
                got = g3.check_url(u).reason
                if got != want:
                    errors.append((u, want, got))
                counts[i] += 1
            for n in range(10):
                with g3.dial("http://ok.%s:%d/" % (D, srv.port), timeout=5):
                    counts[i] += 1
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check("8 threads x (2000 checks + 10 dials): no error", [], errors[:5])
    check("8 threads x 2010 calls done", 8 * 2010, sum(counts))
    print("# %d calls in %.2f s" % (sum(counts), time.monotonic() - t0))
    g3.close()
    g3.close()
    try:
        g3.check_url("http://ok.%s/" % D)
        fail("a closed guard refuses calls", "no error")
    except pinhole.GuardError:
        ok("a closed guard refuses calls")

    # -- the production library refuses loopback ---------------------------
    if support.ARGS.default_lib:
        code = ("import pinhole, sys\n"
                "g = pinhole.Guard(sys.argv[1], dns_servers=sys.argv[2])\n"
                "try:\n    g.dial(sys.argv[3], timeout=5)\nexcept pinhole.Refused as e:\n"
                "    print(e.reason)\n")
        r = subprocess.run([sys.executable, "-c", code, table, dns.server,
                            "http://ok.%s:%d/" % (D, srv.port)],
                           env=dict(os.environ, PINHOLE_LIBRARY=support.ARGS.default_lib,
                                    PYTHONPATH=os.path.join(support.SOURCE, "guard", "python")),
                           capture_output=True, text=True)
        check("production libpinhole: a loopback answer is denied_address", "denied_address",
              r.stdout.strip() or r.stderr)

    # -- python3 -m pinhole check mirrors pinhole-guard check -------------------
    cli_parity(table, dns, srv)


def package_surface():
    """Every exception the package raises is a pinhole.Error (ExecdError
    too); the package is typed (py.typed) and every public function and
    method has annotations for each parameter and its return."""
    import inspect
    import pinhole.cli
    import pinhole.execd
    import pinhole.httpx
    import pinhole.requests
    check("pinhole.execd.ExecdError is a pinhole.Error", (True, True),
          (issubclass(pinhole.execd.ExecdError, pinhole.Error),
           pinhole.ExecdError is pinhole.execd.ExecdError))
    pkg = os.path.dirname(pinhole.__file__)
    check("py.typed in the package", True, os.path.isfile(os.path.join(pkg, "py.typed")))
    missing = []

    def look(qual, fn):
        fn = inspect.unwrap(getattr(fn, "fget", None) or fn)
        if not callable(fn) or not getattr(fn, "__module__", "").startswith("pinhole"):
            return
        sig = inspect.signature(fn)
        for name, prm in sig.parameters.items():
            if name not in ("self", "cls") and prm.annotation is inspect.Parameter.empty:
                missing.append("%s(%s)" % (qual, name))
        if sig.return_annotation is inspect.Signature.empty:
            missing.append("%s -> ?" % qual)

    for mod in (pinhole, pinhole.errors, pinhole.execd, pinhole.httpx, pinhole.requests,
                pinhole.cli):
        names = getattr(mod, "__all__", None) or [
            n for n, o in vars(mod).items()
            if not n.startswith("_") and getattr(o, "__module__", None) == mod.__name__]
        for name in names:
            obj = getattr(mod, name)
            if inspect.isclass(obj):
                for klass in obj.__mro__:
                    if not klass.__module__.startswith("pinhole"):
                        continue
                    for attr, fn in vars(klass).items():
                        if attr == "__init__" or not attr.startswith("_"):
                            look("%s.%s.%s" % (mod.__name__, name, attr),
                                 fn.__func__ if isinstance(fn, classmethod) else fn)
            elif inspect.isfunction(obj):
                look("%s.%s" % (mod.__name__, name), obj)
    check("every public function and method is annotated", [], missing[:10])


def cli_parity(table, dns, srv):
    guard_cli = support.ARGS.guard_cli
    if not guard_cli:
        return
    env = dict(os.environ, PYTHONPATH=os.path.join(support.SOURCE, "guard", "python"))
    if support.ARGS.default_lib:
        env["PINHOLE_LIBRARY"] = support.ARGS.default_lib
    urls = ["http://ok.%s:%d/x" % (D, srv.port), "http://unlisted.%s/" % D,
            "http://127.0.0.1/", "http://ok.%s/\"quote" % D, "http://ok.%s:%d/%s" % (D, srv.port,
                                                                                   "a" * 400),
            "http://a\x01b/", "https://ok.%s/" % D]

    def both(args, stdin=None):
        a = subprocess.run([guard_cli, "check"] + args, input=stdin, capture_output=True,
                           env=env)
        b = subprocess.run([sys.executable, "-m", "pinhole", "check"] + args, input=stdin,
                           capture_output=True, env=env)
        return a, b

    for mode in ([], ["--json"], ["--resolve", "--dns-server", dns.server],
                 ["--json", "--resolve", "--dns-server", dns.server]):
        a, b = both(["--table", table] + mode + urls)
        check("CLI %s: same lines" % (" ".join(mode[:2]) or "text"), a.stdout.decode(),
              b.stdout.decode())
        check("CLI %s: same exit status (1)" % (" ".join(mode[:2]) or "text"),
              (1, a.returncode), (b.returncode, a.returncode))
    a, b = both(["--table", table], stdin=("\n".join(urls) + "\n" + "x" * 9000 + "\n").encode())
    check("CLI stdin: same lines", a.stdout.decode(), b.stdout.decode())
    a, b = both(["--table", table, urls[0]])
    check("CLI all allowed: exit 0", (0, 0), (a.returncode, b.returncode))
    check("CLI all allowed: same line", a.stdout, b.stdout)
    a, b = both(["--table", os.path.join(support.TMP, "missing.ptab"), urls[0]])
    check("CLI unusable table: exit 2", (2, 2), (a.returncode, b.returncode))
    a, b = both(["--table", table, "--dns-server", dns.server, urls[0]])
    check("CLI --dns-server without --resolve: exit 2", (2, 2), (a.returncode, b.returncode))
    a, b = both(["--bogus"])
    check("CLI unknown option: exit 2", (2, 2), (a.returncode, b.returncode))


support.run(main)
