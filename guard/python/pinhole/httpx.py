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
    the target checked against the list) and dialed anew;
    Authorization, Proxy-Authorization and Cookie are dropped when the
    origin changes. The client never sees a 3xx, so its own
    follow_redirects does not matter. The hops are in
    response.extensions["pinhole_redirects"] (a list of (status, url)), the
    URL that answered in response.extensions["pinhole_url"] (httpx keeps the
    first URL in response.url). Set-Cookie of a final response from another
    origin than the request's is removed (the client would store it for the
    first origin); cookies of intermediate hops are not kept;
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
streams; the blocking dial runs in the loop's default executor).
"""
import asyncio
import ssl

import httpcore
import httpx

from . import _redirect
from . import errors

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

    def __init__(self, reason, detail="", url=None, verdict=None, request=None):
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self._request = request


class RefusedTimeout(errors.Refused, httpx.ConnectTimeout):
    """dns_timeout / upstream_timeout, as an httpx.ConnectTimeout."""

    def __init__(self, reason, detail="", url=None, verdict=None, request=None):
        errors.Refused.__init__(self, reason, detail, url=url, verdict=verdict)
        self._request = request


class ProxyRefused(errors.ProxyRefused, httpx.ProxyError):
    """The client would send a request through a proxy."""

    def __init__(self, detail, url=None):
        errors.ProxyRefused.__init__(self, detail, url=url)
        self._request = None


def _httpx_refusal(e, request=None):
    cls = RefusedTimeout if e.reason in _TIMEOUT_REASONS else Refused
    return cls(e.reason, e.detail, url=e.url, verdict=e.verdict, request=request)


class _GuardBackend(NetworkBackend):
    """httpcore's network backend: every TCP connection through the guard."""

    def __init__(self, guard, list, stagger_ms):
        self._guard, self._list, self._stagger_ms = guard, list, stagger_ms

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        if local_address is not None:
            raise Refused("parse_error", "a local address is not supported through the guard")
        try:
            sock = self._guard.dial_authority_with_result(host, port, self._list, timeout,
                                                          self._stagger_ms)[0]
        except errors.Refused as e:
            raise _httpx_refusal(e) from None
        for opt in socket_options or ():
            sock.setsockopt(*opt)
        return SyncStream(sock)

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
        try:
            return await asyncio.wait_for(self._reader.read(max_bytes), timeout)
        except asyncio.TimeoutError:
            raise httpcore.ReadTimeout("read timed out") from None
        except (OSError, ssl.SSLError) as e:
            raise httpcore.ReadError(str(e)) from e

    async def write(self, buffer, timeout=None):
        if not buffer:
            return
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
    def __init__(self, guard, list, stagger_ms):
        self._sync = _GuardBackend(guard, list, stagger_ms)

    async def connect_tcp(self, host, port, timeout=None, local_address=None,
                          socket_options=None):
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, self._dial, host, port, timeout, local_address,
                                   socket_options)
        try:
            sock = await asyncio.shield(fut)
        except asyncio.CancelledError:
            # The dial finishes in its thread: close what it opens.
            fut.add_done_callback(lambda f: f.exception() is None and f.result().close())
            raise
        try:
            return await _AsyncSocketStream.open(sock)
        except BaseException:
            sock.close()
            raise

    def _dial(self, host, port, timeout, local_address, socket_options):
        return self._sync.connect_tcp(host, port, timeout, local_address,
                                      socket_options)._sock  # noqa: SLF001

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise Refused("parse_error", "unix sockets are not dialed through the guard")

    async def sleep(self, seconds):
        await asyncio.sleep(seconds)


_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


def _init_guarded(t, guard, lst, follow_redirects, max_redirects, allow_downgrade, stagger_ms,
                  verify, cert, http1, http2, limits, retries):
    """The guarded part of both transports: the options, and httpcore's pool
    (which the httpx base class built with the default network backend)
    replaced by one whose every connection is dialed by the guard."""
    t.guard, t.list = guard, lst
    t.follow_redirects, t.max_redirects = follow_redirects, max_redirects
    t.allow_downgrade = allow_downgrade
    t._pool = t._pool_class(
        network_backend=t._backend_class(guard, lst, stagger_ms),
        ssl_context=httpx.create_ssl_context(verify=verify, cert=cert, trust_env=False),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry, http1=http1, http2=http2, retries=retries)


