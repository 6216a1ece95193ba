"""requests through the guard: GuardedAdapter, and Session (a
requests.Session with the adapter mounted for http:// and https://).

    import pinhole, pinhole.requests
    guard = pinhole.Guard("/etc/pinhole/allowlist.ptab")
    with pinhole.requests.Session(guard, "mcp") as s:
        s.get("https://mcp.example.com/mcp", timeout=10)

The adapter's guarantees are the httpx transport's (pinhole.httpx):
every URL checked before it is sent; every connection opened by
Guard.dial_authority, so urllib3 never resolves a name and connects only to
checked addresses, while TLS verifies the certificate against the host
name; redirects followed in the adapter, each Location decided by
Guard.redirect_check and dialed anew, Authorization, Proxy-Authorization and
Cookie dropped when the origin changes (response.history holds the hops;
the Session never sees a 3xx, so allow_redirects does not matter); Set-Cookie
of a final response from another origin than the request's removed.

Proxies: requests hands the adapter the proxies it would use (from
trust_env and the environment, or proxies=); any proxy for the URL raises
ProxyRefused before anything is sent. The adapter never opens a proxy
connection.

Refusals raise Refused (connection-time reasons) or RefusedTimeout
(dns_timeout, upstream_timeout): pinhole.Refused with .reason, and
requests.ConnectionError / requests.ConnectTimeout.
"""
from urllib.parse import urlsplit

import requests
import requests.adapters
import requests.utils
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from . import _redirect
from . import errors

__all__ = ["GuardedAdapter", "Refused", "RefusedTimeout", "Session"]

_TIMEOUT_REASONS = ("dns_timeout", "upstream_timeout")


class Refused(errors.Refused, requests.exceptions.ConnectionError):
    """A refusal, as a requests.ConnectionError with the guard's .reason."""

    def __init__(self, reason, detail="", url=None, verdict=None, request=None):
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self.request = request
        self.response = None


class RefusedTimeout(errors.Refused, requests.exceptions.ConnectTimeout):
    """dns_timeout / upstream_timeout, as a requests.ConnectTimeout."""

    def __init__(self, reason, detail="", url=None, verdict=None, request=None):
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self.request = request
        self.response = None


class ProxyRefused(errors.ProxyRefused, requests.exceptions.ProxyError):
    def __init__(self, detail, url=None):
        errors.ProxyRefused.__init__(self, detail, url=url)
        self.request = None
        self.response = None


def _requests_refusal(e, request=None):
    cls = RefusedTimeout if e.reason in _TIMEOUT_REASONS else Refused
    return cls(e.reason, e.detail, url=e.url, verdict=e.verdict, request=request)


class _GuardedConnectionMixin:
    """urllib3's connection with the socket opened by the guard. The plain
    pinhole.Refused it raises is not an OSError, so urllib3 neither retries
    nor wraps it; the adapter turns it into its requests flavour."""

    _pinhole = None  # (guard, list, stagger_ms), set on the per-adapter subclass

    def _new_conn(self):
        guard, lst, stagger_ms = self._pinhole
        timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
        sock = guard.dial_authority_with_result(self.host, self.port, lst, timeout,
                                                stagger_ms)[0]
        try:
            for opt in self.socket_options or ():
                sock.setsockopt(*opt)
        except OSError:
            sock.close()
            raise
        return sock


def _classes(guard, lst, stagger_ms):
    pin = (guard, lst, stagger_ms)
    conn = type("GuardedHTTPConnection", (_GuardedConnectionMixin, HTTPConnection),
                {"_pinhole": pin})
    sconn = type("GuardedHTTPSConnection", (_GuardedConnectionMixin, HTTPSConnection),
                 {"_pinhole": pin})
    pool = type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": conn})
    spool = type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": sconn})
    return {"http": pool, "https": spool}


