"""pinhole.Guard: the worker's decision object over libpinhole's ph_guard.

Thread safety: every method may be called from any number of threads at
once; the C guard is thread-safe and ctypes releases the GIL during each
call. The only Python-side state is the handle's in-flight count, guarded by
one lock, so close() waits for calls in flight instead of freeing the guard
under them.

Reload: with reload_interval_ms > 0 (default 1000) the guard looks at most
that often whether the table file was replaced (policyc compile renames the
new table into place) and switches to it; a table that fails to load leaves
the old one in force (reload_error() says why).
"""
from __future__ import annotations

import collections
import os
import ctypes
import socket
import struct
import threading
from typing import Any, List, Optional, Tuple, Union

from . import _lib
from .errors import GuardError, Refused

_Rule = collections.namedtuple("Rule", "list host file line reason index")


class Rule(_Rule):
    """The allowlist rule that allowed a URL: list, host as written
    ("*.example.com"), file and line of the policy source, the rule's reason
    text ("" when none) and its index in the table."""

    __slots__ = ()

    @property
    def location(self) -> str:
        return "%s:%d" % (self.file, self.line)


class Verdict:
    """The outcome of one check. allowed; reason (the stable code, "allowed"
    when allowed); host and port (canonical; "" and 0 when the URL did not
    parse); scheme ("http", "https", "" for an authority); rule (a Rule when
    one matched, else None); policy_id; detail (why it was refused).

    Holds its own copy of the C verdict and decodes the text fields when
    they are first read, so a caller that looks only at allowed and reason
    pays for nothing else."""

    __slots__ = ("allowed", "reason", "_c")

    def __init__(self, c: Any) -> None:
        self._c = c
        self.allowed = bool(c.allowed)
        self.reason = _lib.reason_code(c.reason)

    @property
    def scheme(self) -> str:
        return {1: "http", 2: "https"}.get(self._c.scheme, "")

    @property
    def host(self) -> str:
        return _lib.text(self._c.host)

    @property
    def port(self) -> int:
        return self._c.port

    @property
    def rule(self) -> Optional[Rule]:
        c = self._c
        if not c.has_rule:
            return None
        return Rule(_lib.text(c.rule_list), _lib.text(c.rule_host), _lib.text(c.rule_file),
                    c.rule_line, _lib.text(c.rule_reason), c.rule_index)

    @property
    def policy_id(self) -> str:
        return _lib.text(self._c.policy_id)

    @property
    def detail(self) -> str:
        return _lib.text(self._c.detail)

    @property
    def rule_location(self) -> Optional[str]:
        """"file:line" of the deciding rule, or None."""
        c = self._c
        return "%s:%d" % (_lib.text(c.rule_file), c.rule_line) if c.has_rule else None

    def __bool__(self) -> bool:
        return self.allowed

    def __repr__(self):
        if self.allowed:
            return "<Verdict allowed %s:%d rule=%s>" % (self.host, self.port, self.rule_location)
        return "<Verdict refused %s: %s>" % (self.reason, self.detail)

    @classmethod
    def _from_c(cls, v):
        """A Verdict owning v (a CVerdict nobody else writes to)."""
        return cls(v)


Address = collections.namedtuple("Address", "family host port")
Address.__doc__ = ("One checked address: family (socket.AF_INET or AF_INET6), host "
                   "(its text form, IPv6 without brackets) and port.")


def _sockaddr_to_address(ss, length):
    """The Address of a sockaddr the library filled: its text is the library's
    (ph_sockaddr_addr_text), the port read in network order."""
    family = ss.ss_family
    if not ((family == socket.AF_INET and length >= 8) or
            (family == socket.AF_INET6 and length >= 24)):
        raise GuardError("internal", "address of unknown family %d" % family)
    text = ctypes.create_string_buffer(64)
    _lib.lib().ph_sockaddr_addr_text(ctypes.addressof(ss), text, len(text))
    port = struct.unpack("!H", ctypes.string_at(ctypes.addressof(ss) + 2, 2))[0]
    return Address(socket.AddressFamily(family), text.value.decode("ascii"), port)


