"""What the httpx and requests adapters share when they follow a redirect.

Every rule comes from libpinhole (pinhole/redirect.h), the same one
libpinhole-curl applies: whether a hop may be followed at all
(Guard.redirect_check), the method of the next hop
(ph_redirect_next_method), which of the caller's headers follow
(ph_redirect_cross_origin_header, ph_redirect_body_header: read once from
the library, never copied here), a body to another origin only on request
(redirect_body_cross_origin). What is Python's own: the bound on a
redirect body read before its connection is closed, and the chain's
deadline, both the C library's defaults.
"""
import contextvars
import time
from typing import FrozenSet, Iterable, Optional, Tuple

from . import _lib

REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))
DEFAULT_MAX_REDIRECTS = 10
# PH_REDIRECT_BODY_DISCARD_MAX: at most this much of a redirect's body is
# read (and thrown away) before its connection is closed instead.
BODY_DISCARD_MAX = 65536
# PH_REDIRECT_CHAIN_TIMEOUT_MS_DEFAULT: one deadline for every hop of a
# guarded request (connections, requests, response heads, redirect bodies).
DEFAULT_TOTAL_TIMEOUT = 30.0

_lists: Optional[Tuple[FrozenSet[str], FrozenSet[str]]] = None


def _names(fn) -> FrozenSet[str]:
    out = []
    i = 0
    while True:
        name = fn(i)
        if name is None:
            return frozenset(out)
        out.append(name.decode("ascii").lower())
        i += 1


def header_lists() -> Tuple[FrozenSet[str], FrozenSet[str]]:
    """(headers that follow to another origin, headers of a body), lower
    case, as libpinhole lists them."""
    global _lists
    if _lists is None:
        lib = _lib.lib()
        _lists = (_names(lib.ph_redirect_cross_origin_header), _names(lib.ph_redirect_body_header))
    return _lists


def header_follows(name: str, same_origin: bool, body_follows: bool) -> bool:
    """ph_redirect_header_follows, over the lists read from the library."""
    cross, body = header_lists()
    n = name.lower()
    if n in body:
        return body_follows
    return same_origin or n in cross


def dropped_headers(names: Iterable[str], same_origin: bool, body_follows: bool):
    """The names among names that must not follow to the next hop."""
    return [n for n in names if not header_follows(n, same_origin, body_follows)]


def next_method(status: int, method: str) -> str:
    """The method of the next hop (ph_redirect_next_method): 302 and 303
    turn anything but HEAD into GET, 301 turns POST into GET, 307 and 308
    keep the method and the body."""
    out = _lib.lib().ph_redirect_next_method(int(status), method.encode("ascii"))
    return out.decode("ascii") if out is not None else method


def origin(scheme, host, port):
    return (scheme.lower(), host.lower(), int(port))


# The absolute monotonic deadline of the guarded request running in this
# context (a thread, or an asyncio task), read by the network streams so
# that no single read or write outlives it.
deadline_var: "contextvars.ContextVar[Optional[float]]" = contextvars.ContextVar(
    "pinhole_deadline", default=None)


def time_left() -> Optional[float]:
    """Seconds left before the current request's deadline (None: none)."""
    d = deadline_var.get()
    return None if d is None else d - time.monotonic()


def clamp(timeout: Optional[float]) -> Optional[float]:
    """timeout capped by the current deadline; raises TimeoutError when it
    has passed."""
    left = time_left()
    if left is None:
        return timeout
    if left <= 0:
        raise TimeoutError("the guarded request's deadline passed")
    return left if timeout is None else min(timeout, left)
