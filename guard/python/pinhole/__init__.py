"""pinhole: Pinhole's egress guard for Python workers, over libpinhole.

    import pinhole
    guard = pinhole.Guard("/etc/pinhole/allowlist.ptab")
    v = guard.check_url("https://mcp.example.com/mcp", "default")
    sock = guard.dial("https://mcp.example.com/mcp", "default", timeout=5)

HTTP clients: pinhole.httpx (GuardedTransport, AsyncGuardedTransport,
Client, AsyncClient) and pinhole.requests (GuardedAdapter, Session). Each
checks every request and redirect hop and connects only to checked
addresses. The command line: python3 -m pinhole check --table T URL...
pinhole.execd is the client of pinhole-execd (the execution service).
"""
from .errors import Error, ExecdError, GuardError, LibraryError, ProxyRefused, Refused
from .guard import (Address, DialResult, Guard, Redirect, Rule, Verdict, build_is_test_loopback,
                    library_path)

__all__ = [
    "Address", "DialResult", "Error", "ExecdError", "Guard", "GuardError", "LibraryError",
    "ProxyRefused", "Redirect", "Refused", "Rule", "Verdict", "build_is_test_loopback", "library_path",
]
__version__ = "0.1.0"
