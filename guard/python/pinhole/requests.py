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
Guard.redirect_check and dialed anew; when the origin changes only the
headers of libpinhole's short list follow, the body only when asked for
(redirect_body_cross_origin), and from then on to the end of the chain
the client certificate (cert=) is not presented, not even back on the
first origin (response.history holds the hops; the Session never sees a 3xx,
so allow_redirects does not matter); Set-Cookie of the intermediate hops,
and of a final response when the chain left the request's origin on the
way, removed.
A redirect's body is read up to 64 KiB, its connection closed beyond; one
deadline (total_timeout, default 30 s) covers every hop up to the final
response's head: each hop's timeouts are capped by what is left of it.

An existing Session: guard_session(session, guard, list) mounts the adapter
on both http:// and https:// and refuses a session with a longer prefix
mounted (requests picks the longest matching prefix: a mount on
"http://internal/" would bypass the guard).

Proxies: requests hands the adapter the proxies it would use (from
trust_env and the environment, or proxies=); any proxy for the URL raises
ProxyRefused before anything is sent. The adapter never opens a proxy
connection.

Refusals raise Refused (connection-time reasons) or RefusedTimeout
(dns_timeout, upstream_timeout): pinhole.Refused with .reason, and
requests.ConnectionError / requests.ConnectTimeout.
"""
from __future__ import annotations

import socket
import threading
import time
from typing import Any, Optional, Union
from urllib.parse import urlsplit

import requests
import requests.adapters
import requests.utils
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from . import _redirect
from . import errors
from .guard import Guard, Verdict

__all__ = ["GuardedAdapter", "ProxyRefused", "Refused", "RefusedTimeout", "Session",
           "guard_session"]

_TIMEOUT_REASONS = ("dns_timeout", "upstream_timeout")


class Refused(errors.Refused, requests.exceptions.ConnectionError):
    """A refusal, as a requests.ConnectionError with the guard's .reason."""

    def __init__(self, reason: str, detail: str = "", url: Optional[str] = None,
                 verdict: Optional[Verdict] = None, request: Any = None) -> None:
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self.request = request
        self.response = None


class RefusedTimeout(errors.Refused, requests.exceptions.ConnectTimeout):
    """dns_timeout / upstream_timeout, as a requests.ConnectTimeout."""

    def __init__(self, reason: str, detail: str = "", url: Optional[str] = None,
                 verdict: Optional[Verdict] = None, request: Any = None) -> None:
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self.request = request
        self.response = None


class ProxyRefused(errors.ProxyRefused, requests.exceptions.ProxyError):
    def __init__(self, detail: str, url: Optional[str] = None) -> None:
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


# The chain the adapter is following on this thread: {"deadline":
# monotonic seconds, "cut": True once a connection was shut down at it}.
_chain = threading.local()


class _DeadlinePoolMixin:
    """urllib3's pool with each request up to its response head ended at
    the chain's deadline: urllib3's timeouts bound each read, so a head
    trickled a line at a time would outlast them; at the deadline the
    connection's socket is shut down and the read fails (or ends: http.client
    takes an end of file among the headers for their end, so the adapter
    refuses a response whose connection was cut)."""

    def _make_request(self, conn, *args, **kwargs):
        state = getattr(_chain, "state", None)
        if state is None:
            return super()._make_request(conn, *args, **kwargs)
        lock = threading.Lock()
        done = [False]

        def cut():
            with lock:
                sock = None if done[0] else getattr(conn, "sock", None)
                if sock is not None:
                    state["cut"] = True
                    try:  # the descriptor's, past any TLS layer
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)
                    except OSError:
                        pass
        timer = threading.Timer(max(state["deadline"] - time.monotonic(), 0.0), cut)
        timer.daemon = True
        timer.start()
        try:
            return super()._make_request(conn, *args, **kwargs)
        finally:
            with lock:
                done[0] = True
            timer.cancel()


def _classes(guard, lst, stagger_ms):
    pin = (guard, lst, stagger_ms)
    conn = type("GuardedHTTPConnection", (_GuardedConnectionMixin, HTTPConnection),
                {"_pinhole": pin})
    sconn = type("GuardedHTTPSConnection", (_GuardedConnectionMixin, HTTPSConnection),
                 {"_pinhole": pin})
    pool = type("GuardedHTTPConnectionPool", (_DeadlinePoolMixin, HTTPConnectionPool),
                {"ConnectionCls": conn})
    spool = type("GuardedHTTPSConnectionPool", (_DeadlinePoolMixin, HTTPSConnectionPool),
                 {"ConnectionCls": sconn})
    return {"http": pool, "https": spool}


