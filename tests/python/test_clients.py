#!/usr/bin/python3
"""test_clients.py - real httpx (sync and asyncio) and requests through
pinhole.httpx / pinhole.requests, against local HTTP(S) servers named by
dnsmasq. The same cases run for each of the three clients, each asserting
the reason code:

  allowed fetch (no DNS lookup by the HTTP library: getaddrinfo and
  create_connection fail while it runs); unlisted host (the server sees
  nothing); redirects to 169.254.169.254, to a name answering the metadata
  address, to IP literals, to an unlisted host, to the same host on an
  unlisted port, https -> http, past the hop limit; a cross-origin redirect
  drops Authorization and Cookie (the second server records headers) while
  a same-origin one keeps them; Set-Cookie of a cross-origin final response
  not stored; rebinding (a name whose answer changes between two requests:
  the second is refused); a mixed answer; DNS, connect and read timeouts;
  TLS verifying the host name; proxies refused; 8 threads sharing one
  httpx client and one requests session.
"""
import asyncio
import os
import socket
import threading

import support
from support import DOMAIN as D, check, fail, ok, refused

support.setup()
support.need_module("httpx", "python3-httpx")
support.need_module("requests", "python3-requests")
import httpx  # noqa: E402
import requests  # noqa: E402

import pinhole  # noqa: E402
import pinhole.httpx  # noqa: E402
import pinhole.requests  # noqa: E402

SECRET = "Bearer s3cret-token"


class NoDNS:
    """While active, the process cannot resolve or connect by name itself."""

    def __enter__(self):
        self.saved = socket.getaddrinfo, socket.create_connection

        def nope(*a, **k):
            raise AssertionError("the HTTP library resolved/connected by itself: %r" % (a,))
        socket.getaddrinfo = socket.create_connection = nope
        return self

    def __exit__(self, *exc):
        socket.getaddrinfo, socket.create_connection = self.saved


class Flavor:
    """One HTTP client: fetch() returns (status, body, final url, hops,
    cookies the client stored)."""

    def __init__(self, name, guard, lst, ca):
        self.name, self.guard, self.list, self.ca = name, guard, lst, ca

    def fetch(self, url, headers=None, timeout=5.0, method="GET"):
        if self.name == "httpx":
            with pinhole.httpx.Client(self.guard, self.list, verify=self.ca,
                                      timeout=timeout) as c:
                r = c.request(method, url, headers=headers)
                return (r.status_code, r.content, r.extensions["pinhole_url"],
                        len(r.extensions["pinhole_redirects"]), dict(c.cookies))
        if self.name == "httpx-async":
            async def go():
                async with pinhole.httpx.AsyncClient(self.guard, self.list, verify=self.ca,
                                                     timeout=timeout) as c:
                    r = await c.request(method, url, headers=headers)
                    return (r.status_code, r.content, r.extensions["pinhole_url"],
                            len(r.extensions["pinhole_redirects"]), dict(c.cookies))
            return asyncio.run(go())
        with pinhole.requests.Session(self.guard, self.list) as s:
            r = s.request(method, url, headers=headers, timeout=timeout, verify=self.ca)
            return r.status_code, r.content, r.url, len(r.history), s.cookies.get_dict()

    def refused_types(self):
        if self.name.startswith("httpx"):
            return (httpx.ConnectError,)
        return (requests.ConnectionError,)

    def timeout_types(self):
        if self.name.startswith("httpx"):
            return (httpx.ConnectTimeout,)
        return (requests.ConnectTimeout,)


