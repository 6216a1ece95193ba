"""httpx through the guard: GuardedTransport (sync), AsyncGuardedTransport
(asyncio), and Client / AsyncClient, httpx clients built around them.

    import pinhole, pinhole.httpx
    guard = pinhole.Guard("/etc/pinhole/allowlist.ptab")
    with pinhole.httpx.Client(guard, "mcp") as client:
        client.get("https://mcp.example.com/mcp")

What the transport guarantees, for every request it is handed:
  - the URL is checked against the list before anything is sent;
  - every connection is opened by Guard.dial_authority (ph_dial_authority):
    the host is resolved by the guard, every address checked, and only a
    checked address is connected to; httpcore does no DNS lookup of its own.
    TLS still verifies the certificate against the host name (SNI and
    check_hostname), never the address;
  - redirects are followed here, not by the client: each Location is
    decided by Guard.redirect_check (hop limit, no https->http downgrade,
    the target checked against the list, a body to another origin only
    when asked for) and dialed anew. When the origin changes only the
    headers of libpinhole's short list follow (Accept, Accept-Encoding,
    Accept-Language, User-Agent; a body's own headers with the body), and
    from then on to the end of the chain a TLS client certificate (cert=)
    is not presented, not even back on the first origin. The client never
    sees a 3xx, so its own follow_redirects does not matter. The hops are
    in response.extensions["pinhole_redirects"] (a list of (status, url)),
    the URL that answered in response.extensions["pinhole_url"] (httpx
    keeps the first URL in response.url). Set-Cookie of a final response
    is removed when the chain left the request's origin on the way (the
    client would store it for the first origin); cookies of intermediate
    hops are not kept;
  - a redirect's body is read up to 64 KiB and its connection closed
    beyond; one deadline (total_timeout, default 30 s; per request the
    extension "pinhole_total_timeout") covers every hop up to the final
    response's head: upstream_timeout when it passes;
  - it never routes through a proxy.

Proxies: a transport cannot see whether the client sends a request to it
at all. httpx reads proxy variables from the environment (trust_env) only
when the client is built without transport=, so a client around the
guarded transport never uses them; proxies= or mounts= would still route
requests elsewhere. Client and AsyncClient refuse those (ProxyRefused, at
construction and again per request); check_client(client) checks any httpx
client the same way.

Refusals raise Refused (connection-time reasons) or RefusedTimeout
(dns_timeout, upstream_timeout); both are pinhole.Refused (with .reason) and
httpx.ConnectError / httpx.ConnectTimeout.

The async transport needs asyncio (it wraps the guard's socket in asyncio
streams). Its dials hold no thread (Guard.dial_authority_async): the
guard's resolver is driven by the event loop and the checked addresses are
connected to with non-blocking sockets, so unreachable tenant URLs, however
many and under however many names, delay nothing else the loop or the
process runs. What bounds the dials one client has in flight is its
connection limit (limits=, httpx's max_connections, 100 here): give each
tenant its own client, so one tenant's slow servers fill only its own.
"""
from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any, Dict, Optional, Union

import httpcore
import httpx

from . import _redirect
from . import errors
from .guard import Guard, Verdict

try:  # httpcore 0.16/0.17
    from httpcore.backends.base import AsyncNetworkBackend, AsyncNetworkStream, NetworkBackend
    from httpcore.backends.sync import SyncStream
except ImportError:  # httpcore >= 0.18
    from httpcore._backends.base import AsyncNetworkBackend, AsyncNetworkStream, NetworkBackend
    from httpcore._backends.sync import SyncStream

try:
    from httpcore._utils import is_socket_readable
except ImportError:  # pragma: no cover
    def is_socket_readable(sock):
        import select
        if sock is None:
            return True
        p = select.poll()
        p.register(sock, select.POLLIN)
        return bool(p.poll(0))

__all__ = ["AsyncClient", "AsyncGuardedTransport", "Client", "GuardedTransport", "Refused",
           "RefusedTimeout", "check_client"]

_TIMEOUT_REASONS = ("dns_timeout", "upstream_timeout")


class Refused(errors.Refused, httpx.ConnectError):
    """A refusal, as an httpx.ConnectError with the guard's .reason."""

    def __init__(self, reason: str, detail: str = "", url: Optional[str] = None,
                 verdict: Optional[Verdict] = None, request: Any = None) -> None:
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self._request = request


