"""Dialing a decided host from an asyncio event loop, without a thread.

A dial that holds a thread for its resolution and connection would let a
few black-holed tenant URLs, each holding one for its whole timeout, use up
whatever pool the threads come from and so delay or refuse every other
dial of the process. Here nothing blocks and nothing waits in a pool:

  - the decision is the guard's (ph_decide_connect with the list named,
    through Guard.check_authority), a call that never blocks;
  - the decided host is resolved by a resolver of the guard's
    (ph_guard_resolver_new: its DNS servers and timeout, its DNS cache)
    driven by the running loop: loop.add_reader/add_writer on each DNS
    socket the resolver asks for, loop.call_later for its timer. Every
    address is checked by libpinhole before the answer arrives here;
  - the checked addresses, and only they, are connected to with
    non-blocking sockets (RFC 8305, as ph_dial_url: IPv6 and IPv4
    interleaved, IPv6 first, a new attempt every stagger or as soon as the
    previous one fails, the first to connect wins) under one deadline.

A pending dial holds a socket (one per attempt in flight) and a DNS query,
never a thread; what bounds how many a client has in flight is its own
connection limit (httpx's max_connections) and the process's descriptors.
"""
import asyncio
import ctypes
import errno
import os
import socket
import time
from typing import List, Optional

from . import _lib
from .errors import GuardError, Refused

# ph_dial_url's defaults.
DEFAULT_TIMEOUT = 10.0
DEFAULT_STAGGER = 0.25


class _LoopResolver:
    """One resolver of the guard for one dial, driven by loop. Only the
    loop's thread touches it; close() frees it (queries cancelled, DNS
    sockets unwatched)."""

    def __init__(self, lib, handle, loop):
        self._lib = lib
        self._loop = loop
        self._fds = {}
        self._timer = None
        self._fut = None
        self._live = False  # a query is started and its answer not delivered
        self._query = ctypes.c_void_p()
        self._r = ctypes.c_void_p()
        # The C side keeps pointers to these: they live as long as self.
        self._callbacks = (_lib.WATCH_CB(self._watch), _lib.TIMER_CB(self._arm),
                           _lib.RESOLVE_CB(self._answer))
        self._cloop = _lib.ResolverLoop(self._callbacks[0], self._callbacks[1], None)
        diag = _lib.Diag()
        st = lib.ph_guard_resolver_new(handle, ctypes.byref(self._cloop), ctypes.byref(self._r),
                                       ctypes.byref(diag))
        if st != _lib.PH_OK:
            raise GuardError(_lib.STATUS_NAMES.get(st, str(st)), _lib.text(diag.message))

    # -- what libpinhole calls (on the loop's thread, inside its calls) ---
    def _watch(self, arg, fd, events):
        old = self._fds.pop(fd, 0)
        if old & _lib.PH_RESOLVER_READ:
            self._loop.remove_reader(fd)
        if old & _lib.PH_RESOLVER_WRITE:
            self._loop.remove_writer(fd)
        if self._loop.is_closed():
            return
        if events & _lib.PH_RESOLVER_READ:
            self._loop.add_reader(fd, self._process, fd, _lib.PH_RESOLVER_READ)
        if events & _lib.PH_RESOLVER_WRITE:
            self._loop.add_writer(fd, self._process, fd, _lib.PH_RESOLVER_WRITE)
        if events:
            self._fds[fd] = events

    def _arm(self, arg, ms):
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if ms >= 0 and not self._loop.is_closed():
            self._timer = self._loop.call_later(ms / 1000.0, self._process, -1, 0)

    def _answer(self, arg, answer):
        self._live = False
        a = answer.contents
        fut = self._fut
        if fut is None or fut.done():
            return
        if a.st == _lib.PH_OK:
            from .guard import _addresses
            fut.set_result(_addresses(a.addrs))
        else:
            fut.set_result(Refused(_lib.reason_code(a.reason), _lib.text(a.detail)))

    def _process(self, fd, events):
        if self._r:
            self._lib.ph_resolver_process(self._r, fd, events)

    # -- the dial's side --------------------------------------------------
    async def resolve(self, host, port, left):
        """The checked addresses of host (a decided, canonical name) for
        port; Refused (dns_failure, dns_timeout, denied_address)."""
        self._fut = self._loop.create_future()
        diag = _lib.Diag()
        st = self._lib.ph_resolver_start(self._r, host.encode("ascii"), port, self._callbacks[2],
                                         None, ctypes.byref(self._query), ctypes.byref(diag))
        if st != _lib.PH_OK:
            raise Refused("parse_error", _lib.text(diag.message), url=host)
        self._live = True
        try:
            out = await asyncio.wait_for(self._fut, max(left, 0.0))
        except asyncio.TimeoutError:
            raise Refused("dns_timeout", "no answer for %s before the dial's deadline" % host,
                          url=host) from None
        if isinstance(out, Refused):
            out.url = host
            raise out
        return out

    def close(self):
        if self._live:
            self._live = False
            self._lib.ph_resolver_cancel(self._query)
        if self._r:
            self._lib.ph_resolver_free(ctypes.byref(self._r))
        for fd in list(self._fds):
            self._watch(None, fd, 0)
        self._arm(None, -1)


