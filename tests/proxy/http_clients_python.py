#!/usr/bin/python3
"""http_clients_python.py - Python's urllib and requests as plain-HTTP proxy
clients, the way code in a sandbox uses them: the proxy comes from
HTTP_PROXY (with the grant in its userinfo, as the sandbox's tier-2
environment sets it), or the grant is sent as a Proxy-Authorization header.

Usage: http_clients_python.py ORIGIN_URL REFUSED_URL BLOB_SHA256 [PROXY_URL_NO_GRANT AUTH_HEADER]
  ORIGIN_URL    http://host:port of the origin (http_origin.py, serving
                /blob whose SHA-256 is BLOB_SHA256, and POST /echo)
  REFUSED_URL   an http:// URL on a host the grant's list does not hold
  PROXY_URL_NO_GRANT, AUTH_HEADER  the proxy without userinfo and the
                Proxy-Authorization value that carries the grant instead
HTTP_PROXY/http_proxy in the environment select the proxy (unset: direct,
the control run); the refusal cases run only with a proxy.
Prints one "ok - " or "FAIL - " line per check; exit 0 all passed, 1 a
check failed, 77 python3-requests is missing.
"""
import base64
import hashlib
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

try:
    import requests
except ImportError:
    print("SKIP: python3-requests is not installed")
    sys.exit(77)

FAILS = 0


def check(name, expected, actual):
    global FAILS
    if expected == actual:
        print("ok - %s" % name)
    else:
        FAILS += 1
        print("FAIL - %s: expected %r, got %r" % (name, expected, actual))


def sha(b):
    return hashlib.sha256(b).hexdigest()


def body_of(size, seed):
    """Deterministic, incompressible-looking bytes."""
    out, block = bytearray(), hashlib.sha256(seed.encode()).digest()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:size])


def proxy_basic_header():
    """Proxy-Authorization: Basic from HTTP_PROXY's userinfo ({} without)."""
    u = urllib.parse.urlsplit(os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy") or "")
    if u.username is None:
        return {}
    cred = "%s:%s" % (urllib.parse.unquote(u.username), urllib.parse.unquote(u.password or ""))
    return {"Proxy-Authorization": "Basic " + base64.b64encode(cred.encode()).decode()}


def urllib_open(url, data=None, headers=None, handler=None):
    """(status, headers, body) of one urllib request; HTTPError is an answer."""
    opener = urllib.request.build_opener(handler or urllib.request.ProxyHandler())
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def main():
    origin, refused, blob_sha = sys.argv[1:4]
    no_grant_proxy = sys.argv[4] if len(sys.argv) > 4 else None
    auth = sys.argv[5] if len(sys.argv) > 5 else None
    proxied = bool(os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy"))
    post = body_of(1 << 20, "post")
    via = "through the proxy" if proxied else "direct"

    # urllib: ProxyHandler() reads http_proxy/HTTP_PROXY, turns the
    # userinfo into Proxy-Authorization: Basic.
    st, _, b = urllib_open(origin + "/blob")
    check("urllib GET %s: status" % via, 200, st)
    check("urllib GET %s: body sha256" % via, blob_sha, sha(b))
    st, h, b = urllib_open(origin + "/echo", data=post,
                           headers={"Content-Type": "application/octet-stream"})
    check("urllib POST 1 MiB %s: status" % via, 200, st)
    check("urllib POST 1 MiB %s: echoed body" % via, sha(post), sha(b))
    check("urllib POST 1 MiB %s: origin read the body" % via, sha(post), h.get("X-Body-Sha256"))

    # An iterable body without a length goes out chunked.
    st, h, b = urllib_open(origin + "/echo", data=iter([post[:300000], post[300000:]]),
                           headers={"Content-Type": "application/octet-stream"})
    check("urllib POST chunked %s: status" % via, 200, st)
    check("urllib POST chunked %s: origin read the body" % via, (sha(post), sha(post)),
          (h.get("X-Body-Sha256"), sha(b)))

    # requests: trust_env reads the same variables; a Session keeps the
    # connection to the proxy alive across requests.
    with requests.Session() as s:
        r = s.get(origin + "/blob", timeout=30)
        check("requests GET %s: status" % via, 200, r.status_code)
        check("requests GET %s: body sha256" % via, blob_sha, sha(r.content))
        r = s.post(origin + "/echo", data=post, timeout=30)
        check("requests POST 1 MiB %s: status" % via, 200, r.status_code)
        check("requests POST 1 MiB %s: echoed body" % via, sha(post), sha(r.content))
        # A generator body goes out chunked. requests 2.28 sends a chunked
        # body through its own low-level path, which leaves out the proxy
        # headers urllib3 derives from the proxy URL's userinfo: without the
        # grant the proxy answers 407 no_grant, and the client must get that
        # answer (not a reset) although it is still sending the body. A
        # requests that sends the grant there gets the 200. Then the grant
        # goes along as an explicit header.
        chunks = [post[i:i + 65536] for i in range(0, len(post), 65536)]
        if proxied:
            try:
                r = s.post(origin + "/echo", data=iter(chunks), timeout=30)
                got = (r.status_code, r.headers.get("Pinhole-Reason")) if r.status_code != 200 \
                    else (200, r.headers.get("X-Body-Sha256") == sha(post))
            except requests.exceptions.ConnectionError as e:
                got = "connection error: %s" % e
            check("requests POST chunked through the proxy, its own proxy headers: answered",
                  True, got in ((407, "no_grant"), (200, True)))
        r = s.post(origin + "/echo", data=iter(chunks), timeout=30,
                   headers=proxy_basic_header())
        check("requests POST chunked %s: status" % via, 200, r.status_code)
        check("requests POST chunked %s: origin read the body" % via, sha(post),
              r.headers.get("X-Body-Sha256"))
        r = s.head(origin + "/blob", timeout=30)
        check("requests HEAD %s: status, no body" % via, (200, b""), (r.status_code, r.content))

    if not proxied:
        return 1 if FAILS else 0

    # The unlisted host: refused by the proxy with the stable reason.
    st, h, _ = urllib_open(refused)
    check("urllib GET of an unlisted host: status and reason", (403, "not_allowlisted"),
          (st, h.get("Pinhole-Reason")))
    with requests.Session() as s:
        r = s.get(refused, timeout=30)
        check("requests GET of an unlisted host: status and reason", (403, "not_allowlisted"),
              (r.status_code, r.headers.get("Pinhole-Reason")))
        # The same session goes on to an allowed host afterwards.
        r = s.get(origin + "/blob", timeout=30)
        check("requests GET after a refusal on the same session", (200, blob_sha),
              (r.status_code, sha(r.content)))

    # The grant as a Proxy-Authorization header, the proxy URL without it.
    if no_grant_proxy and auth:
        handler = urllib.request.ProxyHandler({"http": no_grant_proxy})
        st, _, b = urllib_open(origin + "/blob", headers={"Proxy-Authorization": auth},
                               handler=handler)
        check("urllib GET with Proxy-Authorization", (200, blob_sha), (st, sha(b)))
        st, _, _ = urllib_open(origin + "/blob", handler=handler)
        check("urllib GET without a grant", 407, st)
        r = requests.get(origin + "/blob", proxies={"http": no_grant_proxy},
                         headers={"Proxy-Authorization": auth}, timeout=30)
        check("requests GET with Proxy-Authorization", (200, blob_sha),
              (r.status_code, sha(r.content)))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