class RefusedTimeout(errors.Refused, httpx.ConnectTimeout):
    """dns_timeout / upstream_timeout, as an httpx.ConnectTimeout."""

    def __init__(self, reason: str, detail: str = "", url: Optional[str] = None,
                 verdict: Optional[Verdict] = None, request: Any = None) -> None:
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self._request = request


class ProxyRefused(errors.ProxyRefused, httpx.ProxyError):
    """The client would send a request through a proxy."""

    def __init__(self, detail: str, url: Optional[str] = None) -> None:
        errors.ProxyRefused.__init__(self, detail, url=url)
        self._request = None


def _httpx_refusal(e, request=None):
    cls = RefusedTimeout if e.reason in _TIMEOUT_REASONS else Refused
    return cls(e.reason, e.detail, url=e.url, verdict=e.verdict, request=request)


def _hop_timeout(timeout, exc):
    """timeout capped by the guarded request's deadline; exc when it passed."""
    try:
        return _redirect.clamp(timeout)
    except TimeoutError:
        raise exc("the guarded request's deadline passed") from None


def _connect_timeout(timeout):
    try:
        return _redirect.clamp(timeout)
    except TimeoutError:
        raise RefusedTimeout("upstream_timeout", "the guarded request's deadline passed "
                             "before the connection") from None


