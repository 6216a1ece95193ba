#!/usr/bin/python3
"""test_mcp.py - examples/mcp_client.py walks the MCP discovery chain of a
hostile server (fake_mcp_server.py) through pinhole.httpx; asserts exactly
which hops were dialed, which were refused, and the reason code of each."""
import json
import os
import subprocess
import sys

import support
from support import DOMAIN as D, check

support.setup()
support.need_module("httpx", "python3-httpx")


def main():
    dns = support.Dnsmasq({"mcp." + D: ["127.0.0.1"], "as." + D: ["127.0.0.1"],
                           "meta." + D: ["169.254.169.254"],
                           "collector." + D: ["127.0.0.1"]})
    srv = subprocess.Popen([sys.executable, os.path.join(support.HERE, "fake_mcp_server.py"),
                            "--domain", D], stdout=subprocess.PIPE, text=True)
    support.at_exit(lambda: (srv.terminate(), srv.wait()))
    port = int(srv.stdout.readline().split()[1])
    table = support.compile_table(support.allowlist({"mcp": [
        ("mcp." + D, [port]), ("as." + D, [port]), ("meta." + D, [port])]}))
    env = dict(os.environ, PYTHONPATH=os.path.join(support.SOURCE, "guard", "python"))
    example = os.path.join(support.SOURCE, "examples", "mcp_client.py")

    def walk(server_url, *sse):
        cmd = [sys.executable, example, "--table", table, "--list", "mcp",
               "--dns-server", dns.server, server_url]
        for s in sse:
            cmd += ["--sse", s]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        check("mcp_client.py %s exits 0" % server_url, (0, ""), (r.returncode, r.stderr))
        hops = [json.loads(line) for line in r.stdout.splitlines()]
        for h in hops:
            print("#   %-30s %-70s %s" % (h["hop"], h["url"],
                                          h.get("reason") or h.get("status") or "checked"))
        return [(h["hop"], h["url"], h.get("reason") or h.get("status")
                 or ("allowed" if h.get("allowed") else "?")) for h in hops]

    o = "http://%%s.%s:%d" % (D, port)
    got = walk(o % "mcp" + "/mcp", o % "mcp" + "/sse", o % "mcp" + "/sse-other",
               o % "mcp" + "/sse-same")
    want = [
        ("server", o % "mcp" + "/mcp", 401),
        ("resource_metadata", o % "mcp" + "/.well-known/oauth-protected-resource/mcp", 200),
        ("authorization_server_metadata",
         "http://127.0.0.1:%d/.well-known/oauth-authorization-server" % port, "ip_literal"),
        ("authorization_server_metadata",
         "http://169.254.169.254/.well-known/oauth-authorization-server", "ip_literal"),
        ("authorization_server_metadata",
         o % "unlisted" + "/.well-known/oauth-authorization-server", "not_allowlisted"),
        ("authorization_server_metadata",
         o % "meta" + "/.well-known/oauth-authorization-server", "denied_address"),
        ("authorization_server_metadata", o % "as" + "/.well-known/oauth-authorization-server",
         200),
        ("authorization_endpoint", o % "as" + "/authorize", "allowed"),
        ("token_endpoint", "http://10.0.0.1/token", "ip_literal"),
        ("registration_endpoint", o % "as" + "/register", "allowed"),
        ("sse", o % "mcp" + "/sse", 200),
        ("sse_endpoint", o % "collector" + "/messages?session_id=1", "not_allowlisted"),
        ("sse", o % "mcp" + "/sse-other", 200),
        ("sse_endpoint", o % "as" + "/messages?session_id=2", "cross_origin"),
        ("sse", o % "mcp" + "/sse-same", 200),
        ("sse_endpoint", o % "mcp" + "/messages?session_id=3", 202),
    ]
    check("discovery chain: every hop, refused ones with their reason", want, got)
    got = walk(o % "mcp" + "/mcp-hostile")
    check("a 401 naming the metadata address as resource_metadata", [
        ("server", o % "mcp" + "/mcp-hostile", 401),
        ("resource_metadata",
         "http://169.254.169.254/latest/meta-data/iam/security-credentials/", "ip_literal")],
        got)
    got = walk(o % "unlisted" + "/mcp")
    check("an unlisted MCP server is not dialed",
          [("server", o % "unlisted" + "/mcp", "not_allowlisted")], got)


support.run(main)
