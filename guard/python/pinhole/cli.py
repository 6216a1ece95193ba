"""python3 -m pinhole check: the same lines and exit statuses as
`pinhole-guard check` (docs/pinhole-guard.md), through the Python binding.

Exit status: 0 every URL allowed, 1 any refused, 2 usage error or unusable
table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List, Optional

from . import _lib
from .errors import Error, GuardError, Refused
from .guard import Guard, _addresses, build_is_test_loopback

EXIT_ALLOWED, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
LINE_MAX_BYTES = _lib.PH_URL_MAX_LEN + 2


def _error(msg):
    sys.stderr.write("pinhole: %s\n" % msg)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        _error(message)
        sys.exit(EXIT_USAGE)


def _shown(url):
    """The URL as far as it is printable ASCII (as pinhole-guard shows it):
    hostile input must not forge a second output line."""
    out = bytearray()
    i = 0
    while i < len(url) and len(out) + 4 < 256:
        c = url[i]
        out.append(c if 0x20 < c < 0x7F and c != 0x22 else 0x3F)
        i += 1
    if len(out) + 4 >= 256 and len(url) > len(out):
        out += b"..."
    return out.decode("ascii")


def _quoted(s):
    out = ['"']
    for ch in s.encode("utf-8", "replace"):
        if ch in (0x22, 0x5C):
            out.append("\\")
        out.append(chr(ch) if 0x20 <= ch < 0x7F else "?")
    out.append('"')
    return "".join(out)


def _print_text(url, v, addrs):
    if v.allowed:
        line = "ALLOW %s host=%s port=%d rule=%s:%d list=%s match=%s" % (
            url, v.host, v.port, v.rule.file, v.rule.line, v.rule.list, v.rule.host)
        if addrs:
            line += " addresses=" + ",".join(a.host for a in addrs)
        print(line)
    else:
        print("DENY %s reason=%s detail=%s" % (url, v.reason, _quoted(v.detail)))


def _print_json(url, v, addrs, resolve):
    o = {"url": url, "allowed": v.allowed, "reason": v.reason}
    if v.host:
        o["host"] = v.host
        o["port"] = v.port
    if v.rule is not None:
        r = {"list": v.rule.list, "host": v.rule.host, "file": v.rule.file, "line": v.rule.line}
        if v.rule.reason:
            r["reason"] = v.rule.reason
        o["rule"] = r
    if resolve and v.allowed:
        o["addresses"] = [a.host for a in addrs]
    if not v.allowed and v.detail:
        o["detail"] = v.detail
    if v.policy_id:
        o["policy_id"] = v.policy_id
    print(json.dumps(o, separators=(",", ":"), ensure_ascii=True))


def _check_one(guard, args, url):
    addrs = []
    if args.resolve:
        try:
            v, pinned = guard._decide_and_resolve(url, args.list)
            addrs = _addresses(pinned)
        except Refused as e:
            v = e.verdict
    else:
        v = guard.check_url(url, args.list)
    shown = _shown(url)
    if args.json:
        _print_json(shown, v, addrs, args.resolve)
    else:
        _print_text(shown, v, addrs)
    sys.stdout.flush()
    return v.allowed


def _check_stdin(guard, args):
    ok = True
    data = sys.stdin.buffer
    for raw in data:
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if not line:
            continue
        if len(line) > LINE_MAX_BYTES:
            line = line[:_lib.PH_URL_MAX_LEN + 1]
        ok &= _check_one(guard, args, line)
    return EXIT_ALLOWED if ok else EXIT_REFUSED


def _cmd_check(argv):
    p = _Parser(prog="python3 -m pinhole check",
                description="Prints one verdict line per URL (read one per line from stdin "
                            "when none is given).",
                epilog="Exit status: 0 all allowed, 1 any refused, 2 usage error or "
                       "unusable table.")
    p.add_argument("-t", "--table", default=os.environ.get("PINHOLE_TABLE"),
                   help="compiled allowlist (default: $PINHOLE_TABLE)")
    p.add_argument("-l", "--list", default="default", help="allowlist name (default: default)")
    p.add_argument("-r", "--resolve", action="store_true",
                   help="also resolve the host and check every address")
    p.add_argument("--dns-server", help="DNS servers for --resolve (default: /etc/resolv.conf)")
    p.add_argument("--dns-timeout", help="overall resolution timeout in ms (default: 5000)")
    p.add_argument("-j", "--json", action="store_true", help="one JSON object per line")
    p.add_argument("urls", nargs="*", metavar="URL")
    args = p.parse_intermixed_args(argv)
    timeout = 0
    if args.dns_timeout is not None:
        t = args.dns_timeout
        if not (t.isdigit() and t.isascii()) or not 1 <= int(t) <= 600000:
            _error("--dns-timeout takes milliseconds, 1..600000")
            return EXIT_USAGE
        timeout = int(t)
    if not args.table:
        _error("no table: give --table FILE or set PINHOLE_TABLE")
        return EXIT_USAGE
    if (args.dns_server is not None or timeout) and not args.resolve:
        _error("--dns-server and --dns-timeout need --resolve")
        return EXIT_USAGE
    try:
        guard = Guard(args.table, dns_servers=args.dns_server, dns_timeout_ms=timeout,
                      reload_interval_ms=0)
    except GuardError as e:
        _error(e.message)
        return EXIT_USAGE
    try:
        if not args.urls:
            return _check_stdin(guard, args)
        ok = True
        for u in args.urls:
            ok &= _check_one(guard, args, os.fsencode(u))
        return EXIT_ALLOWED if ok else EXIT_REFUSED
    finally:
        guard.close()


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if not argv:
            _error("usage: python3 -m pinhole check [--table FILE] [--list NAME] [--resolve] "
                   "[--json] [URL...]")
            return EXIT_USAGE
        if argv[0] in ("-h", "--help"):
            print("Usage: python3 -m pinhole check [OPTIONS] [URL...]\n"
                  "Run 'python3 -m pinhole check --help' for the options.")
            return EXIT_ALLOWED
        if build_is_test_loopback():
            _error("warning: TEST BUILD, 127.0.0.0/8 and ::1 are exempt from the address "
                   "denylist")
        if argv[0] == "check":
            return _cmd_check(argv[1:])
        _error("unknown command '%s'" % argv[0])
        return EXIT_USAGE
    except Error as e:
        _error(str(e))
        return EXIT_USAGE