def main():
    names = {n + "." + D: ["127.0.0.1"] for n in ("ok", "other", "tls", "wrong", "rebind", "bh")}
    names["mixed." + D] = ["127.0.0.1", "10.0.0.5"]
    names["meta." + D] = ["169.254.169.254"]
    dns = support.Dnsmasq(names)
    cert, key = support.make_cert(["tls." + D])
    other = support.Server({"/record": (200, {}, b"recorded\n"),
                            "/cookie": (200, {"Set-Cookie": "stolen=1; Path=/"}, b"c\n")},
                           name="other")
    unlisted_port = support.Server({"/hello": (200, {}, b"unlisted port\n")})
    bh = support.Blackhole()
    silent = support.Silent()
    a_port = [None]

    def loc(target, status=302):
        return (status, {"Location": target}, b"")

    routes = {
        "/hello": (200, {"Set-Cookie": "own=1; Path=/"}, b"hello\n"),
        "/hello2": (200, {}, b"hello2\n"),
        "/r/meta-literal": loc("http://169.254.169.254/latest/meta-data/"),
        "/r/meta-name": None,
        "/r/ip": None,
        "/r/ip-int": loc("http://2130706433/"),
        "/r/ip6": loc("http://[::ffff:169.254.169.254]/"),
        "/r/unlisted": None,
        "/r/port": loc("http://ok.%s:%d/hello" % (D, unlisted_port.port)),
        "/r/other": loc("http://other.%s:%d/record" % (D, other.port), 307),
        "/r/other-cookie": loc("http://other.%s:%d/cookie" % (D, other.port)),
        "/r/same": loc("/hello2"),
        "/r/rel": loc("../hello"),
        "/r/loop": loc("/r/loop"),
        "/r/bad": loc("/\\evil.%s/" % D),
    }
    a = support.Server(routes, name="a")
    a_port[0] = a.port
    routes["/r/meta-name"] = loc("http://meta.%s:%d/" % (D, a.port))
    routes["/r/ip"] = loc("http://127.0.0.1:%d/hello" % a.port)
    routes["/r/unlisted"] = loc("http://unlisted.%s:%d/hello" % (D, a.port))
    a.routes.update(routes)
    tls = support.Server({"/hello": (200, {}, b"tls hello\n"),
                          "/down": loc("http://ok.%s:%d/hello" % (D, a.port))},
                         tls=(cert, key), name="tls")
    table = support.compile_table(support.allowlist({"default": [
        ("ok." + D, [a.port, silent.port]), ("other." + D, [other.port]),
        ("meta." + D, [a.port]), ("rebind." + D, [a.port]), ("mixed." + D, [a.port]),
        ("tls." + D, [tls.port]), ("wrong." + D, [tls.port]), ("slow." + D, [a.port]),
        ("bh." + D, [bh.port]), ("unlisted-no." + D, [1])]}))
    # The DNS cache off: each flavour's rebinding and mixed cases change an
    # answer and must see the change on the next request (a refused answer
    # would otherwise be kept for the negative TTL across flavours).
    guard = pinhole.Guard(table, dns_servers=dns.server, dns_timeout_ms=600, dns_cache=False)
    A = "http://ok.%s:%d" % (D, a.port)

    for name in ("httpx", "httpx-async", "requests"):
        f = Flavor(name, guard, "default", cert)
        print("# %s" % name, flush=True)
        R, T = f.refused_types(), f.timeout_types()

        before = len(a.seen)
        with NoDNS():
            st, body, url, hops, _ = f.fetch(A + "/hello")
        check("%s allowed fetch" % name, (200, b"hello\n", 0), (st, body, hops))
        check("%s the server saw one request with the name as Host" % name,
              (len(a.seen) - before, "ok.%s:%d" % (D, a.port)),
              (1, a.seen[-1][2].get("host")))

        before = len(a.seen)
        refused("%s unlisted host" % name, "not_allowlisted",
                lambda: f.fetch("http://unlisted.%s:%d/hello" % (D, a.port)), *R)
        check("%s unlisted host: nothing sent" % name, before, len(a.seen))
        refused("%s IP literal URL" % name, "ip_literal",
                lambda: f.fetch("http://127.0.0.1:%d/hello" % a.port), *R)

        for path, reason in [("/r/meta-literal", "ip_literal"),
                             ("/r/meta-name", "denied_address"),
                             ("/r/ip", "ip_literal"), ("/r/ip-int", "ip_literal"),
                             ("/r/ip6", "ip_literal"),
                             ("/r/unlisted", "not_allowlisted"),
                             ("/r/port", "port_not_allowed"),
                             ("/r/loop", "redirect_limit"),
                             ("/r/bad", "redirect_bad_location")]:
            refused("%s redirect %s" % (name, path), reason, lambda: f.fetch(A + path), *R)
        check("%s nothing reached the unlisted port" % name, [], unlisted_port.seen)

        before = len(other.seen)
        st, body, url, hops, _ = f.fetch(A + "/r/other", method="POST",
                                         headers={"Authorization": SECRET,
                                                  "Cookie": "session=abc",
                                                  "Content-Type": "text/plain"})
        check("%s cross-origin redirect followed (307 keeps the method)" % name,
              (200, b"recorded\n", 1, "POST"), (st, body, hops, other.seen[-1][0]))
        got = other.seen[-1][2]
        check("%s cross-origin: Authorization dropped" % name, None, got.get("authorization"))
        check("%s cross-origin: Cookie dropped" % name, None, got.get("cookie"))
        check("%s cross-origin: Host is the new origin" % name,
              "other.%s:%d" % (D, other.port), got.get("host"))
        check("%s cross-origin: one request" % name, before + 1, len(other.seen))
        st, body, url, hops, _ = f.fetch(A + "/r/same", headers={"Authorization": SECRET})
        check("%s same-origin redirect keeps Authorization" % name, (200, SECRET),
              (st, a.seen[-1][2].get("authorization")))
        st, body, url, hops, _ = f.fetch(A + "/r/rel")
        check("%s relative Location resolved" % name, (200, b"hello\n", A + "/hello"),
              (st, body, url))
        st, body, url, hops, cookies = f.fetch(A + "/r/other-cookie")
        check("%s cross-origin final Set-Cookie not stored" % name, (200, {}), (st, cookies))

        dns.set("rebind." + D, ["127.0.0.1"])
        st = f.fetch("http://rebind.%s:%d/hello" % (D, a.port))[0]
        check("%s rebinding: first answer (loopback, exempt in this build) fetched" % name,
              200, st)
        dns.set("rebind." + D, ["10.0.0.1"])
        refused("%s rebinding: the second answer is refused" % name, "denied_address",
                lambda: f.fetch("http://rebind.%s:%d/hello" % (D, a.port)), *R)
        dns.set("rebind." + D, ["127.0.0.1"])
        refused("%s mixed answer" % name, "denied_address",
                lambda: f.fetch("http://mixed.%s:%d/hello" % (D, a.port)), *R)

        refused("%s DNS timeout" % name, "dns_timeout",
                lambda: f.fetch("http://slow.%s:%d/" % (D, a.port)), *T)
        refused("%s connect timeout" % name, "upstream_timeout",
                lambda: f.fetch("http://bh.%s:%d/" % (D, bh.port), timeout=0.5), *T)
        try:
            f.fetch("http://ok.%s:%d/" % (D, silent.port), timeout=0.5)
            fail("%s read timeout" % name, "no error")
        except (httpx.ReadTimeout, requests.ReadTimeout) as e:
            ok("%s read timeout (%s)" % (name, type(e).__name__))

        st, body = f.fetch("https://tls.%s:%d/hello" % (D, tls.port))[:2]
        check("%s TLS fetch, certificate verified against the name" % name,
              (200, b"tls hello\n"), (st, body))
        try:
            f.fetch("https://wrong.%s:%d/hello" % (D, tls.port))
            fail("%s TLS name mismatch refused" % name, "fetched")
        except (httpx.ConnectError, requests.exceptions.SSLError) as e:
            check("%s TLS name mismatch refused by certificate verification" % name, True,
                  "certificate" in str(e).lower() or "hostname" in str(e).lower())
        refused("%s https -> http redirect" % name, "redirect_downgrade",
                lambda: f.fetch("https://tls.%s:%d/down" % (D, tls.port)), *R)

    threads(guard, A, a)
    proxies(guard, A)


