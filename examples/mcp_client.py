#!/usr/bin/python3
"""mcp_client.py - the MCP authorization discovery chain, every URL a
server names dialed through the guard (pinhole.httpx).

An MCP client dials several URLs on a server's say-so (the MCP security
best practices): the server URL itself; the resource_metadata URL of a
401's WWW-Authenticate; the Protected Resource Metadata's
authorization_servers (RFC 9728) and each one's metadata endpoint (RFC
8414); the endpoints that metadata names; and, with the legacy HTTP+SSE
transport, the URL of the stream's `endpoint` event. Each is checked by the
guard before it is dialed, its connection pinned to checked addresses, and
every redirect hop re-checked. This walks the chain and prints one JSON line
per URL: what it was, the URL, and either the HTTP status or the refusal's
stable reason code.

The discovery documents come from the server and are validated before a
field of them is used: a JSON object of at most 1 MiB (no duplicate key,
no NaN or Infinity), every field RFC 9728 (Protected Resource Metadata)
and RFC 8414 (Authorization Server Metadata) define of the type they give
it, "resource" equal to the server URL (RFC 9728 section 3.3), "issuer"
equal to the issuer the metadata URL was made from (RFC 8414 section
3.3), at most 16 authorization servers. A document that fails is a result
like a refusal: its line carries "error" (invalid_json, invalid_metadata,
document_too_large) and "detail", and nothing in it is dialed. A hop the
HTTP client cannot complete carries "error": "transport_error".

The MCP server's own answers (to initialize, and to the ping posted to
an SSE endpoint) are read as they come and bounded too: at most 1 MiB
(MAX_RESPONSE) within 20 s (RESPONSE_SECONDS) from the response's head, the
connection shut down at that deadline whatever each read's own timeout
(10 s). Every body is asked for and read as it is sent (Accept-Encoding:
identity; a Content-Encoding is refused, as compressed bytes would be
bounded only once inflated). A server that sends more, takes longer, or
compresses its answer ends the walk: a message on stderr naming the URL
and the bound, exit status 2 (for a discovery document or the SSE stream,
a result line with "error").

usage: mcp_client.py --table TABLE [--list LIST] [--dns-server S]
                     [--sse SSE_URL ...] MCP_SERVER_URL
exit status: 0 the chain was walked (refused hops and bad documents are
results, not errors), 2 usage error, unusable table, or an answer of the
MCP server over its bound.
"""
import argparse
import json
import re
import socket
import sys
import threading
from typing import Any, Dict, List, Optional
from urllib.parse import urlsplit, urlunsplit

import httpx

import pinhole
import pinhole.httpx

MAX_DOCUMENT = 1 << 20
# Seconds to read a document or find the SSE endpoint event, whatever the
# server trickles (each read is bounded by the client's timeout as well).
DOCUMENT_SECONDS = 20.0
# The MCP server's answers to initialize and ping: at most this many bytes
# within this many seconds, or the walk ends (exit status 2).
MAX_RESPONSE = 1 << 20
RESPONSE_SECONDS = 20.0
MAX_AUTHORIZATION_SERVERS = 16
# What an HTTP exchange may raise besides a guard refusal: the hop fails,
# the walk goes on.
TRANSPORT_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, ValueError,
                    UnicodeError)

# RFC 9728 section 2 and RFC 8414 section 2: each field's JSON type.
STR, STRS, BOOL = "string", "array of strings", "boolean"
PRM_FIELDS = {
    "resource": STR, "authorization_servers": STRS, "jwks_uri": STR,
    "scopes_supported": STRS, "bearer_methods_supported": STRS,
    "resource_signing_alg_values_supported": STRS, "resource_name": STR,
    "resource_documentation": STR, "resource_policy_uri": STR, "resource_tos_uri": STR,
    "tls_client_certificate_bound_access_tokens": BOOL,
    "authorization_details_types_supported": STRS,
    "dpop_signing_alg_values_supported": STRS, "dpop_bound_access_tokens_required": BOOL,
}
ASM_FIELDS = {
    "issuer": STR, "authorization_endpoint": STR, "token_endpoint": STR, "jwks_uri": STR,
    "registration_endpoint": STR, "scopes_supported": STRS, "response_types_supported": STRS,
    "response_modes_supported": STRS, "grant_types_supported": STRS,
    "token_endpoint_auth_methods_supported": STRS,
    "token_endpoint_auth_signing_alg_values_supported": STRS, "service_documentation": STR,
    "ui_locales_supported": STRS, "op_policy_uri": STR, "op_tos_uri": STR,
    "revocation_endpoint": STR, "revocation_endpoint_auth_methods_supported": STRS,
    "revocation_endpoint_auth_signing_alg_values_supported": STRS,
    "introspection_endpoint": STR, "introspection_endpoint_auth_methods_supported": STRS,
    "introspection_endpoint_auth_signing_alg_values_supported": STRS,
    "code_challenge_methods_supported": STRS,
}


