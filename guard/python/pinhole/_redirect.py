"""What the httpx and requests adapters share when they follow a redirect:
which responses redirect, how the method changes, which headers must not
follow. Whether a hop may be followed at all, and whether credentials drop,
is the guard's decision (Guard.redirect_check, ph_redirect_check), the same
one the libcurl attachment makes.
"""
REDIRECT_STATUSES = frozenset((301, 302, 303, 307, 308))

# Never sent to another origin (ph_redirect.drop_credentials).
CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")
# Dropped with the body when the method becomes GET.
BODY_HEADERS = ("content-length", "transfer-encoding", "content-type")
DEFAULT_MAX_REDIRECTS = 10


def next_method(status, method):
    """The method of the next hop, as browsers and httpx/requests do it: 303
    turns anything but HEAD into GET, so does 302; 301 turns POST into GET;
    307 and 308 keep the method and the body."""
    if status in (302, 303) and method != "HEAD":
        return "GET"
    if status == 301 and method == "POST":
        return "GET"
    return method


def origin(scheme, host, port):
    return (scheme.lower(), host.lower(), int(port))