def _interleave(addrs):
    """RFC 8305 order: the families alternated, IPv6 first when there is
    one, each family in answer order."""
    v6 = [a for a in addrs if a.family == socket.AF_INET6]
    v4 = [a for a in addrs if a.family != socket.AF_INET6]
    out = []
    for i in range(max(len(v6), len(v4))):
        out += v6[i:i + 1] + v4[i:i + 1]
    return out


async def _attempt(loop, a):
    """A socket connected to the Address a, without resolving anything."""
    sock = socket.socket(a.family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sa = (a.host, a.port) if a.family == socket.AF_INET else (a.host, a.port, 0, 0)
        err = sock.connect_ex(sa)
        if err == errno.EINPROGRESS:
            fut = loop.create_future()
            fd = sock.fileno()
            loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
            try:
                await fut
            finally:
                loop.remove_writer(fd)
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err != 0:
            raise OSError(err, "%s port %d: %s" % (a.host, a.port, os.strerror(err)))
        return sock
    except BaseException:
        sock.close()
        raise


async def _connect(loop, addrs, stagger, deadline, shown):
    """Happy eyeballs over the checked addrs: the first connected socket;
    Refused upstream_unreachable (every attempt failed) or upstream_timeout
    (the deadline passed)."""
    order = _interleave(addrs)
    pending = set()
    last_error = None
    nxt = 0
    next_at = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            if nxt < len(order) and (not pending or now >= next_at):
                pending.add(asyncio.ensure_future(_attempt(loop, order[nxt])))
                nxt += 1
                next_at = now + stagger
            if not pending:
                raise Refused("upstream_unreachable", "every address of %s failed: %s"
                              % (shown, last_error), url=shown)
            left = deadline - now
            if left <= 0:
                raise Refused("upstream_timeout", "%s: no connection within the dial's "
                              "deadline" % shown, url=shown)
            wait = min(left, next_at - now) if nxt < len(order) else left
            done, pending = await asyncio.wait(pending, timeout=max(wait, 0.0),
                                               return_when=asyncio.FIRST_COMPLETED)
            winner = None
            for t in done:
                if t.exception() is None and winner is None:
                    winner = t.result()
                elif t.exception() is None:
                    t.result().close()
                else:
                    last_error = t.exception()
                    next_at = time.monotonic()  # a failure starts the next at once
            if winner is not None:
                return winner
    finally:
        for t in pending:
            t.cancel()
        if pending:
            # Each cancelled attempt closes its own socket; one that had
            # already connected is closed here.
            for t in await asyncio.gather(*pending, return_exceptions=True):
                if isinstance(t, socket.socket):
                    t.close()


async def dial_authority(guard, authority: str, list: str, timeout: Optional[float],
                         stagger_ms: int) -> socket.socket:
    """Guard.dial_authority_async for "host:port": see there."""
    loop = asyncio.get_running_loop()
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive seconds (or None for the default)")
    deadline = time.monotonic() + (DEFAULT_TIMEOUT if timeout is None else timeout)
    v = guard.check_authority(authority, list)
    if not v.allowed:
        raise Refused(v.reason, v.detail, url=authority, verdict=v)
    h = guard._enter()
    try:
        resolver = _LoopResolver(guard._lib, h, loop)
    finally:
        guard._leave()
    try:
        addrs: List = await resolver.resolve(v.host, v.port, deadline - time.monotonic())
    except Refused as e:
        e.verdict = v
        raise
    finally:
        resolver.close()
    stagger = DEFAULT_STAGGER if not stagger_ms else stagger_ms / 1000.0
    return await _connect(loop, addrs, stagger, deadline, authority)