class _DeadlineStream(SyncStream):
    """httpcore's sync stream, each read and write capped by the deadline."""

    def read(self, max_bytes, timeout=None):
        return super().read(max_bytes, _hop_timeout(timeout, httpcore.ReadTimeout))

    def write(self, buffer, timeout=None):
        return super().write(buffer, _hop_timeout(timeout, httpcore.WriteTimeout))

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        tls = super().start_tls(ssl_context, server_hostname,
                                _hop_timeout(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls._sock)  # noqa: SLF001


class _GuardBackend(NetworkBackend):
    """httpcore's network backend: every TCP connection through the guard."""

    def __init__(self, guard, list, stagger_ms):
        self._guard, self._list, self._stagger_ms = guard, list, stagger_ms

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        """A stream over a connected (blocking) socket to a checked address
        of host."""
        if local_address is not None:
            raise Refused("parse_error", "a local address is not supported through the guard")
        try:
            sock = self._guard.dial_authority_with_result(host, port, self._list,
                                                          _connect_timeout(timeout),
                                                          self._stagger_ms)[0]
        except errors.Refused as e:
            raise _httpx_refusal(e) from None
        try:
            for opt in socket_options or ():
                sock.setsockopt(*opt)
        except OSError:
            sock.close()
            raise
        return _DeadlineStream(sock)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Refused("parse_error", "unix sockets are not dialed through the guard")


class _AsyncSocketStream(AsyncNetworkStream):
    """An httpcore stream over asyncio streams around a connected socket."""

    def __init__(self, reader, writer):
        self._reader, self._writer = reader, writer

    @classmethod
    async def open(cls, sock):
        reader, writer = await asyncio.open_connection(sock=sock)
        return cls(reader, writer)

    async def read(self, max_bytes, timeout=None):
        timeout = _hop_timeout(timeout, httpcore.ReadTimeout)
        try:
            return await asyncio.wait_for(self._reader.read(max_bytes), timeout)
        except asyncio.TimeoutError:
            raise httpcore.ReadTimeout("read timed out") from None
        except (OSError, ssl.SSLError) as e:
            raise httpcore.ReadError(str(e)) from e

    async def write(self, buffer, timeout=None):
        if not buffer:
            return
        timeout = _hop_timeout(timeout, httpcore.WriteTimeout)
        try:
            self._writer.write(buffer)
            await asyncio.wait_for(self._writer.drain(), timeout)
        except asyncio.TimeoutError:
            raise httpcore.WriteTimeout("write timed out") from None
        except (OSError, ssl.SSLError) as e:
            raise httpcore.WriteError(str(e)) from e

    async def aclose(self):
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (OSError, ssl.SSLError):
            pass

    async def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        timeout = _hop_timeout(timeout, httpcore.ConnectTimeout)
        try:
            await asyncio.wait_for(
                self._writer.start_tls(ssl_context, server_hostname=server_hostname), timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except (OSError, ssl.SSLError) as e:
            await self.aclose()
            raise httpcore.ConnectError(str(e)) from e
        return self

    def get_extra_info(self, info):
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            if self._reader.at_eof() or self._reader._buffer:  # noqa: SLF001
                return True
            return is_socket_readable(self._writer.get_extra_info("socket"))
        return None


class _AsyncGuardBackend(AsyncNetworkBackend):
    """httpcore's asyncio network backend: every TCP connection through the
    guard's loop-driven dial (Guard.dial_authority_async), no thread held."""

    def __init__(self, guard, list, stagger_ms):
        self._guard, self._list, self._stagger_ms = guard, list, stagger_ms

    async def connect_tcp(self, host, port, timeout=None, local_address=None,
                          socket_options=None):
        if local_address is not None:
            raise Refused("parse_error", "a local address is not supported through the guard")
        try:
            sock = await self._guard.dial_authority_async(host, port, self._list,
                                                          _connect_timeout(timeout),
                                                          self._stagger_ms)
        except errors.Refused as e:
            raise _httpx_refusal(e) from None
        try:
            for opt in socket_options or ():
                sock.setsockopt(*opt)
            return await _AsyncSocketStream.open(sock)
        except BaseException:
            sock.close()
            raise

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Refused("parse_error", "unix sockets are not dialed through the guard")

    async def sleep(self, seconds):
        await asyncio.sleep(seconds)


_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


class _Guarded:
    """What both transports share: the options, and httpcore's pool (which
    the httpx base class built with the default network backend) replaced
    by one whose every connection is dialed by the guard. With a client
    certificate, a second transport without it serves every hop on another
    origin than the request's."""

    _pool_class: Any = None
    _backend_class: Any = None

    def __init__(self, guard: Guard, list: str = "default", *, verify: Any = True,
                 cert: Any = None, http1: bool = True, http2: bool = False,
                 limits: httpx.Limits = _LIMITS, retries: int = 0,
                 follow_redirects: bool = True, max_redirects: int = 0,
                 allow_downgrade: bool = False, stagger_ms: int = 0,
                 allow_body_cross_origin: bool = False,
                 total_timeout: Optional[float] = None) -> None:
        super().__init__(verify=verify, cert=cert, http1=http1, http2=http2,  # type: ignore
                         limits=limits, trust_env=False)
        self.guard, self.list = guard, list
        self.follow_redirects, self.max_redirects = follow_redirects, max_redirects
        self.allow_downgrade = allow_downgrade
        self.allow_body_cross_origin = allow_body_cross_origin
        if total_timeout is not None and total_timeout <= 0:
            raise ValueError("total_timeout must be positive seconds")
        self.total_timeout = _redirect.DEFAULT_TOTAL_TIMEOUT if total_timeout is None \
            else float(total_timeout)
        self._nocert = None
        if cert is not None:
            self._nocert = type(self)(guard, list, verify=verify, cert=None, http1=http1,
                                      http2=http2, limits=limits, retries=retries,
                                      follow_redirects=False, stagger_ms=stagger_ms)
        self._pool = self._pool_class(
            network_backend=self._backend_class(guard, list, stagger_ms),
            ssl_context=httpx.create_ssl_context(verify=verify, cert=cert, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, http1=http1, http2=http2,
            retries=retries)


def _origin_of(url):
    return _redirect.origin(url.scheme, url.host, url.port or (443 if url.scheme == "https"
                                                                else 80))


def _has_body(request):
    h = request.headers
    return h.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in h


class _Hops:
    """The redirect loop both transports run: the deadline, the check
    before each hop, the guard's decision on each Location, the next
    request."""

    def __init__(self, transport, request):
        self.t = transport
        self.first = request
        self.first_origin = _origin_of(request.url)
        self.hops = []
        self.left = False  # a hop was on another origin than the first
        total = request.extensions.get("pinhole_total_timeout", transport.total_timeout)
        self.total = float(total)
        self.token = _redirect.deadline_var.set(time.monotonic() + self.total)

    def done(self):
        _redirect.deadline_var.reset(self.token)

    def capped(self, request):
        """request with every httpx timeout (connect, read, write, pool)
        capped by what is left of the deadline; upstream_timeout when none
        is left."""
        left = _redirect.time_left()
        if left is None:
            return request
        if left <= 0:
            raise RefusedTimeout("upstream_timeout", "the guarded request's deadline (%gs, "
                                 "every redirect hop) passed" % self.total,
                                 url=str(request.url), request=request)
        t = dict(request.extensions.get("timeout") or {})
        for k in ("connect", "read", "write", "pool"):
            t[k] = left if t.get(k) is None else min(float(t[k]), left)
        request.extensions = dict(request.extensions, timeout=t)
        return request

    def sender(self, request):
        """The transport for this hop: without the client certificate from
        the first hop on another origin than the request's to the end of
        the chain (A -> B -> A presents it on the first hop only)."""
        if _origin_of(request.url) != self.first_origin:
            self.left = True
        if self.t._nocert is not None and self.left:
            return self.t._nocert
        return self.t

    def timed_out(self, request, e):
        """e (an httpx timeout) as upstream_timeout when the deadline passed."""
        left = _redirect.time_left()
        if left is not None and left < 0.05:
            return RefusedTimeout("upstream_timeout", "the guarded request's deadline (%gs, "
                                  "every redirect hop) passed: %s" % (self.total, e),
                                  url=str(request.url), request=request)
        return None

    def check(self, request):
        url = str(request.url)
        v = self.t.guard.check_url(url, self.t.list)
        if not v.allowed:
            raise _httpx_refusal(errors.Refused(v.reason, v.detail, url=url, verdict=v), request)

    def next_request(self, request, response):
        """The request for the next hop, or None when response is final."""
        if not self.t.follow_redirects or response.status_code not in \
                _redirect.REDIRECT_STATUSES:
            return None
        # The header's bytes as received (httpx would decode them).
        location = next((v for k, v in response.headers.raw if k.lower() == b"location"), None)
        if location is None:
            return None
        method = _redirect.next_method(response.status_code, request.method)
        resend = method == request.method and _has_body(request)
        allow_body = request.extensions.get("pinhole_allow_body_cross_origin",
                                            self.t.allow_body_cross_origin)
        try:
            d = self.t.guard.redirect_check(str(request.url), location, len(self.hops),
                                            self.t.list, self.t.max_redirects,
                                            self.t.allow_downgrade, resend, bool(allow_body))
        except errors.Refused as e:
            raise _httpx_refusal(e, request) from None
        target = httpx.URL(d.url)
        headers = httpx.Headers(request.headers)
        for name in _redirect.dropped_headers(list(headers.keys()), d.same_origin, resend):
            del headers[name]
        headers["Host"] = target.netloc.decode("ascii")
        self.hops.append((response.status_code, str(request.url)))
        if not resend:
            return httpx.Request(method, target, headers=headers, extensions=request.extensions)
        return httpx.Request(method, target, headers=headers, stream=request.stream,
                             extensions=request.extensions)

    def finish(self, request, response):
        response.extensions = dict(response.extensions)
        response.extensions["pinhole_redirects"] = list(self.hops)
        response.extensions["pinhole_url"] = str(request.url)
        if self.left:
            while "set-cookie" in response.headers:
                del response.headers["set-cookie"]
        return response


_TRANSPORT_DOC = """
    follow_redirects: follow redirects here (default True; False returns the
      3xx, and a client following it sends the next hop here, checked but
      without the guard's origin rules: keep the default).
    max_redirects: hop limit (0: libpinhole's default, 10).
    allow_downgrade: follow https -> http.
    allow_body_cross_origin: let a 307/308 re-send the request body to
      another origin (default False: redirect_body_cross_origin); per
      request, the extension "pinhole_allow_body_cross_origin".
    total_timeout: seconds for the whole request, every hop up to the final
      response's head (None: 30 s); per request, the extension
      "pinhole_total_timeout".
    stagger_ms: RFC 8305 attempt delay between addresses (0: 250 ms).
    verify, cert, http1, http2, limits, retries: as httpx.HTTPTransport. A
      client certificate goes in cert= (then it is presented to the
      request's origin, on the hops before the chain first leaves it),
      never inside an SSLContext given as verify=.
"""


class GuardedTransport(_Guarded, httpx.HTTPTransport):
    _pool_class = httpcore.ConnectionPool
    _backend_class = _GuardBackend

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        hops = _Hops(self, request)
        try:
            while True:
                hops.check(request)
                try:
                    response = httpx.HTTPTransport.handle_request(hops.sender(request),
                                                                  hops.capped(request))
                except httpx.TimeoutException as e:
                    raise hops.timed_out(request, e) or e
                try:
                    nxt = hops.next_request(request, response)
                except BaseException:
                    response.close()  # a refused hop returns its connection to the pool
                    raise
                if nxt is None:
                    return hops.finish(request, response)
                try:
                    _discard(response)
                except httpx.TimeoutException as e:
                    raise hops.timed_out(request, e) or e
                request = nxt
        finally:
            hops.done()

    def close(self) -> None:
        super().close()
        if self._nocert is not None:
            self._nocert.close()


GuardedTransport.__doc__ = """A sync httpx transport whose every connection and
    redirect hop goes through guard for list (see the module's
    documentation).
""" + _TRANSPORT_DOC


def _discard(response):
    """Reads at most BODY_DISCARD_MAX of a redirect's body, then closes it
    (a response closed before its end closes its connection)."""
    n = 0
    try:
        for chunk in response.stream:
            n += len(chunk)
            if n > _redirect.BODY_DISCARD_MAX:
                break
    finally:
        response.close()


async def _adiscard(response):
    n = 0
    try:
        async for chunk in response.stream:
            n += len(chunk)
            if n > _redirect.BODY_DISCARD_MAX:
                break
    finally:
        await response.aclose()


class AsyncGuardedTransport(_Guarded, httpx.AsyncHTTPTransport):
    _pool_class = httpcore.AsyncConnectionPool
    _backend_class = _AsyncGuardBackend

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        hops = _Hops(self, request)
        try:
            while True:
                hops.check(request)
                try:
                    response = await httpx.AsyncHTTPTransport.handle_async_request(
                        hops.sender(request), hops.capped(request))
                except httpx.TimeoutException as e:
                    raise hops.timed_out(request, e) or e
                try:
                    nxt = hops.next_request(request, response)
                except BaseException:
                    await response.aclose()
                    raise
                if nxt is None:
                    return hops.finish(request, response)
                try:
                    await _adiscard(response)
                except httpx.TimeoutException as e:
                    raise hops.timed_out(request, e) or e
                request = nxt
        finally:
            hops.done()

    async def aclose(self) -> None:
        await super().aclose()
        if self._nocert is not None:
            await self._nocert.aclose()


AsyncGuardedTransport.__doc__ = """GuardedTransport for httpx.AsyncClient (asyncio).
""" + _TRANSPORT_DOC


_GUARDED = (GuardedTransport, AsyncGuardedTransport)


def check_client(client: Union[httpx.Client, httpx.AsyncClient]) -> None:
    """Raises ProxyRefused unless every request of client (httpx.Client or
    AsyncClient) goes to a guarded transport: no proxy mount (from
    trust_env and the environment, or proxies=/mounts=)."""
    if not isinstance(getattr(client, "_transport", None), _GUARDED):
        raise ProxyRefused("the client's transport is not a pinhole GuardedTransport")
    for pattern, transport in getattr(client, "_mounts", {}).items():
        if transport is not None and not isinstance(transport, _GUARDED):
            raise ProxyRefused("the client sends %s through a proxy or another transport "
                               "(trust_env with a proxy variable, proxies= or mounts=): the "
                               "guard cannot check what it dials" % pattern.pattern)


def _client_kwargs(kwargs):
    for k in ("proxies", "mounts", "transport", "app", "uds"):
        if kwargs.get(k) is not None:
            raise ProxyRefused("%s= is not allowed on a guarded client" % k)
    kwargs.setdefault("trust_env", False)
    return kwargs


class _GuardedClient:
    """What Client and AsyncClient share: the guarded transport as the only
    one, and the refusal of anything that would bypass it."""

    _transport_class = None

    def __init__(self, guard: Guard, list: str = "default", *,
                 transport_options: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        kwargs = _client_kwargs(kwargs)
        topts = dict(transport_options or {})
        for k in ("verify", "cert", "http1", "http2", "limits"):
            if k in kwargs:
                topts[k] = kwargs[k]
        super().__init__(transport=self._transport_class(guard, list, **topts), **kwargs)
        check_client(self)

    def _transport_for_url(self, url):
        t = super()._transport_for_url(url)
        if not isinstance(t, _GUARDED):
            raise ProxyRefused("%s would not go through the guard" % url, url=str(url))
        return t


class Client(_GuardedClient, httpx.Client):
    """An httpx.Client whose only transport is GuardedTransport(guard, list,
    **transport_options); verify, cert, http1, http2 and limits go to the
    transport. trust_env defaults to False (it would still read netrc and
    SSL_CERT_FILE). proxies=, mounts=, transport=, app= and uds= raise
    ProxyRefused, as does any request that would not reach the guarded
    transport."""

    _transport_class = GuardedTransport


class AsyncClient(_GuardedClient, httpx.AsyncClient):
    """Client for asyncio: an httpx.AsyncClient around AsyncGuardedTransport."""

    _transport_class = AsyncGuardedTransport