class GuardedAdapter(requests.adapters.HTTPAdapter):
    """A requests transport adapter whose every connection and redirect hop
    goes through guard for list.

    follow_redirects (default True), max_redirects (0: libpinhole's
    default, 10), allow_downgrade (follow https -> http), stagger_ms (RFC
    8305 attempt delay, 0: 250 ms); other keyword arguments as
    requests.adapters.HTTPAdapter (pool_connections, pool_maxsize, ...;
    max_retries applies to reads only: a refused dial is never retried).
    """

    def __init__(self, guard, list="default", *, follow_redirects=True, max_redirects=0,
                 allow_downgrade=False, stagger_ms=0, **kwargs):
        self.guard, self.list = guard, list
        self.follow_redirects, self.max_redirects = follow_redirects, max_redirects
        self.allow_downgrade, self.stagger_ms = allow_downgrade, stagger_ms
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _classes(self.guard, self.list,
                                                           self.stagger_ms)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        raise ProxyRefused("a proxy (%s) would bypass the guard" % proxy)

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        proxy = requests.utils.select_proxy(request.url, proxies or {})
        if proxy:
            raise ProxyRefused("requests would send %s through the proxy %s (trust_env and "
                               "the environment, or proxies=): the guard cannot check what a "
                               "proxy dials" % (request.url, proxy), url=request.url)
        first = request
        history = []
        while True:
            v = self.guard.check_url(request.url, self.list)
            if not v.allowed:
                raise _requests_refusal(errors.Refused(v.reason, v.detail, url=request.url,
                                                       verdict=v), request)
            try:
                response = super().send(request, stream=stream, timeout=timeout,
                                        verify=verify, cert=cert, proxies=None)
            except errors.Refused as e:
                raise _requests_refusal(e, request) from None
            nxt = self._next_request(request, response, len(history))
            if nxt is None:
                break
            response.content  # noqa: B018 - read the body so the connection is reused
            response.close()
            history.append(response)
            request = nxt
        response.history = history
        if history and _origin(first.url) != _origin(request.url):
            _drop_set_cookie(response)
        return response

    def _next_request(self, request, response, hop):
        if not self.follow_redirects or response.status_code not in \
                _redirect.REDIRECT_STATUSES or "location" not in response.headers:
            return None
        # http.client decoded the header as Latin-1: these are its bytes.
        location = response.headers["location"].encode("latin-1", "replace")
        try:
            d = self.guard.redirect_check(request.url, location, hop, self.list,
                                          self.max_redirects, self.allow_downgrade)
        except errors.Refused as e:
            response.close()
            raise _requests_refusal(e, request) from None
        nxt = request.copy()
        nxt.url = d.url
        nxt.method = _redirect.next_method(response.status_code, request.method)
        nxt.headers.pop("Host", None)
        if d.drop_credentials:
            for h in _redirect.CREDENTIAL_HEADERS:
                nxt.headers.pop(h, None)
        if nxt.method != request.method and nxt.method == "GET":
            for h in _redirect.BODY_HEADERS:
                nxt.headers.pop(h, None)
            nxt.body = None
        return nxt


def _origin(url):
    u = urlsplit(url)
    return _redirect.origin(u.scheme, u.hostname or "",
                            u.port or (443 if u.scheme == "https" else 80))


def _drop_set_cookie(response):
    """The Session stores Set-Cookie for the first request's URL: a final
    response from another origin must not set cookies for it."""
    response.headers.pop("set-cookie", None)
    raw = response.raw
    if raw is not None:
        raw.headers.discard("set-cookie")
        original = getattr(raw, "_original_response", None)
        if original is not None:
            del original.msg["set-cookie"]


class Session(requests.Session):
    """A requests.Session with GuardedAdapter(guard, list, **adapter_options)
    mounted for http:// and https:// (and nothing else). trust_env is False;
    set it True and a proxy variable in the environment makes every request
    raise ProxyRefused."""

    def __init__(self, guard, list="default", **adapter_options):
        super().__init__()
        self.trust_env = False
        self.adapters.clear()
        adapter = GuardedAdapter(guard, list, **adapter_options)
        self.mount("https://", adapter)
        self.mount("http://", adapter)
