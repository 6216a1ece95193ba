#!/usr/bin/python3
"""test_mcp.py - examples/mcp_client.py walks the MCP discovery chain of a
hostile server (fake_mcp_server.py) through pinhole.httpx; asserts exactly
which hops were dialed, which were refused, and the reason code of each;
that the MCP server's own answers (initialize, ping) are read within 1 MiB
and 20 s (a 1 GiB flood and a trickle end the example with exit status 2,
its peak RSS printed beside a plain walk's).

Then the discovery documents are fuzzed: hostile Protected Resource and
Authorization Server Metadata (wrong JSON types in every field, a
top-level list, not JSON, NaN, duplicate keys, deep nesting, a resource or
issuer that is not the one asked for, over 1 MiB) and a few thousand
random JSON values served in their place: the walk never raises, every
line it prints is JSON, a bad document is a line with "error", and no URL
of a bad document is dialed."""
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import threading
import time

import support
from support import DOMAIN as D, check

support.setup()
support.need_module("httpx", "python3-httpx")


def main():
    dns = support.Dnsmasq({"mcp." + D: ["127.0.0.1"], "as." + D: ["127.0.0.1"],
                           "meta." + D: ["169.254.169.254"],
                           "collector." + D: ["127.0.0.1"]})
    srv = subprocess.Popen([sys.executable, os.path.join(support.HERE, "fake_mcp_server.py"),
                            "--domain", D], stdout=subprocess.PIPE, text=True)
    support.at_exit(lambda: (srv.terminate(), srv.wait()))
    port = int(srv.stdout.readline().split()[1])
    table = support.compile_table(support.allowlist({"mcp": [
        ("mcp." + D, [port]), ("as." + D, [port]), ("meta." + D, [port])]}))
    env = dict(os.environ, PYTHONPATH=os.path.join(support.SOURCE, "guard", "python"))
    example = os.path.join(support.SOURCE, "examples", "mcp_client.py")

    def walk(server_url, *sse):
        cmd = [sys.executable, example, "--table", table, "--list", "mcp",
               "--dns-server", dns.server, server_url]
        for s in sse:
            cmd += ["--sse", s]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        check("mcp_client.py %s exits 0" % server_url, (0, ""), (r.returncode, r.stderr))
        hops = [json.loads(line) for line in r.stdout.splitlines()]
        for h in hops:
            print("#   %-30s %-70s %s" % (h["hop"], h["url"],
                                          h.get("reason") or h.get("status") or "checked"))
        return [(h["hop"], h["url"], h.get("reason") or h.get("status")
                 or ("allowed" if h.get("allowed") else "?")) for h in hops]

    o = "http://%%s.%s:%d" % (D, port)
    got = walk(o % "mcp" + "/mcp", o % "mcp" + "/sse", o % "mcp" + "/sse-other",
               o % "mcp" + "/sse-same")
    want = [
        ("server", o % "mcp" + "/mcp", 401),
        ("resource_metadata", o % "mcp" + "/.well-known/oauth-protected-resource/mcp", 200),
        ("authorization_server_metadata",
         "http://127.0.0.1:%d/.well-known/oauth-authorization-server" % port, "ip_literal"),
        ("authorization_server_metadata",
         "http://169.254.169.254/.well-known/oauth-authorization-server", "ip_literal"),
        ("authorization_server_metadata",
         o % "unlisted" + "/.well-known/oauth-authorization-server", "not_allowlisted"),
        ("authorization_server_metadata",
         o % "meta" + "/.well-known/oauth-authorization-server", "denied_address"),
        ("authorization_server_metadata", o % "as" + "/.well-known/oauth-authorization-server",
         200),
        ("authorization_endpoint", o % "as" + "/authorize", "allowed"),
        ("token_endpoint", "http://10.0.0.1/token", "ip_literal"),
        ("registration_endpoint", o % "as" + "/register", "allowed"),
        ("sse", o % "mcp" + "/sse", 200),
        ("sse_endpoint", o % "collector" + "/messages?session_id=1", "not_allowlisted"),
        ("sse", o % "mcp" + "/sse-other", 200),
        ("sse_endpoint", o % "as" + "/messages?session_id=2", "cross_origin"),
        ("sse", o % "mcp" + "/sse-same", 200),
        ("sse_endpoint", o % "mcp" + "/messages?session_id=3", 202),
    ]
    check("discovery chain: every hop, refused ones with their reason", want, got)
    got = walk(o % "mcp" + "/mcp-hostile")
    check("a 401 naming the metadata address as resource_metadata", [
        ("server", o % "mcp" + "/mcp-hostile", 401),
        ("resource_metadata",
         "http://169.254.169.254/latest/meta-data/iam/security-credentials/", "ip_literal")],
        got)
    got = walk(o % "unlisted" + "/mcp")
    check("an unlisted MCP server is not dialed",
          [("server", o % "unlisted" + "/mcp", "not_allowlisted")], got)
    bounded_answers(example, env, table, dns, o)
    fuzz(dns)