class _Hops:
    """The redirect loop both transports run: the check before each hop, the
    guard's decision on each Location, the next request."""

    def __init__(self, transport, request):
        self.t = transport
        self.first = request
        self.hops = []

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
        try:
            d = self.t.guard.redirect_check(str(request.url), location, len(self.hops),
                                            self.t.list, self.t.max_redirects,
                                            self.t.allow_downgrade)
        except errors.Refused as e:
            raise _httpx_refusal(e, request) from None
        method = _redirect.next_method(response.status_code, request.method)
        target = httpx.URL(d.url)
        headers = httpx.Headers(request.headers)
        headers["Host"] = target.netloc.decode("ascii")
        if d.drop_credentials:
            for h in _redirect.CREDENTIAL_HEADERS:
                headers.pop(h, None)
        stream = request.stream
        if method != request.method and method == "GET":
            for h in _redirect.BODY_HEADERS:
                headers.pop(h, None)
            stream = None
        self.hops.append((response.status_code, str(request.url)))
        if stream is None:
            return httpx.Request(method, target, headers=headers, extensions=request.extensions)
        return httpx.Request(method, target, headers=headers, stream=stream,
                             extensions=request.extensions)

    def finish(self, request, response):
        response.extensions = dict(response.extensions)
        response.extensions["pinhole_redirects"] = list(self.hops)
        response.extensions["pinhole_url"] = str(request.url)
        a, b = self.first.url, request.url
        if self.hops and (a.scheme, a.host, a.port) != (b.scheme, b.host, b.port):
            while "set-cookie" in response.headers:
                del response.headers["set-cookie"]
        return response


class GuardedTransport(httpx.HTTPTransport):
    """A sync httpx transport whose every connection and redirect hop goes
    through guard for list (see the module's documentation).

    follow_redirects: follow redirects here (default True; False returns the
      3xx, and a client following it sends the next hop here, checked but
      without the guard's origin rules: keep the default).
    max_redirects: hop limit (0: libpinhole's default, 10).
    allow_downgrade: follow https -> http.
    stagger_ms: RFC 8305 attempt delay between addresses (0: 250 ms).
    verify, cert, http1, http2, limits, retries: as httpx.HTTPTransport.
    """

    _pool_class = httpcore.ConnectionPool
    _backend_class = _GuardBackend

    def __init__(self, guard, list="default", *, verify=True, cert=None, http1=True,
                 http2=False, limits=_LIMITS, retries=0, follow_redirects=True,
                 max_redirects=0, allow_downgrade=False, stagger_ms=0):
        super().__init__(verify=verify, cert=cert, http1=http1, http2=http2, limits=limits,
                         trust_env=False)
        _init_guarded(self, guard, list, follow_redirects, max_redirects, allow_downgrade,
                      stagger_ms, verify, cert, http1, http2, limits, retries)

    def handle_request(self, request):
        hops = _Hops(self, request)
        while True:
            hops.check(request)
            response = super().handle_request(request)
            try:
                nxt = hops.next_request(request, response)
            except BaseException:
                response.close()  # a refused hop returns its connection to the pool
                raise
            if nxt is None:
                return hops.finish(request, response)
            response.read()
            response.close()
            request = nxt


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    """GuardedTransport for httpx.AsyncClient (asyncio)."""

    _pool_class = httpcore.AsyncConnectionPool
    _backend_class = _AsyncGuardBackend

    def __init__(self, guard, list="default", *, verify=True, cert=None, http1=True,
                 http2=False, limits=_LIMITS, retries=0, follow_redirects=True,
                 max_redirects=0, allow_downgrade=False, stagger_ms=0):
        super().__init__(verify=verify, cert=cert, http1=http1, http2=http2, limits=limits,
                         trust_env=False)
        _init_guarded(self, guard, list, follow_redirects, max_redirects, allow_downgrade,
                      stagger_ms, verify, cert, http1, http2, limits, retries)

    async def handle_async_request(self, request):
        hops = _Hops(self, request)
        while True:
            hops.check(request)
            response = await super().handle_async_request(request)
            try:
                nxt = hops.next_request(request, response)
            except BaseException:
                await response.aclose()
                raise
            if nxt is None:
                return hops.finish(request, response)
            await response.aread()
            await response.aclose()
            request = nxt


_GUARDED = (GuardedTransport, AsyncGuardedTransport)


def check_client(client):
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

    def __init__(self, guard, list="default", *, transport_options=None, **kwargs):
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