def threads(guard, A, a):
    """One httpx client and one requests session shared by 8 threads."""
    print("# threads", flush=True)
    errors, done = [], [0]
    lock = threading.Lock()
    with pinhole.httpx.Client(guard, "default", timeout=10) as c, \
            pinhole.requests.Session(guard, "default") as s:
        def work(i):
            try:
                for n in range(25):
                    if (i + n) % 2:
                        st = c.get(A + "/hello").status_code
                    else:
                        st = s.get(A + "/hello", timeout=10).status_code
                    if st != 200:
                        errors.append(st)
                    try:
                        c.get(A.replace("ok.", "unlisted.") + "/hello")
                        errors.append("unlisted fetched")
                    except pinhole.Refused as e:
                        if e.reason != "not_allowlisted":
                            errors.append(e.reason)
                    with lock:
                        done[0] += 1
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    check("8 threads x 25 fetches and refusals on shared clients: no error", ([], 200),
          (errors[:5], done[0]))


def proxies(guard, A):
    print("# proxies", flush=True)
    saved = {k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                                             "NO_PROXY")}
    os.environ.update(HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    os.environ.pop("NO_PROXY", None)
    try:
        # httpx uses environment proxies only when no transport is given: a
        # client around the guarded transport still dials through the guard.
        with pinhole.httpx.Client(guard, "default", trust_env=True) as c:
            check("httpx Client(trust_env=True) with a proxy variable: direct, guarded", 200,
                  c.get(A + "/hello").status_code)
        try:
            pinhole.httpx.Client(guard, "default", proxies="http://127.0.0.1:9")
            fail("httpx Client(proxies=...)", "constructed")
        except pinhole.ProxyRefused as e:
            check("httpx Client(proxies=...): proxy_refused", "proxy_refused", e.reason)
        plain = httpx.Client(transport=pinhole.httpx.GuardedTransport(guard, "default"),
                             mounts={"http://": httpx.HTTPTransport(
                                 proxy=httpx.Proxy("http://127.0.0.1:9"))})
        try:
            pinhole.httpx.check_client(plain)
            fail("check_client on an httpx.Client with a proxy mount", "passed")
        except pinhole.ProxyRefused as e:
            check("check_client on an httpx.Client with a proxy mount: proxy_refused",
                  "proxy_refused", e.reason)
        plain.close()
        plain = httpx.Client(transport=pinhole.httpx.GuardedTransport(guard, "default"))
        pinhole.httpx.check_client(plain)
        ok("check_client on an httpx.Client around GuardedTransport passes")
        plain.close()
        with pinhole.httpx.Client(guard, "default") as c:
            check("httpx Client (trust_env False) ignores the proxy variable", 200,
                  c.get(A + "/hello").status_code)
        with pinhole.requests.Session(guard, "default") as s:
            s.trust_env = True
            refused("requests Session with trust_env and a proxy variable", "proxy_refused",
                    lambda: s.get(A + "/hello", timeout=5), pinhole.ProxyRefused)
            s.trust_env = False
            check("requests Session (trust_env False) ignores the proxy variable", 200,
                  s.get(A + "/hello", timeout=5).status_code)
            refused("requests proxies= refused", "proxy_refused",
                    lambda: s.get(A + "/hello", timeout=5,
                                  proxies={"http": "http://127.0.0.1:9"}),
                    pinhole.ProxyRefused)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


support.run(main)