class GuardedAdapter(requests.adapters.HTTPAdapter):
    """A requests transport adapter whose every connection and redirect hop
    goes through guard for list.

    follow_redirects (default True), max_redirects (0: libpinhole's
    default, 10), allow_downgrade (follow https -> http),
    allow_body_cross_origin (let a 307/308 re-send the body to another
    origin; per request: set pinhole_allow_body_cross_origin = True on the
    PreparedRequest), total_timeout (seconds for every hop up to the final
    response's head; None: 30 s), stagger_ms (RFC 8305 attempt delay, 0:
    250 ms); other keyword arguments as requests.adapters.HTTPAdapter
    (pool_connections, pool_maxsize, ...; max_retries applies to reads
    only: a refused dial is never retried).
    """

    def __init__(self, guard: Guard, list: str = "default", *, follow_redirects: bool = True,
                 max_redirects: int = 0, allow_downgrade: bool = False, stagger_ms: int = 0,
                 allow_body_cross_origin: bool = False, total_timeout: Optional[float] = None,
                 **kwargs: Any) -> None:
        self.guard, self.list = guard, list
        self.follow_redirects, self.max_redirects = follow_redirects, max_redirects
        self.allow_downgrade, self.stagger_ms = allow_downgrade, stagger_ms
        self.allow_body_cross_origin = allow_body_cross_origin
        if total_timeout is not None and total_timeout <= 0:
            raise ValueError("total_timeout must be positive seconds")
        self.total_timeout = _redirect.DEFAULT_TOTAL_TIMEOUT if total_timeout is None \
            else float(total_timeout)
        self._options = kwargs
        self._nocert_adapter: Optional[GuardedAdapter] = None
        self._nocert_lock = threading.Lock()
        super().__init__(**kwargs)

    def _nocert(self) -> "GuardedAdapter":
        """The adapter whose pools serve the hops after the chain left its
        first origin: the same guarded connections, never a client
        certificate (made at the first such hop)."""
        with self._nocert_lock:
            if self._nocert_adapter is None:
                self._nocert_adapter = GuardedAdapter(self.guard, self.list,
                                                      stagger_ms=self.stagger_ms,
                                                      **self._options)
            return self._nocert_adapter

    def close(self) -> None:
        super().close()
        if self._nocert_adapter is not None:
            self._nocert_adapter.close()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _classes(self.guard, self.list,
                                                           self.stagger_ms)

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        raise ProxyRefused("a proxy (%s) would bypass the guard" % proxy)

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Union[bool, str] = True, cert: Any = None,
             proxies: Optional[dict] = None) -> requests.Response:
        proxy = requests.utils.select_proxy(request.url, proxies or {})
        if proxy:
            raise ProxyRefused("requests would send %s through the proxy %s (trust_env and "
                               "the environment, or proxies=): the guard cannot check what a "
                               "proxy dials" % (request.url, proxy), url=request.url)
        first = request
        first_origin = _origin(first.url)
        allow_body = getattr(first, "pinhole_allow_body_cross_origin",
                             self.allow_body_cross_origin)
        deadline = time.monotonic() + self.total_timeout
        history = []
        left = False  # a hop was on another origin than the first
        while True:
            v = self.guard.check_url(request.url, self.list)
            if not v.allowed:
                raise _requests_refusal(errors.Refused(v.reason, v.detail, url=request.url,
                                                       verdict=v), request)
            # The client certificate is for the request's origin, on the
            # hops before the chain first leaves it. requests sets a
            # certificate on a connection pool and never clears it, and
            # keeps connections alive: every later hop goes through pools
            # of their own that never had one (A -> B -> A included).
            left = left or _origin(request.url) != first_origin
            sender = self._nocert() if left else self
            state = _chain.state = {"deadline": deadline, "cut": False}
            try:
                response = requests.adapters.HTTPAdapter.send(
                    sender, request, stream=True, timeout=_capped(timeout, deadline, request),
                    verify=verify, cert=None if left else cert, proxies=None)
            except errors.Refused as e:
                raise _requests_refusal(e, request) from None
            except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as e:
                raise _deadline_refusal(deadline, request, self.total_timeout) or e
            finally:
                _chain.state = None
            if state["cut"]:
                response.close()
                raise _deadline_refusal(deadline, request, self.total_timeout, passed=True)
            nxt = self._next_request(request, response, len(history), allow_body)
            if nxt is None:
                break
            try:
                _discard(response, deadline)
            except requests.exceptions.Timeout as e:
                raise _deadline_refusal(deadline, request, self.total_timeout) or e
            # Cookies of an intermediate hop are not kept (the Session would
            # store them from response.history).
            _drop_set_cookie(response)
            history.append(response)
            request = nxt
        response.history = history
        if left:
            _drop_set_cookie(response)
        if history and first_origin != _origin(request.url):
            # requests' auth handlers and response hooks re-send
            # response.request (a Digest answer to a 401, for one): the
            # first request, so a retry starts at the first origin again
            # and its credentials are dropped where the chain leaves it.
            response.request = first
        return response

    def _next_request(self, request, response, hop, allow_body):
        if not self.follow_redirects or response.status_code not in \
                _redirect.REDIRECT_STATUSES or "location" not in response.headers:
            return None
        # http.client decoded the header as Latin-1: these are its bytes.
        location = response.headers["location"].encode("latin-1", "replace")
        method = _redirect.next_method(response.status_code, request.method)
        resend = method == request.method and request.body is not None and \
            request.body != b"" and request.body != ""
        try:
            d = self.guard.redirect_check(request.url, location, hop, self.list,
                                          self.max_redirects, self.allow_downgrade, resend,
                                          bool(allow_body))
        except errors.Refused as e:
            response.close()
            raise _requests_refusal(e, request) from None
        nxt = request.copy()
        nxt.url = d.url
        nxt.method = method
        for name in _redirect.dropped_headers(list(nxt.headers.keys()), d.same_origin, resend):
            nxt.headers.pop(name, None)
        nxt.headers.pop("Host", None)
        if not resend:
            nxt.body = None
        return nxt