def _addresses(pinned):
    return [_sockaddr_to_address(pinned.addr[i], pinned.addr_len[i])
            for i in range(min(pinned.count, _lib.PH_PINNED_MAX))]


def _encode(value, what):
    if type(value) is str:
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        # Non-ASCII URLs reach the C parser as UTF-8 and are refused there
        # (parse_error), never silently converted.
        return value.encode("utf-8", "surrogateescape")
    raise TypeError("%s must be str or bytes, not %s" % (what, type(value).__name__))


def _cstr(value, what):
    """value for a NUL-terminated C parameter: a NUL inside would silently
    cut it short (a list "default\\0x" would be read as "default")."""
    data = _encode(value, what)
    if b"\0" in data:
        raise GuardError("invalid", "%s contains a NUL byte" % what)
    return data


def _timeout_ms(timeout):
    if timeout is None:
        return 0
    if timeout <= 0:
        raise ValueError("timeout must be positive seconds (or None for the default)")
    return max(1, min(int(timeout * 1000), 2**31 - 1))


class DialResult:
    """What a dial did: verdict (the check), address (the Address connected
    to), checked (every checked Address of the answer), resolve_ms and
    elapsed_ms."""

    __slots__ = ("verdict", "address", "checked", "resolve_ms", "elapsed_ms")

    def __init__(self, verdict: Verdict, address: Address, checked: List[Address],
                 resolve_ms: int = 0, elapsed_ms: int = 0) -> None:
        self.verdict = verdict
        self.address = address
        self.checked = checked
        self.resolve_ms = resolve_ms
        self.elapsed_ms = elapsed_ms

    def __repr__(self):
        return "<DialResult %s via %s>" % (self.verdict, self.address)


Redirect = collections.namedtuple("Redirect", "url same_origin drop_credentials verdict")
Redirect.__doc__ = "An allowed redirect hop (Guard.redirect_check)."


