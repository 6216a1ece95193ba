#!/usr/bin/python3
"""test_hostile.py - what a hostile server can try on a worker's redirect
path, for httpx (sync and asyncio) and requests through pinhole:

  secrets stay on their origin: of the headers the caller set only
  libpinhole's short list reaches another origin (X-Api-Key,
  Private-Token, Authorization do not; Accept, User-Agent do), on 302 and
  307; a 307 of a POST to another origin is refused
  (redirect_body_cross_origin) unless the request opts in; a cookie set by
  an intermediate hop is not kept, nor one of a final answer once the
  chain left its origin (A -> B -> A); a TLS client certificate is
  presented to the request's origin and not to the next one, nor back on
  the first once the chain left it (the server asks every client for
  one);

  the worker cannot be exhausted: a redirect whose body never ends (1 GiB
  announced) costs the worker at most a few MiB (bytes the server got out,
  RSS growth printed); a chain of redirects whose bodies trickle a byte
  per 100 ms ends at the request's total deadline (upstream_timeout);
  dials to a black hole in flight on one event loop (12 and 64 to one
  host, 96 over 24 names, 200 over two clients, 64 whose DNS never
  answers) neither delay nor refuse a healthy fetch on it (under 0.5 s).

Every figure is printed ("# ..."), so a run against another build shows
what it did there.
"""
import asyncio
import resource
import time

import support
from support import DOMAIN as D, check, refused

support.setup()
support.need_module("httpx", "python3-httpx")
support.need_module("requests", "python3-requests")
import httpx  # noqa: E402
import requests  # noqa: E402

import pinhole  # noqa: E402
import pinhole.httpx  # noqa: E402
import pinhole.requests  # noqa: E402

SECRET_HEADERS = {"X-Api-Key": "key-123", "Private-Token": "tok-456",
                  "Authorization": "Bearer s3cret", "Accept": "application/json",
                  "User-Agent": "worker/1"}
BODY = b"client_id=x&client_secret=s3cr3t"
FLOOD = 1 << 30


