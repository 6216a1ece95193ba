"""The package's exceptions: one hierarchy under pinhole.Error.

  Error                 anything this package raises on purpose
    LibraryError        libpinhole cannot be found, or its structs differ
    GuardError          a call could not do its job (bad table, bad
                        arguments, I/O): .status names the ph_status
    ExecdError          pinhole-execd refused a request (pinhole.execd):
                        .code is the stable code of docs/execd.md
    Refused             a decision refused a destination: .reason is the
                        stable reason code ("not_allowlisted",
                        "denied_address", "upstream_timeout", ...), the same
                        string the proxy and pinhole-guard print
      ProxyRefused      a client would send the request through a proxy
                        (from the environment or configured), which would
                        bypass the guard: reason "proxy_refused"

The httpx and requests adapters raise subclasses that are also the HTTP
library's own connection errors, so code catching httpx.ConnectError or
requests.ConnectionError keeps working and code catching pinhole.Refused
sees the reason.
"""
from __future__ import annotations

from typing import Any, Optional


class Error(Exception):
    """Base of every exception the package raises on purpose."""


class LibraryError(Error):
    """libpinhole is missing, too old, or built from other headers."""


class GuardError(Error):
    """A call could not do its job; status is the ph_status name
    ("invalid", "io", "format", ...), message the diagnostic."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__("%s: %s" % (status, message))
        self.status = status
        self.message = message


class Refused(Error):
    """A destination was refused. reason: the stable code; detail: the
    one-line explanation; url: what was asked for; verdict: the Verdict
    when the refusal came from a check (None otherwise)."""

    def __init__(self, reason: str, detail: str = "", url: Optional[str] = None,
                 verdict: Optional[Any] = None) -> None:
        super().__init__("%s: %s" % (reason, detail) if detail else reason)
        self.reason = reason
        self.detail = detail
        self.url = url
        self.verdict = verdict


class ProxyRefused(Refused):
    """The client would route a request through a proxy (trust_env and a
    proxy variable, or a proxy configured): the guard cannot check what a
    proxy dials, so the request is refused before it is sent."""

    def __init__(self, detail: str, url: Optional[str] = None) -> None:
        super().__init__("proxy_refused", detail, url=url)


class ExecdError(Error):
    """A refusal of pinhole-execd: .code is the stable code ("not_found",
    "busy", "denied", ...), .message the service's text."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
