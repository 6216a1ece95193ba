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

usage: mcp_client.py --table TABLE [--list LIST] [--dns-server S]
                     [--sse SSE_URL ...] MCP_SERVER_URL
exit status: 0 the chain was walked (refused hops are results, not
errors), 2 usage error or unusable table.
"""
import argparse
import json
import re
import sys
from urllib.parse import urlsplit, urlunsplit

import pinhole
import pinhole.httpx


def record(kind, url, **fields):
    print(json.dumps(dict({"hop": kind, "url": url}, **fields), sort_keys=True), flush=True)


def refusal(kind, url, e):
    record(kind, url, allowed=False, reason=e.reason, detail=e.detail)


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


def fetch_json(client, kind, url):
    """GET url through the guard; the parsed JSON, or None when refused."""
    try:
        r = client.get(url)
    except pinhole.Refused as e:
        refusal(kind, url, e)
        return None
    record(kind, url, allowed=True, status=r.status_code,
           redirects=len(r.extensions.get("pinhole_redirects", [])))
    if r.status_code != 200:
        return None
    return r.json()


def discover(client, guard, lst, server_url):
    """The streamable-HTTP discovery chain from server_url."""
    try:
        r = client.post(server_url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                          "params": {"protocolVersion": "2025-06-18",
                                                     "capabilities": {},
                                                     "clientInfo": {"name": "pinhole-example",
                                                                    "version": "0"}}},
                        headers={"Accept": "application/json, text/event-stream"})
    except pinhole.Refused as e:
        refusal("server", server_url, e)
        return
    record("server", server_url, allowed=True, status=r.status_code)
    if r.status_code != 401:
        return
    prm_url = resource_metadata_url(r.headers.get("www-authenticate"))
    if prm_url is None:
        return
    prm = fetch_json(client, "resource_metadata", prm_url)
    if prm is None:
        return
    for issuer in prm.get("authorization_servers", []):
        meta_url = as_metadata_url(issuer)
        meta = fetch_json(client, "authorization_server_metadata", meta_url)
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
            event = None
            for line in r.iter_lines():
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event == "endpoint":
                    endpoint = line[5:].strip()
                    break
    except pinhole.Refused as e:
        refusal("sse", sse_url, e)
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
        r = client.post(d.url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    except pinhole.Refused as e:
        refusal("sse_endpoint", d.url, e)
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
    with guard, pinhole.httpx.Client(guard, args.list, timeout=10) as client:
        discover(client, guard, args.list, args.server_url)
        for url in args.sse:
            sse_endpoint(client, guard, args.list, url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