class BadDocument(Exception):
    """A discovery document that must not be used: .error is the code."""

    def __init__(self, error: str, detail: str) -> None:
        super().__init__(detail)
        self.error = error
        self.detail = detail


class BodyExceeded(Exception):
    """A response body over its bound: .bound is "size" or "time"."""

    def __init__(self, bound: str, detail: str) -> None:
        super().__init__(detail)
        self.bound = bound


def identity(r: httpx.Response) -> None:
    """BodyExceeded unless r's body is sent as it is: the client asks for
    no Content-Encoding, and a compressed body (1 KiB of gzip can be 1 MiB
    of JSON) would be bounded only after it was inflated."""
    enc = r.headers.get("content-encoding", "identity").strip().lower()
    if enc not in ("", "identity"):
        raise BodyExceeded("encoding", "Content-Encoding %r, identity was asked for" % enc[:40])


class Cut:
    """With it: r's connection (a streamed response) shut down `seconds`
    from now, whatever each read's own timeout, so that a body trickled a
    byte per read timeout, or bytes that never make a body byte (a chunk
    extension or a trailer sent a byte at a time), end there. .fired: it
    was (the reads then failed with httpx's errors)."""

    def __init__(self, r: httpx.Response, seconds: float) -> None:
        stream = r.extensions.get("network_stream")
        self._sock = stream.get_extra_info("socket") if stream is not None else None
        self._lock = threading.Lock()
        self._done = False
        self.fired = False
        self._timer = threading.Timer(seconds, self._cut)
        self._timer.daemon = True

    def _cut(self) -> None:
        with self._lock:
            if self._done or self._sock is None:
                return
            self.fired = True
            try:  # the descriptor's, under any TLS layer
                socket.socket.shutdown(self._sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "Cut":
        self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True


def read_body(r: httpx.Response, limit: int, seconds: float) -> bytes:
    """The body of r (a streamed response), at most limit bytes within
    seconds (Cut). BodyExceeded when a bound is passed or the body is
    encoded; httpx's errors otherwise."""
    identity(r)
    chunks, n = [], 0
    with Cut(r, seconds) as cut:
        try:
            for chunk in r.iter_raw():
                n += len(chunk)
                if n > limit:
                    raise BodyExceeded("size", "more than %d bytes" % limit)
                chunks.append(chunk)
        except httpx.HTTPError:
            if not cut.fired:
                raise
    if cut.fired:
        raise BodyExceeded("time", "not read within %gs" % seconds)
    return b"".join(chunks)


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise BadDocument("invalid_json", "duplicate key %r" % k[:64])
        out[k] = v
    return out


def _no_constant(name):
    raise BadDocument("invalid_json", "%s is not JSON" % name)


def parse_document(body: bytes) -> Any:
    """The JSON value of a discovery document, or BadDocument."""
    if len(body) > MAX_DOCUMENT:
        raise BadDocument("document_too_large", "more than %d bytes" % MAX_DOCUMENT)
    try:
        text = body.decode("utf-8")
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except BadDocument:
        raise
    except (ValueError, RecursionError) as e:
        raise BadDocument("invalid_json", "not JSON: %s" % str(e)[:120]) from None


def check_fields(doc: Any, fields: Dict[str, str], what: str) -> Dict[str, Any]:
    """doc as a dict whose known fields have their RFC types."""
    if not isinstance(doc, dict):
        raise BadDocument("invalid_metadata", "%s is a JSON %s, not an object"
                          % (what, type(doc).__name__))
    for key, kind in fields.items():
        if key not in doc:
            continue
        v = doc[key]
        good = (isinstance(v, str) if kind == STR else
                isinstance(v, bool) if kind == BOOL else
                isinstance(v, list) and all(isinstance(x, str) for x in v))
        if not good:
            raise BadDocument("invalid_metadata", "%s field %s is not a %s"
                              % (what, key, kind))
    return doc


def validate_prm(doc: Any, server_url: str) -> List[str]:
    """RFC 9728: the authorization servers of valid Protected Resource
    Metadata retrieved through the server's resource_metadata."""
    doc = check_fields(doc, PRM_FIELDS, "protected resource metadata")
    if "resource" not in doc:
        raise BadDocument("invalid_metadata", "protected resource metadata has no resource")
    if doc["resource"] != server_url:
        raise BadDocument("invalid_metadata", "resource %r is not the server URL %r "
                          "(RFC 9728 section 3.3)" % (doc["resource"][:200], server_url))
    servers = doc.get("authorization_servers", [])
    if len(servers) > MAX_AUTHORIZATION_SERVERS:
        raise BadDocument("invalid_metadata", "more than %d authorization_servers"
                          % MAX_AUTHORIZATION_SERVERS)
    return servers


def validate_asm(doc: Any, issuer: str) -> Dict[str, Any]:
    """RFC 8414: valid Authorization Server Metadata of issuer."""
    doc = check_fields(doc, ASM_FIELDS, "authorization server metadata")
    if doc.get("issuer") != issuer:
        raise BadDocument("invalid_metadata", "issuer %r is not %r (RFC 8414 section 3.3)"
                          % (str(doc.get("issuer"))[:200], issuer))
    if "response_types_supported" not in doc:
        raise BadDocument("invalid_metadata", "response_types_supported is missing")
    return doc


def record(kind, url, **fields):
    print(json.dumps(dict({"hop": kind, "url": url}, **fields), sort_keys=True), flush=True)


def refusal(kind, url, e):
    record(kind, url, allowed=False, reason=e.reason, detail=e.detail)


def failure(kind, url, e):
    record(kind, url, allowed=True, error="transport_error",
           detail="%s: %s" % (type(e).__name__, str(e)[:200]))


def endpoint_event(chunks):
    """The data of the first `endpoint` event of an SSE stream (its lines
    cut at CR, LF or CRLF), reading at most MAX_DOCUMENT bytes within
    DOCUMENT_SECONDS (the caller's Cut); None when there is none."""
    buf = b""
    seen = 0
    event = None
    for chunk in chunks:
        seen += len(chunk)
        if seen > MAX_DOCUMENT:
            return None
        buf += chunk
        # A CR last may be the first half of a CRLF: keep it for later.
        hold = buf[:-1] if buf.endswith(b"\r") else buf
        lines = re.split(rb"\r\n|\r|\n", hold)
        buf = lines.pop() + buf[len(hold):]
        for raw in lines:
            line = raw.decode("utf-8", "replace")
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "endpoint":
                return line[5:].strip()
            elif line == "":
                event = None
    return None


def resource_metadata_url(www_authenticate):
    """resource_metadata="..." of a Bearer challenge (RFC 9728 section 5.1)."""
    m = re.search(r'resource_metadata="([^"]*)"', www_authenticate or "")
    return m.group(1) if m else None


def as_metadata_url(issuer):
    """RFC 8414 section 3.1: the well-known path goes between the host and
    the issuer's path."""
    u = urlsplit(issuer)
    path = u.path.rstrip("/")
    return urlunsplit((u.scheme, u.netloc, "/.well-known/oauth-authorization-server" + path,
                       "", ""))


def fetch_document(client, kind, url, validate):
    """GET url through the guard, at most MAX_DOCUMENT bytes of it;
    validate(parsed JSON) when 200. The validated value, or None (refused,
    failed, not 200, or a bad document: each gets its line)."""
    too_large = None
    try:
        with client.stream("GET", url) as r:
            try:
                body = read_body(r, MAX_DOCUMENT, DOCUMENT_SECONDS)
            except BodyExceeded as e:
                if e.bound == "time":
                    raise httpx.ReadTimeout("document %s" % e) from None
                if e.bound == "encoding":
                    raise httpx.DecodingError("document %s" % e) from None
                body, too_large = b"", e
    except pinhole.Refused as e:
        refusal(kind, url, e)
        return None
    except TRANSPORT_ERRORS as e:
        failure(kind, url, e)
        return None
    fields = dict(allowed=True, status=r.status_code,
                  redirects=len(r.extensions.get("pinhole_redirects", [])))
    if r.status_code != 200:
        record(kind, url, **fields)
        return None
    try:
        if too_large is not None:
            raise BadDocument("document_too_large", str(too_large))
        value = validate(parse_document(body))
    except BadDocument as e:
        record(kind, url, error=e.error, detail=e.detail, **fields)
        return None
    record(kind, url, **fields)
    return value


class Abort(Exception):
    """The MCP server's answer passed its bound: the walk ends (exit 2)."""


def post_bounded(client, what, url, message, headers=None):
    """POST message (JSON-RPC) to url; the response with its body read
    within MAX_RESPONSE and RESPONSE_SECONDS, or Abort."""
    with client.stream("POST", url, json=message, headers=headers) as r:
        try:
            read_body(r, MAX_RESPONSE, RESPONSE_SECONDS)
        except BodyExceeded as e:
            raise Abort("the %s response of %s: %s%s" % (
                what, url, e, {"size": " (MAX_RESPONSE)", "time": " (RESPONSE_SECONDS)"}.get(
                    e.bound, ""))) from None
        return r


def discover(client, guard, lst, server_url):
    """The streamable-HTTP discovery chain from server_url."""
    try:
        r = post_bounded(client, "initialize", server_url,
                         {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "pinhole-example", "version": "0"}}},
                         {"Accept": "application/json, text/event-stream"})
    except pinhole.Refused as e:
        refusal("server", server_url, e)
        return
    except TRANSPORT_ERRORS as e:
        failure("server", server_url, e)
        return
    record("server", server_url, allowed=True, status=r.status_code)
    if r.status_code != 401:
        return
    prm_url = resource_metadata_url(r.headers.get("www-authenticate"))
    if prm_url is None:
        return
    servers = fetch_document(client, "resource_metadata", prm_url,
                             lambda doc: validate_prm(doc, server_url))
    for issuer in servers or []:
        try:
            meta_url = as_metadata_url(issuer)
        except ValueError as e:
            record("authorization_server_metadata", issuer, allowed=False,
                   error="invalid_metadata", detail="issuer is not a URL: %s" % e)
            continue
        meta = fetch_document(client, "authorization_server_metadata", meta_url,
                              lambda doc, iss=issuer: validate_asm(doc, iss))
        if meta is None:
            continue
        # The endpoints the metadata names are dialed later (the browser
        # goes to authorization_endpoint; the client posts to the others):
        # each is checked now, before the flow starts.
        for key in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            url = meta.get(key)
            if not url:
                continue
            v = guard.check_url(url, lst)
            if v.allowed:
                record(key, url, allowed=True, checked_only=True, rule=v.rule_location)
            else:
                record(key, url, allowed=False, reason=v.reason, detail=v.detail,
                       checked_only=True)