def run_example(cmd, env, limit, stdout=subprocess.DEVNULL):
    """One run of the example: (exit status, stderr, seconds, peak RSS in
    KiB), killed after limit seconds (exit status then "killed")."""
    err = open(os.path.join(support.TMP, "stderr"), "w+")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=err)
    timer = threading.Timer(limit, p.kill)
    timer.start()
    _, status, usage = os.wait4(p.pid, 0)
    timer.cancel()
    took = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    text = err.read()
    err.close()
    code = "killed" if p.returncode < 0 else p.returncode
    return code, text.strip(), took, usage.ru_maxrss


def bounded_answers(example, env, table, dns, o):
    """The MCP server's answers to initialize and ping are read with
    bounds: a 1 GiB body costs the example at most a few MiB and ends it
    with exit status 2, a trickled one ends at RESPONSE_SECONDS (20 s)."""
    def cmd(server, *sse):
        c = [sys.executable, example, "--table", table, "--list", "mcp",
             "--dns-server", dns.server, server]
        for u in sse:
            c += ["--sse", u]
        return c
    base = run_example(cmd(o % "mcp" + "/mcp"), env, 120)
    print("# a plain walk: exit %s, peak RSS %d MiB" % (base[0], base[3] >> 10))
    for what, body, c, want in (
            ("initialize", "1 GiB", cmd(o % "mcp" + "/mcp-flood"), "more than 1048576 bytes"),
            ("ping", "1 GiB", cmd(o % "mcp" + "/mcp", o % "mcp" + "/sse-flood"),
             "more than 1048576 bytes"),
            ("initialize", "gzip (1 MiB, 256 MiB inflated)", cmd(o % "mcp" + "/mcp-gzip"),
             "Content-Encoding 'gzip'")):
        code, err, took, rss = run_example(c, env, 120)
        grew = (rss - base[3]) >> 10
        print("# a %s %s response: exit %s after %.1f s, peak RSS %d MiB more than a plain "
              "walk; stderr %r" % (body, what, code, took, grew, err[:160]))
        check("a %s %s response: exit 2, the bound named, RSS under 32 MiB more"
              % (body, what), (2, True, True), (code, what in err and want in err, grew < 32))
    code, err, took, _ = run_example(cmd(o % "mcp" + "/mcp-trickle"), env, 60)
    print("# a trickled initialize response: exit %s after %.1f s; stderr %r"
          % (code, took, err[:160]))
    check("a trickled initialize response: exit 2 at 20 s, the bound named",
          (2, True, True), (code, "not read within 20s" in err, took < 30))
    # An event stream whose bytes never make a chunk (its chunk extension
    # trickled): no read times out and no body byte arrives, the stream
    # still ends at DOCUMENT_SECONDS (20 s) with a result line.
    out = os.path.join(support.TMP, "sse-trickle.out")
    with open(out, "w") as f:
        code, err, took, _ = run_example(cmd(o % "mcp" + "/mcp", o % "mcp" + "/sse-trickle"),
                                         env, 60, stdout=f)
    with open(out) as f:
        last = json.loads(f.read().splitlines()[-1])
    print("# an event stream whose chunk line trickles: exit %s after %.1f s; last line %r"
          % (code, took, last))
    check("an event stream whose chunk line trickles: exit 0 at 20 s, a transport_error line",
          (0, True, "sse_endpoint", "transport_error"),
          (code, took < 30, last.get("hop"), last.get("error")))


def random_json(rng, depth=0):
    kinds = ["null", "bool", "int", "float", "str", "list", "dict"]
    k = rng.choice(kinds if depth < 3 else kinds[:5])
    if k == "null":
        return None
    if k == "bool":
        return rng.random() < 0.5
    if k == "int":
        return rng.choice([0, -1, 1 << 70, rng.randint(-1000, 1000)])
    if k == "float":
        return rng.uniform(-1e9, 1e9)
    if k == "str":
        return rng.choice(["", "x", "http://", "http://[::1", "http://127.0.0.1/", "\u0000",
                           "http://as.example/\ud800", "javascript:alert(1)", "\\\\evil",
                           "http://fz.%s:1/" % D, "é" * 3])
    if k == "list":
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["resource", "authorization_servers", "issuer", "token_endpoint",
                        "response_types_supported", "x"]): random_json(rng, depth + 1)
            for _ in range(rng.randint(0, 4))}


