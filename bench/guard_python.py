#!/usr/bin/python3
"""bench_guard_python - checks/s of pinhole.Guard.check_url from Python on
one thread, beside ph_decide_url in a C loop on the same guard, table
(RULES rules: a quarter wildcards) and URL mix (50% exact hits, 25%
wildcard hits, 15% misses, 10% wrong port), in the same process. Rounds
interleave the two figures so load from other processes hits both alike;
the best round of each is printed. Asserts nothing about time.

usage: bench_guard_python [--rules N] [--seconds S]   (run via the wrapper
       CMake generates, which passes --lib, --loop and --policyc)
"""
import argparse
import ctypes
import os
import random
import subprocess
import sys
import tempfile
import time

ROUNDS = 5


def generate(rules):
    out = ["version: 1", "lists:", "  default:", "    rules:"]
    for i in range(rules):
        if i % 4 == 0:
            out += ['      - host: "*.w%d.example.com"' % i, "        ports: [443]"]
        else:
            out += ["      - host: h%d.example.net" % i, "        ports: [443, 8443]"]
    return "\n".join(out) + "\n"


def urls(rules, n=4096):
    rnd = random.Random(42)
    out = []
    for i in range(n):
        r = rnd.randrange(rules)
        exact = r + 1 if r % 4 == 0 else r
        k = i % 20
        if k < 10:
            out.append("https://h%d.example.net/v1/mcp?x=1" % exact)
        elif k < 15:
            out.append("https://api.w%d.example.com/" % (r - r % 4))
        elif k < 18:
            out.append("https://miss%d.example.org/" % r)
        else:
            out.append("http://h%d.example.net:8080/" % exact)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", required=True)
    p.add_argument("--loop", required=True)
    p.add_argument("--policyc", required=True)
    p.add_argument("--rules", type=int, default=10000)
    p.add_argument("--seconds", type=float, default=2.0)
    a = p.parse_args()
    os.environ["PINHOLE_LIBRARY"] = a.lib
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "guard", "python"))
    import pinhole

    tmp = tempfile.mkdtemp(prefix="bench-guard-python-")
    src, table = os.path.join(tmp, "bench.yaml"), os.path.join(tmp, "bench.ptab")
    with open(src, "w") as f:
        f.write(generate(a.rules))
    subprocess.run([a.policyc, "compile", src, "-o", table], check=True,
                   stdout=subprocess.DEVNULL)
    g = pinhole.Guard(table, reload_interval_ms=0)
    us = urls(a.rules)
    loop = ctypes.CDLL(a.loop)
    loop.ph_bench_check_rate.restype = ctypes.c_double
    loop.ph_bench_check_rate.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                         ctypes.POINTER(ctypes.c_char_p),
                                         ctypes.POINTER(ctypes.c_size_t), ctypes.c_size_t,
                                         ctypes.c_double, ctypes.POINTER(ctypes.c_uint64)]
    enc = [u.encode() for u in us]
    c_urls = (ctypes.c_char_p * len(enc))(*enc)
    c_lens = (ctypes.c_size_t * len(enc))(*[len(u) for u in enc])
    c_allowed = ctypes.c_uint64(0)

    def py_round(seconds):
        n, allowed, check = 0, 0, g.check_url
        t0 = time.perf_counter()
        while True:
            for u in us:
                allowed += check(u, "default").allowed
            n += len(us)
            t = time.perf_counter() - t0
            if t >= seconds:
                return n / t, allowed

    def c_round(seconds):
        return loop.ph_bench_check_rate(g._handle, b"default", c_urls, c_lens, len(enc),
                                        seconds, ctypes.byref(c_allowed))

    best_py = best_c = 0.0
    share = a.seconds / ROUNDS
    py_allowed = 0
    for _ in range(ROUNDS):
        r, py_allowed = py_round(share)
        best_py = max(best_py, r)
        best_c = max(best_c, c_round(share))
    # Both loops must decide alike: the same share of the mix is allowed.
    expect = sum(g.check_url(u, "default").allowed for u in us) / len(us)
    print("bench_guard_python: %d rules, %d URLs (%.0f%% allowed), best of %d rounds, one thread"
          % (a.rules, len(us), 100 * expect, ROUNDS))
    print("  Guard.check_url (Python, ctypes)   %10.0f checks/s  %6.2f us/check"
          % (best_py, 1e6 / best_py))
    print("  ph_decide_url (C, same guard)      %10.0f checks/s  %6.2f us/check"
          % (best_c, 1e6 / best_c))
    print("  Python / C                          %9.1f%%" % (100 * best_py / best_c))
    g.close()
    for f in (src, table):
        os.unlink(f)
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