def _capped(timeout, deadline, request):
    """requests' timeout (None, seconds, or (connect, read)) with each part
    capped by what is left before the deadline."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise RefusedTimeout("upstream_timeout", "the guarded request's deadline passed",
                             url=request.url, request=request)
    if isinstance(timeout, tuple):
        return tuple(left if t is None else min(float(t), left) for t in timeout)
    if timeout is None:
        return left
    if isinstance(timeout, (int, float)):
        return min(float(timeout), left)
    return timeout  # an urllib3 Timeout: the caller's own


def _deadline_refusal(deadline, request, total, passed=False):
    if passed or deadline - time.monotonic() < 0.05:
        return RefusedTimeout("upstream_timeout", "the guarded request's deadline (%gs, every "
                              "redirect hop) passed" % total, url=request.url, request=request)
    return None


def _discard(response, deadline):
    """Reads at most BODY_DISCARD_MAX of a redirect's body, each read
    bounded by the deadline, then closes the response; a body not read to
    its end closes its connection rather than return it to the pool."""
    raw = response.raw
    fp = getattr(raw, "_fp", None)  # http.client.HTTPResponse: read1 returns what is there
    conn = getattr(raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    n = 0
    complete = False
    try:
        while n <= _redirect.BODY_DISCARD_MAX:
            left = deadline - time.monotonic()
            if left <= 0:
                raise requests.exceptions.ReadTimeout("the guarded request's deadline passed")
            if sock is not None:
                sock.settimeout(left)
            try:
                chunk = fp.read1(8192) if fp is not None else raw.read(8192)
            except OSError as e:  # socket.timeout included
                raise requests.exceptions.ReadTimeout(str(e)) from None
            if not chunk or (fp is not None and fp.length == 0):
                complete = True
                if fp is not None:
                    fp.close()  # read to its end: the connection may be reused
                break
            n += len(chunk)
    finally:
        response._content, response._content_consumed = b"", True  # noqa: SLF001
        if not complete:
            raw.close()  # closes the connection too
        response.close()


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


def guard_session(session: requests.Session, guard: Guard, list: str = "default",
                  **adapter_options: Any) -> GuardedAdapter:
    """Mounts GuardedAdapter(guard, list, **adapter_options) on http:// and
    https:// of an existing requests.Session and returns the adapter.
    requests sends a URL to the adapter of the longest matching prefix, so
    a session with any other prefix mounted for http or https (e.g.
    "http://internal/") would send some URLs around the guard: refused
    with ProxyRefused, nothing mounted. Prefixes of other schemes are
    left alone (requests has no adapter for them that dials)."""
    for prefix, adapter in session.adapters.items():
        low = prefix.lower()
        if low.startswith(("http://", "https://")) and low not in ("http://", "https://") \
                and not isinstance(adapter, GuardedAdapter):
            raise ProxyRefused("the session has %r mounted (%s): requests would send those "
                               "URLs around the guard" % (prefix, type(adapter).__name__))
    adapter = GuardedAdapter(guard, list, **adapter_options)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return adapter


class Session(requests.Session):
    """A requests.Session with GuardedAdapter(guard, list, **adapter_options)
    mounted for http:// and https:// (and nothing else). trust_env is False;
    set it True and a proxy variable in the environment makes every request
    raise ProxyRefused."""

    def __init__(self, guard: Guard, list: str = "default", **adapter_options: Any) -> None:
        super().__init__()
        self.trust_env = False
        self.adapters.clear()
        adapter = GuardedAdapter(guard, list, **adapter_options)
        self.mount("https://", adapter)
        self.mount("http://", adapter)