def fuzz(dns):
    """Hostile discovery documents, in process (mcp_client imported)."""
    import pinhole
    import pinhole.httpx
    sys.path.insert(0, os.path.join(support.SOURCE, "examples"))
    import mcp_client
    served = {"prm": b"", "as": b""}

    def doc(key):
        return lambda h: (200, {"Content-Type": "application/json"}, served[key])
    srv = support.Server({"/.well-known/oauth-protected-resource/mcp": doc("prm"),
                          "/.well-known/oauth-authorization-server": doc("as")}, name="fz")
    origin = "http://fz.%s:%d" % (D, srv.port)
    server_url = origin + "/mcp"
    srv.routes["/mcp"] = (401, {"WWW-Authenticate": 'Bearer resource_metadata="%s"'
                                % (origin + "/.well-known/oauth-protected-resource/mcp")}, b"")
    dns.set("fz." + D, ["127.0.0.1"])
    table = support.compile_table(support.allowlist({"mcp": [("fz." + D, [srv.port])]}),
                                  name="fuzz")
    guard = pinhole.Guard(table, dns_servers=dns.server)
    good_prm = {"resource": server_url, "authorization_servers": [origin]}
    good_as = {"issuer": origin, "response_types_supported": ["code"],
               "token_endpoint": origin + "/token"}
    hostile_prm = [
        b"not json", b"", b"[1, 2]", b'"a string"', b"42", b"null",
        b'{"resource": "%s", "resource": "http://evil.example/mcp"}' % server_url.encode(),
        b'{"resource": NaN}', b"[" * 100000, b"\xff\xfe",
        json.dumps({"resource": server_url, "authorization_servers": [1, origin]}).encode(),
        json.dumps({"resource": server_url, "authorization_servers": origin}).encode(),
        json.dumps({"resource": server_url, "authorization_servers": {"a": origin}}).encode(),
        json.dumps({"resource": server_url, "authorization_servers": [None]}).encode(),
        json.dumps({"resource": 5, "authorization_servers": [origin]}).encode(),
        json.dumps({"authorization_servers": [origin]}).encode(),
        json.dumps({"resource": "http://evil.example/mcp",
                    "authorization_servers": [origin]}).encode(),
        json.dumps({"resource": server_url, "authorization_servers": [origin] * 17}).encode(),
        json.dumps({"resource": server_url, "scopes_supported": "all"}).encode(),
        json.dumps({"resource": server_url, "dpop_bound_access_tokens_required": "yes"}).encode(),
        json.dumps(dict(good_prm, pad="x" * (1 << 20))).encode(),
    ]
    hostile_as = [
        b"not json", b"[]", b"{}",
        json.dumps(dict(good_as, token_endpoint={"url": origin})).encode(),
        json.dumps(dict(good_as, token_endpoint=7)).encode(),
        json.dumps(dict(good_as, authorization_endpoint=["a"])).encode(),
        json.dumps(dict(good_as, registration_endpoint=None)).encode(),
        json.dumps(dict(good_as, issuer="http://other.example")).encode(),
        json.dumps(dict(good_as, issuer=None)).encode(),
        json.dumps({"issuer": origin}).encode(),
        json.dumps(dict(good_as, response_types_supported="code")).encode(),
        json.dumps(dict(good_as, grant_types_supported=[1])).encode(),
    ]
    rng = random.Random(27)
    randoms = [json.dumps(random_json(rng)).encode() for _ in range(int(os.environ.get("PH_FUZZ_N", "300")))]
    raised, bad_lines, not_flagged, dialed_bad = [], [], [], []

    def walk(prm, asm):
        served["prm"], served["as"] = prm, asm
        before = len(srv.seen)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                mcp_client.discover(client, guard, "mcp", server_url)
        except BaseException as e:  # noqa: BLE001 - anything escaping is the failure
            raised.append("%s: %s (prm %r as %r)" % (type(e).__name__, e, prm[:60], asm[:60]))
            return [], []
        lines = []
        for line in out.getvalue().splitlines():
            try:
                lines.append(json.loads(line))
            except ValueError:
                bad_lines.append(line)
        return lines, [s[1] for s in srv.seen[before:]]

    with pinhole.httpx.Client(guard, "mcp", timeout=10) as client:
        for prm in hostile_prm:
            lines, paths = walk(prm, json.dumps(good_as).encode())
            rm = [h for h in lines if h.get("hop") == "resource_metadata"]
            if not rm or "error" not in rm[0]:
                not_flagged.append(("prm", prm[:80], rm))
            if "/.well-known/oauth-authorization-server" in paths:
                dialed_bad.append(("prm", prm[:80]))
        for asm in hostile_as:
            lines, paths = walk(json.dumps(good_prm).encode(), asm)
            am = [h for h in lines if h.get("hop") == "authorization_server_metadata"]
            if not am or "error" not in am[0]:
                not_flagged.append(("as", asm[:80], am))
            if any(h.get("checked_only") for h in lines):
                dialed_bad.append(("as", asm[:80]))
        for value in randoms:
            walk(value, json.dumps(good_as).encode())
            walk(json.dumps(good_prm).encode(), value)
        # The good documents still walk the whole chain.
        lines, _ = walk(json.dumps(good_prm).encode(), json.dumps(good_as).encode())
    print("# fuzz: %d hostile and %d random documents, %d raised, %d not flagged" % (
        len(hostile_prm) + len(hostile_as), 2 * len(randoms), len(raised), len(not_flagged)))
    check("fuzz: discover() never raises", [], raised[:5])
    check("fuzz: every line printed is JSON", [], bad_lines[:5])
    check("fuzz: every hostile document is a line with an error", [], not_flagged[:5])
    check("fuzz: nothing named by a hostile document is used", [], dialed_bad[:5])
    check("fuzz: valid documents walk the chain to the token endpoint",
          ["server", "resource_metadata", "authorization_server_metadata", "token_endpoint"],
          [h["hop"] for h in lines])


support.run(main)