def sse_endpoint(client, guard, lst, sse_url):
    """The legacy HTTP+SSE transport: the `endpoint` event names where to
    POST messages. It is resolved against the stream's URL and must be the
    stream's own origin (MCP) and pass the guard (checked when dialed)."""
    endpoint = None
    try:
        with client.stream("GET", sse_url, headers={"Accept": "text/event-stream"}) as r:
            record("sse", sse_url, allowed=True, status=r.status_code)
            try:
                identity(r)
            except BodyExceeded as e:
                record("sse_endpoint", sse_url, allowed=True, error="transport_error",
                       detail=str(e))
                return
            with Cut(r, DOCUMENT_SECONDS) as cut:
                try:
                    endpoint = endpoint_event(r.iter_raw())
                except httpx.HTTPError:
                    if not cut.fired:
                        raise
            if cut.fired:
                record("sse_endpoint", sse_url, allowed=True, error="transport_error",
                       detail="no endpoint event within %gs" % DOCUMENT_SECONDS)
                return
    except pinhole.Refused as e:
        refusal("sse", sse_url, e)
        return
    except TRANSPORT_ERRORS as e:
        failure("sse", sse_url, e)
        return
    if endpoint is None:
        return
    # The same RFC 3986 resolution and decision as a redirect's Location.
    try:
        d = guard.redirect_check(sse_url, endpoint, 0, lst)
    except pinhole.Refused as e:
        refusal("sse_endpoint", e.url or endpoint, e)
        return
    if not d.same_origin:
        record("sse_endpoint", d.url, allowed=False, reason="cross_origin",
               detail="the endpoint event names another origin than the stream's")
        return
    try:
        r = post_bounded(client, "ping", d.url, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    except pinhole.Refused as e:
        refusal("sse_endpoint", d.url, e)
        return
    except TRANSPORT_ERRORS as e:
        failure("sse_endpoint", d.url, e)
        return
    record("sse_endpoint", d.url, allowed=True, status=r.status_code)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--list", default="default")
    p.add_argument("--dns-server")
    p.add_argument("--sse", action="append", default=[])
    p.add_argument("server_url")
    args = p.parse_args(argv)
    try:
        guard = pinhole.Guard(args.table, dns_servers=args.dns_server)
    except pinhole.GuardError as e:
        print("mcp_client: %s" % e, file=sys.stderr)
        return 2
    with guard, pinhole.httpx.Client(guard, args.list, timeout=10,
                                     headers={"Accept-Encoding": "identity"}) as client:
        try:
            discover(client, guard, args.list, args.server_url)
            for url in args.sse:
                sse_endpoint(client, guard, args.list, url)
        except Abort as e:
            print("mcp_client: %s" % e, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