class Guard:
    """A policy (compiled allowlist table) and the resolver settings.

    Guard(table_path, dns_servers=None, *, dns_timeout_ms=0,
          reload_interval_ms=1000, dns_cache=True, dns_cache_entries=0,
          dns_cache_max_ttl_s=0, dns_negative_ttl_s=0)
      dns_servers: "ip[:port][,ip[:port]...]" (IPv6 as "[addr]:port");
        None: the system's resolv.conf.
      dns_timeout_ms: overall resolution timeout (0: libpinhole's default).
      reload_interval_ms: how often at most to look for a replaced table
        (0: never automatically; call reload()).
      dns_cache: the guard's DNS cache, shared by resolve() and dial() from
        every thread: checked answers for their TTL capped at
        dns_cache_max_ttl_s (0: 60 s), NXDOMAIN and denied answers for
        dns_negative_ttl_s (0: 5 s), dns_cache_entries slots (0: 1024).
        False: every call asks DNS.
    Raises GuardError when the table cannot be opened (status "io",
    "format", ...) or dns_servers is malformed ("invalid").
    """

    def __init__(self, table_path: Union[str, "os.PathLike[str]"],
                 dns_servers: Optional[str] = None, *, dns_timeout_ms: int = 0,
                 reload_interval_ms: int = 1000, dns_cache: bool = True,
                 dns_cache_entries: int = 0, dns_cache_max_ttl_s: int = 0,
                 dns_negative_ttl_s: int = 0) -> None:
        self._lib = _lib.lib()
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._inflight = 0
        self._handle = None
        self.table_path = table_path
        self.dns_servers = dns_servers
        self._dns_bytes = _cstr(dns_servers, "dns_servers") if dns_servers is not None else None
        opts = _lib.GuardOptions(self._dns_bytes, int(dns_timeout_ms), int(reload_interval_ms),
                                 None, int(dns_cache_entries), int(dns_cache_max_ttl_s),
                                 int(dns_negative_ttl_s), not dns_cache)
        handle = ctypes.c_void_p()
        diag = _lib.Diag()
        st = self._lib.ph_guard_open(_cstr(str(table_path), "table_path"), ctypes.byref(opts),
                                     ctypes.byref(handle), ctypes.byref(diag))
        if st != _lib.PH_OK:
            raise GuardError(_lib.STATUS_NAMES.get(st, str(st)), _lib.text(diag.message))
        self._handle = handle

    # -- lifetime ---------------------------------------------------------
    def _enter(self):
        with self._lock:
            if self._handle is None:
                raise GuardError("invalid", "the guard is closed")
            self._inflight += 1
            return self._handle

    def _leave(self):
        with self._lock:
            self._inflight -= 1
            if self._inflight == 0 and self._handle is None:
                self._idle.set()

    def close(self) -> None:
        """Closes the guard once the calls in flight have returned; later
        calls raise GuardError. Idempotent."""
        with self._lock:
            handle, self._handle = self._handle, None
            if self._inflight == 0:
                self._idle.set()
        if handle is None:
            return
        self._idle.wait()
        self._lib.ph_guard_close(ctypes.byref(handle))

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_handle", None) is not None and self._inflight == 0:
                self._lib.ph_guard_close(ctypes.byref(self._handle))
                self._handle = None
        except Exception:
            pass

    # -- decisions --------------------------------------------------------
    def check_url(self, url: Union[str, bytes], list: str = "default") -> Verdict:
        """The Verdict for url (an http or https URL) against list, without
        DNS: the guard's decision (ph_decide_url, the list named). Never
        raises for a refusal: look at verdict.allowed and verdict.reason
        (use dial() or resolve() to act on a URL)."""
        return Verdict._from_c(self._decide(url, list, True)[0].verdict)

    def check_authority(self, authority: Union[str, bytes], list: str = "default") -> Verdict:
        """The Verdict for a "host:port" authority against list
        (ph_decide_connect, the list named)."""
        return Verdict._from_c(self._decide(authority, list, False)[0].verdict)

    def _decide(self, target, list, is_url, pinned=None):
        """The decision on target (a URL or an authority) and, with pinned
        (a PinnedAddrs to fill), the step after an allowed one
        (ph_decision_resolve): (CDecision, status). GuardError for anything
        but an answer."""
        data = _encode(target, "url")
        # The list named: a trusted caller, no grant, so the decision reads
        # no clock (now 0).
        req = (_lib.UrlRequest if is_url else _lib.ConnectRequest)(data, len(data), None, 0,
                                                                   _cstr(list, "list"))
        d = _lib.CDecision()
        h = self._enter()
        try:
            st = (self._lib.ph_decide_url if is_url else self._lib.ph_decide_connect)(h, req, d)
            if pinned is not None and st == _lib.PH_OK:
                st = self._lib.ph_decision_resolve(h, d, pinned)
        finally:
            self._leave()
        if st not in (_lib.PH_OK, _lib.PH_E_DENIED):
            raise GuardError(_lib.STATUS_NAMES.get(st, str(st)), _lib.text(d.log_detail))
        return d, st

    def resolve(self, url: Union[str, bytes], list: str = "default") -> List[Address]:
        """Checks url, resolves its host with the guard's resolver and checks
        every address. Returns the list of checked Address (answer order).
        Raises Refused (reason: any check reason, dns_failure, dns_timeout,
        denied_address)."""
        verdict, pinned = self._decide_and_resolve(url, list)
        return _addresses(pinned)

    def _decide_and_resolve(self, url, list):
        """(Verdict, PinnedAddrs) of an allowed, resolved url; Refused."""
        pinned = _lib.PinnedAddrs()
        d, st = self._decide(url, list, True, pinned)
        verdict = Verdict._from_c(d.verdict)
        if st != _lib.PH_OK or not verdict.allowed:
            raise Refused(verdict.reason, verdict.detail or _lib.text(d.log_detail),
                          url=url, verdict=verdict)
        return verdict, pinned

    def dial(self, url: Union[str, bytes], list: str = "default",
             timeout: Optional[float] = 10.0) -> socket.socket:
        """Checks url against list, resolves its host with the guard's
        resolver, checks every address and connects to a checked one (RFC
        8305: IPv6 first when the answer has both, a new attempt every
        stagger), all within timeout seconds (None: libpinhole's default).
        Returns a connected, blocking socket.socket the caller owns. Raises
        Refused with the reason: any check reason, dns_failure,
        dns_timeout, denied_address, upstream_unreachable,
        upstream_timeout."""
        return self.dial_with_result(url, list, timeout)[0]

    def dial_with_result(self, url: Union[str, bytes], list: str = "default",
                         timeout: Optional[float] = 10.0,
                         stagger_ms: int = 0) -> Tuple[socket.socket, DialResult]:
        """dial(), returning (socket, DialResult)."""
        return self._dial(self._lib.ph_dial_url, _encode(url, "url"), url, list, timeout,
                          stagger_ms)

    def dial_authority(self, host: Union[str, bytes], port: int, list: str = "default",
                       timeout: Optional[float] = 10.0) -> socket.socket:
        """dial() for a host and port (what an HTTP library's connection
        pool asks for): the CONNECT-authority form of the same decision."""
        return self.dial_authority_with_result(host, port, list, timeout)[0]

    def dial_authority_with_result(self, host: Union[str, bytes], port: int,
                                   list: str = "default", timeout: Optional[float] = 10.0,
                                   stagger_ms: int = 0) -> Tuple[socket.socket, DialResult]:
        authority = self._authority(host, port)
        return self._dial(self._lib.ph_dial_authority, _encode(authority, "authority"),
                          authority, list, timeout, stagger_ms)

    async def dial_authority_async(self, host: Union[str, bytes], port: int,
                                   list: str = "default", timeout: Optional[float] = 10.0,
                                   stagger_ms: int = 0) -> socket.socket:
        """dial_authority() for asyncio, holding no thread: the decision,
        then the host resolved by a resolver of the guard's (its DNS
        servers, timeout and cache) driven by the running loop, then the
        checked addresses connected to with non-blocking sockets (happy
        eyeballs), all within timeout (None: 10 s). A connected
        NON-BLOCKING socket (the caller's); the same refusals as
        dial_authority(). Call it on the loop's own thread."""
        from . import _aio
        return await _aio.dial_authority(self, self._authority(host, port), list, timeout,
                                         stagger_ms)

    @staticmethod
    def _authority(host, port):
        """ "host:port" for the decision; an IPv6 literal as httpcore and
        urllib3 hand it over (no brackets) refused like every IP literal."""
        if isinstance(host, bytes):
            host = host.decode("ascii", "surrogateescape")
        if ":" in host:
            raise Refused("ip_literal", "host %r is an IP address literal: destinations must "
                          "be host names" % host, url=host)
        return "%s:%d" % (host, int(port))

    def _dial(self, fn, data, shown, list, timeout, stagger_ms):
        opts = _lib.DialOptions(_timeout_ms(timeout), int(stagger_ms))
        lst = _cstr(list, "list")
        fd = ctypes.c_int(-1)
        r = _lib.CDialResult()
        diag = _lib.Diag()
        h = self._enter()
        try:
            st = fn(h, lst, data, len(data), ctypes.byref(opts), ctypes.byref(fd),
                    ctypes.byref(r), ctypes.byref(diag))
        finally:
            self._leave()
        verdict = Verdict._from_c(r.verdict)
        if st == _lib.PH_E_DENIED:
            raise Refused(verdict.reason, verdict.detail or _lib.text(diag.message), url=shown,
                          verdict=verdict)
        if st != _lib.PH_OK:
            if fd.value >= 0:
                socket.close(fd.value)
            raise GuardError(_lib.STATUS_NAMES.get(st, str(st)), _lib.text(diag.message))
        sock = socket.socket(fileno=fd.value)
        checked = _addresses(r.checked)
        return sock, DialResult(verdict, _sockaddr_to_address(r.addr, r.addr_len), checked,
                                r.resolve_ms, r.elapsed_ms)

    def redirect_check(self, from_url: Union[str, bytes], location: Union[str, bytes], hop: int,
                       list: str = "default", max_hops: int = 0, allow_downgrade: bool = False,
                       resend_body: bool = False,
                       allow_body_cross_origin: bool = False) -> Redirect:
        """Whether the response to from_url may be followed to location (its
        Location header), hop being how many redirects the chain already
        followed (0 for the first); resend_body: the next hop re-sends the
        request body; allow_body_cross_origin: the caller lets it go to
        another origin. Returns a Redirect (url: the absolute target;
        same_origin; drop_credentials: the origin changes, only the headers
        of libpinhole's short list follow; verdict). Raises Refused:
        redirect_limit, redirect_bad_location, redirect_downgrade,
        redirect_body_cross_origin, or any check reason of the target.
        Resolves nothing: dial the target to resolve and pin it."""
        frm = _encode(from_url, "from_url")
        loc = _encode(location, "location")
        # Both are C strings: a NUL would hide what follows it.
        if b"\0" in frm:
            raise Refused("parse_error", "the URL contains a NUL byte", url=from_url)
        if b"\0" in loc:
            raise Refused("redirect_bad_location", "the Location contains a NUL byte",
                          url=location)
        opts = _lib.RedirectOptions(int(max_hops), bool(allow_downgrade), bool(resend_body),
                                    bool(allow_body_cross_origin))
        out = _lib.CRedirect()
        diag = _lib.Diag()
        h = self._enter()
        try:
            st = self._lib.ph_redirect_check(h, _cstr(list, "list"), frm, loc, int(hop),
                                             ctypes.byref(opts), ctypes.byref(out),
                                             ctypes.byref(diag))
        finally:
            self._leave()
        verdict = Verdict._from_c(out.verdict)
        target = _lib.text(out.url)
        if st == _lib.PH_OK and verdict.allowed:
            return Redirect(target, bool(out.same_origin), bool(out.drop_credentials), verdict)
        if st in (_lib.PH_OK, _lib.PH_E_DENIED, _lib.PH_E_INVAL):
            raise Refused(verdict.reason, verdict.detail or _lib.text(diag.message),
                          url=target or location, verdict=verdict)
        raise GuardError(_lib.STATUS_NAMES.get(st, str(st)), _lib.text(diag.message))

    # -- policy -----------------------------------------------------------
    def reload(self) -> bool:
        """Reloads the table now if the file was replaced; returns whether a
        new table is in force. Raises GuardError when it fails to load (the
        old table stays in force)."""
        reloaded = ctypes.c_bool(False)
        diag = _lib.Diag()
        h = self._enter()
        try:
            st = self._lib.ph_guard_reload(h, ctypes.byref(reloaded), ctypes.byref(diag))
        finally:
            self._leave()
        if st != _lib.PH_OK:
            raise GuardError(_lib.STATUS_NAMES.get(st, str(st)), _lib.text(diag.message))
        return bool(reloaded.value)


def build_is_test_loopback() -> bool:
    """True when the loaded libpinhole exempts loopback from the denylist
    (a test build: never use one in production)."""
    return bool(_lib.lib().ph_build_is_test_loopback())


def library_path() -> str:
    """The path libpinhole was loaded from."""
    return _lib.library_path()