def peak_rss_kib():
    """The process's peak resident set (a body read whole and freed again
    still shows here)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def fetch(flavor, guard, url, method="GET", headers=None, body=None, cert=None, ca=None,
          timeout=5.0, transport=None, extensions=None, prepared_attrs=None, took=None,
          digest=None):
    """One request; returns (status, cookies the client kept). took: a
    list that gets the seconds the request itself took (the client's
    construction, TLS contexts included, is not the request's). digest:
    (user, password) for the client's own Digest authentication."""
    transport = dict(transport or {})
    t0 = [0.0]

    def start():
        t0[0] = time.monotonic()

    def stop():
        if took is not None:
            took.append(time.monotonic() - t0[0])
    if flavor == "httpx":
        with pinhole.httpx.Client(guard, "default", verify=ca or True, cert=cert,
                                  timeout=timeout, transport_options=transport) as c:
            start()
            try:
                r = c.request(method, url, headers=headers, content=body, extensions=extensions,
                              auth=httpx.DigestAuth(*digest) if digest else None)
            finally:
                stop()
            return r.status_code, dict(c.cookies)
    if flavor == "httpx-async":
        async def go():
            async with pinhole.httpx.AsyncClient(guard, "default", verify=ca or True, cert=cert,
                                                 timeout=timeout,
                                                 transport_options=transport) as c:
                start()
                try:
                    r = await c.request(method, url, headers=headers, content=body,
                                        extensions=extensions,
                                        auth=httpx.DigestAuth(*digest) if digest else None)
                finally:
                    stop()
                return r.status_code, dict(c.cookies)
        return asyncio.run(go())
    with pinhole.requests.Session(guard, "default", **transport) as s:
        auth = requests.auth.HTTPDigestAuth(*digest) if digest else None
        p = s.prepare_request(requests.Request(method, url, headers=headers, data=body,
                                               auth=auth))
        for k, v in (prepared_attrs or {}).items():
            setattr(p, k, v)
        start()
        try:
            r = s.send(p, timeout=timeout, verify=ca or True, cert=cert)
        finally:
            stop()
        return r.status_code, s.cookies.get_dict()


def main():
    BH = ["bh"] + ["bh%d" % i for i in range(24)]  # 25 names of one black hole
    names = {n + "." + D: ["127.0.0.1"] for n in ["ok", "other", "tls", "tls2"] + BH}
    names["dual." + D] = ["::1", "127.0.0.1"]  # nothing listens on [::1]
    dns = support.Dnsmasq(names)
    cert, key = support.make_cert(["tls." + D, "tls2." + D])
    ccert, ckey = support.make_cert(["worker-client." + D])
    flood_sent = [0]

    def flood(h):
        """302 announcing a 1 GiB body, then writing it until the client goes."""
        h.send_response(302)
        h.send_header("Location", "/hello")
        h.send_header("Content-Length", str(FLOOD))
        h.end_headers()
        chunk = b"f" * 65536
        sent = 0
        try:
            while sent < FLOOD:
                h.wfile.write(chunk)
                sent += len(chunk)
                flood_sent[0] = sent
        except OSError:
            pass
        h.close_connection = True
        return None, {}, b""

    def trickle(h):
        """302 to itself, its 4-byte body a byte per 100 ms."""
        h.send_response(302)
        h.send_header("Location", "/r/trickle")
        h.send_header("Content-Length", "4")
        h.end_headers()
        try:
            for _ in range(4):
                h.wfile.flush()
                time.sleep(0.1)
                h.wfile.write(b"t")
            h.wfile.flush()
        except OSError:
            pass
        return None, {}, b""

    def trickle_head(h):
        """200 whose head comes a header line per 100 ms, for 8 s."""
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        try:
            for i in range(80):
                h.wfile.flush()
                time.sleep(0.1)
                h.wfile.write(b"X-%d: y\r\n" % i)
            h.wfile.write(b"Content-Length: 0\r\n\r\n")
            h.wfile.flush()
        except OSError:
            pass
        h.close_connection = True
        return None, {}, b""

    other = support.Server({"/echo": (200, {}, b"echo\n")}, name="other")
    a = support.Server({"/hello": (200, {}, b"hello\n"), "/r/flood": flood,
                        "/r/trickle": trickle, "/trickle-head": trickle_head}, name="a")
    A = "http://ok.%s:%d" % (D, a.port)
    O = "http://other.%s:%d" % (D, other.port)
    a.routes["/r/302"] = (302, {"Location": O + "/echo"}, b"")
    a.routes["/r/307"] = (307, {"Location": O + "/echo"}, b"")
    a.routes["/r/307-same"] = (307, {"Location": "/hello"}, b"")
    a.routes["/r/via-other"] = (302, {"Location": O + "/hop-cookie"}, b"")
    other.routes["/hop-cookie"] = (302, {"Location": A + "/hello",
                                         "Set-Cookie": "tracker=1; Path=/"}, b"")
    a.routes["/r/digest"] = (302, {"Location": O + "/digest"}, b"")
    other.routes["/digest"] = (401, {"WWW-Authenticate":
                                     'Digest realm="x", nonce="abc", qop="auth"'}, b"")
    a.routes["/r/cookie-hop"] = (302, {"Location": "/hello",
                                       "Set-Cookie": "hop=1; Path=/"}, b"")
    tls = support.Server({"/hello": (200, {}, b"tls hello\n")}, tls=(cert, key), name="tls",
                         client_ca=ccert)
    T2 = "https://tls2.%s:%d" % (D, tls.port)
    tls.routes["/to-tls2"] = (302, {"Location": T2 + "/hello"}, b"")
    # tls -> tls2 -> tls: the same server under two names (two origins).
    tls.routes["/aba"] = (302, {"Location": T2 + "/bounce"}, b"")
    tls.routes["/bounce"] = (302, {"Location": "https://tls.%s:%d/hello" % (D, tls.port)}, b"")
    a.routes["/r/via-other-final"] = (302, {"Location": O + "/back-final"}, b"")
    other.routes["/back-final"] = (302, {"Location": A + "/set-final"}, b"")
    a.routes["/set-final"] = (200, {"Set-Cookie": "final=1; Path=/"}, b"final\n")
    bh = support.Blackhole()
    table = support.compile_table(support.allowlist({"default": [
        ("ok." + D, [a.port]), ("other." + D, [other.port]), ("tls." + D, [tls.port]),
        ("tls2." + D, [tls.port]), ("slow." + D, [bh.port]), ("dual." + D, [a.port])] +
        [(n + "." + D, [bh.port]) for n in BH]}))
    guard = pinhole.Guard(table, dns_servers=dns.server, dns_timeout_ms=2000)

    for flavor in ("httpx", "httpx-async", "requests"):
        print("# %s" % flavor, flush=True)
        for path in ("/r/302", "/r/307"):
            other.seen.clear()
            st = fetch(flavor, guard, A + path, headers=SECRET_HEADERS)[0]
            seen = other.seen[-1][2] if other.seen else {}
            print("# %s %s: the other origin saw %s" % (flavor, path, sorted(seen)), flush=True)
            check("%s %s followed" % (flavor, path), 200, st)
            check("%s %s: no secret header reached the other origin" % (flavor, path), [],
                  [h for h in ("x-api-key", "private-token", "authorization") if h in seen])
            check("%s %s: Accept and User-Agent followed" % (flavor, path),
                  ("application/json", "worker/1"), (seen.get("accept"), seen.get("user-agent")))

        other.seen.clear()
        refused("%s POST 307 to another origin" % flavor, "redirect_body_cross_origin",
                lambda: fetch(flavor, guard, A + "/r/307", "POST", body=BODY))
        print("# %s POST 307: the other origin saw %r" % (
            flavor, [(m, b) for m, _, _, b in other.seen]), flush=True)
        check("%s POST 307: nothing reached the other origin" % flavor, [], other.seen)
        st = fetch(flavor, guard, A + "/r/307-same", "POST", body=BODY)[0]
        check("%s POST 307 on the same origin: the body follows" % flavor,
              (200, ("POST", BODY)), (st, (a.seen[-1][0], a.seen[-1][3])))
        opt = dict(extensions={"pinhole_allow_body_cross_origin": True}) \
            if flavor.startswith("httpx") else \
            dict(prepared_attrs={"pinhole_allow_body_cross_origin": True})
        st = fetch(flavor, guard, A + "/r/307", "POST", body=BODY, **opt)[0]
        check("%s POST 307 to another origin, opted in for the request" % flavor,
              (200, "POST", BODY), (st, other.seen[-1][0], other.seen[-1][3]))

        other.seen.clear()
        st = fetch(flavor, guard, A + "/r/digest", digest=("alice", "hunter2"))[0]
        sent = [h["authorization"][:20] for _, _, h, _ in other.seen if "authorization" in h]
        print("# %s Digest challenge from the other origin: it got %r" % (flavor, sent),
              flush=True)
        check("%s a Digest challenge from another origin gets no credentials" % flavor,
              (401, []), (st, sent))

        st, cookies = fetch(flavor, guard, A + "/r/via-other")
        check("%s a cookie set by an intermediate hop of another origin is not kept" % flavor,
              (200, {}), (st, cookies))
        st, cookies = fetch(flavor, guard, A + "/r/via-other-final")
        print("# %s A -> B -> A, the final answer sets a cookie: kept %s" % (flavor, cookies),
              flush=True)
        check("%s a final cookie is not kept once the chain left its origin" % flavor,
              (200, {}), (st, cookies))
        st, cookies = fetch(flavor, guard, A + "/set-final")
        check("%s a cookie of a request without redirects is kept" % flavor,
              (200, {"final": "1"}), (st, cookies))
        st, cookies = fetch(flavor, guard, A + "/r/cookie-hop")
        check("%s a cookie set by an intermediate hop is not kept" % flavor, (200, {}),
              (st, cookies))

        tls.certs.clear()
        st = fetch(flavor, guard, "https://tls.%s:%d/to-tls2" % (D, tls.port),
                   cert=(ccert, ckey), ca=cert)[0]
        print("# %s client certificate presented: %s" % (flavor, tls.certs), flush=True)
        check("%s client certificate: to the first origin only" % flavor,
              (200, [("/to-tls2", True), ("/hello", False)]), (st, tls.certs))

        tls.certs.clear()
        st = fetch(flavor, guard, "https://tls.%s:%d/aba" % (D, tls.port),
                   cert=(ccert, ckey), ca=cert)[0]
        print("# %s client certificate presented on A -> B -> A: %s" % (flavor, tls.certs),
              flush=True)
        check("%s client certificate: not again once the chain left its origin" % flavor,
              (200, [("/aba", True), ("/bounce", False), ("/hello", False)]), (st, tls.certs))

        flood_sent[0] = 0
        before = peak_rss_kib()
        t0 = time.monotonic()
        try:
            st = fetch(flavor, guard, A + "/r/flood", timeout=30)[0]
        except Exception as e:  # noqa: BLE001
            st = repr(e)
        grew = (peak_rss_kib() - before) // 1024
        print("# %s a 1 GiB redirect body: %d MiB left the server, peak RSS grew %d MiB, %.2f s"
              % (flavor, flood_sent[0] >> 20, grew, time.monotonic() - t0), flush=True)
        check("%s a flooding redirect: followed, under 16 MiB read, RSS under 64 MiB more"
              % flavor, (200, True, True), (st, flood_sent[0] < 16 << 20, grew < 64))

        # Each read well within timeout, the whole past total_timeout.
        for what, path, timeout in (("chain", "/r/trickle", 2), ("head", "/trickle-head", 5)):
            spent = []
            e = refused("%s a trickled %s ends at the total deadline" % (flavor, what),
                        "upstream_timeout",
                        lambda: fetch(flavor, guard, A + path, timeout=timeout,
                                      transport={"total_timeout": 1.0}, took=spent))
            took = spent[0] if spent else 0.0
            print("# %s trickled %s: %s after %.2f s" % (
                flavor, what, e.reason if e else "not refused", took), flush=True)
            check("%s trickled %s ended within 2.5 s" % (flavor, what), True, took < 2.5)

    # DNS timeouts long enough that the last query starts before the first
    # ends, on a machine whose cores are busy.
    blackholes(guard, pinhole.Guard(table, dns_servers=dns.server, dns_timeout_ms=8000), A,
               bh, dns)
    sessions(guard, A, a)


def sessions(guard, A, a):
    """An existing requests.Session guarded on both schemes, and one with a
    longer prefix mounted refused."""
    print("# existing sessions", flush=True)
    meta = "http://127.0.0.1:%d/latest/meta-data/" % a.port
    with requests.Session() as s:
        s.mount("https://", pinhole.requests.GuardedAdapter(guard, "default"))
        before = len(a.seen)
        try:
            st = s.get(meta, timeout=5).status_code
        except pinhole.Refused as e:
            st = e.reason
        print("# a session guarded on https:// only fetched %s: %s (%d request(s) reached it)"
              % (meta, st, len(a.seen) - before), flush=True)
    try:
        guard_session = pinhole.requests.guard_session
    except AttributeError:
        check("pinhole.requests.guard_session exists", True, False)
        return
    with requests.Session() as s:
        guard_session(s, guard, "default")
        before = len(a.seen)
        refused("guard_session: http:// is guarded too", "ip_literal",
                lambda: s.get(meta, timeout=5))
        check("guard_session: nothing reached the metadata path", before, len(a.seen))
        check("guard_session: an allowed URL", 200, s.get(A + "/hello", timeout=5).status_code)
    with requests.Session() as s:
        s.mount("http://127.0.0.1", requests.adapters.HTTPAdapter())
        refused("guard_session refuses a session with a longer prefix mounted",
                "proxy_refused", lambda: guard_session(s, guard, "default"),
                pinhole.ProxyRefused)
        check("guard_session mounted nothing on the refused session", False,
              any(isinstance(v, pinhole.requests.GuardedAdapter) for v in s.adapters.values()))


async def ss(*args):
    """The lines ss(8) prints (iproute2, asking the kernel over netlink with
    the filter in args), run beside the loop: reading /proc/net/tcp of a
    busy host would stall the loop the dials run on."""
    p = await asyncio.create_subprocess_exec("ss", "-Hn", *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await p.communicate()
    return out.decode().splitlines()


async def syn_sent(bh):
    """Connections in SYN_SENT to the black hole bh, its own fillers left
    out: dials in flight to it."""
    fillers = {"127.0.0.1:%d" % s.getsockname()[1] for s in bh.fillers}
    rows = await ss("-t", "state", "syn-sent", "dst", "127.0.0.1:%d" % bh.port)
    return sum(1 for r in rows if r.split()[-2] not in fillers)


async def dns_queries(dns):
    """UDP sockets connected to the test's DNS server: resolutions in
    flight, one each."""
    return len(await ss("-u", "dst", "127.0.0.1:%d" % dns.port))


def blackholes(guard, slow_guard, A, bh, dns):
    """Dials to a black hole in flight (counted in the kernel's SYN_SENT by
    ss, not guessed from time) on one loop: a healthy fetch on the same loop
    still answers at once, and is never refused. 12 and 64 to one host,
    96 spread over 24 names of the same black hole on one client, and 200
    over two tenants' clients (each at its connection limit, 100) beside a
    third tenant's; then 64 whose DNS never answers (their queries counted
    in the kernel's UDP sockets)."""
    print("# async dials", flush=True)

    async def dual():
        async with pinhole.httpx.AsyncClient(guard, "default", timeout=3) as c:
            t0 = time.monotonic()
            r = await c.get(A.replace("ok.", "dual.") + "/hello")
            return r.status_code, time.monotonic() - t0
    st, took = asyncio.run(dual())
    print("# a name answering ::1 (refused) and 127.0.0.1: %s in %.3f s" % (st, took),
          flush=True)
    check("async happy eyeballs: IPv6 refused, IPv4 at once (before the 250 ms stagger)",
          (200, True), (st, took < 0.25))

    async def go(n, names, clients, count, guard):
        # Long enough that the last dial starts before the first ends, on
        # a machine whose cores are busy.
        cs = [pinhole.httpx.AsyncClient(guard, "default", timeout=8) for _ in range(clients)]
        healthy = cs[0] if clients == 1 else \
            pinhole.httpx.AsyncClient(guard, "default", timeout=3)
        try:
            async def stuck(i):
                try:
                    await cs[i % clients].get("http://%s.%s:%d/" % (names[i % len(names)], D,
                                                                     bh.port))
                except Exception as e:  # noqa: BLE001
                    return e
            base = await count()
            tasks = [asyncio.create_task(stuck(i)) for i in range(n)]
            end = time.monotonic() + 20
            while await count() - base < n and time.monotonic() < end and \
                    not any(t.done() for t in tasks):
                await asyncio.sleep(0.05)
            in_flight = await count() - base
            t0 = time.monotonic()
            try:
                r = await healthy.get(A + "/hello")
                st = r.status_code
            except pinhole.Refused as e:
                st = e.reason
            took = time.monotonic() - t0
            results = await asyncio.gather(*tasks)
            return in_flight, st, took, results
        finally:
            for c in set(cs + [healthy]):
                await c.aclose()

    many = ["bh%d" % i for i in range(24)]
    connect = ("black-holed dials", "SYN_SENT", lambda: syn_sent(bh), "upstream_timeout", guard)
    silent = ("dials whose DNS never answers", "DNS queries", lambda: dns_queries(dns),
              "dns_timeout", slow_guard)
    for n, names, clients, (kind, where, count, reason, g) in (
            (12, ["bh"], 1, connect), (64, ["bh"], 1, connect), (96, many, 1, connect),
            (200, many, 2, connect), (64, ["slow"], 1, silent)):
        what = "%d %s to %d name(s) on %d client(s)" % (n, kind, len(names), clients)
        in_flight, st, took, results = asyncio.run(go(n, names, clients, count, g))
        reasons = sorted({getattr(e, "reason", type(e).__name__) for e in results})
        print("# %s: %d in %s; healthy fetch %s in %.3f s; theirs: %s"
              % (what, in_flight, where, st, took, reasons), flush=True)
        check("%s all in flight" % what, n, in_flight)
        check("healthy fetch beside %s: 200 in under 0.5 s" % what, (200, True),
              (st, took < 0.5))
        check("%s: %s" % (what, reason), [reason], reasons)


support.run(main)
