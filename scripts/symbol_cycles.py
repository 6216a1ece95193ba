#!/usr/bin/python3
"""symbol_cycles.py OBJDIR [SRCDIR] - the "uses" graph of a program's own
object files and its cycles (tests/proxy: proxy.no_cycles).

File A uses file B when A's object references a symbol B's object defines
(nm: U in A, T/D/B/R in B). A cycle is a chain of files, each using what the
next defines, that comes back to its start: the strongly connected
components of more than one file. Prints every edge with the symbols behind
it, then the components; exits 1 when there is one.

With SRCDIR, only the objects of SRCDIR's .c files count (an object left
behind by a deleted source does not), and the #include graph of SRCDIR
(quoted includes resolved in SRCDIR) is checked the same way.
"""
import os
import re
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRGSC":
            defined.add(parts[2])
    return defined, used


def sccs(nodes, edges):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def main():
    objdir = sys.argv[1]
    srcdir = sys.argv[2] if len(sys.argv) > 2 else None
    objs = sorted(f for f in os.listdir(objdir) if f.endswith(".c.o") and
                  (srcdir is None or os.path.exists(os.path.join(srcdir, f[:-2]))))
    name = {o: o[:-len(".c.o")] for o in objs}
    table = {name[o]: symbols(os.path.join(objdir, o)) for o in objs}
    owner = {}
    for n, (defined, _) in table.items():
        for s in defined:
            owner[s] = n
    edges, why = {}, {}
    for n, (_, used) in table.items():
        for s in used:
            m = owner.get(s)
            if m and m != n:
                edges.setdefault(n, set()).add(m)
                why.setdefault((n, m), []).append(s)
    for (a, b), syms in sorted(why.items()):
        print("%s -> %s: %s" % (a, b, " ".join(sorted(syms))))
    bad = sccs(table.keys(), edges)
    for c in bad:
        print("SYMBOL CYCLE:", " ".join(c))
    if srcdir:
        files = [f for f in os.listdir(srcdir) if f.endswith((".c", ".h"))]
        inc = {}
        for f in files:
            for m in re.finditer(r'^#include "([^"]+)"', open(os.path.join(srcdir, f)).read(), re.M):
                if m.group(1) in files:
                    inc.setdefault(f, set()).add(m.group(1))
        for c in sccs(files, inc):
            print("INCLUDE CYCLE:", " ".join(c))
            bad.append(c)
    print("%d files, %d edges, %d cycles" % (len(table), sum(len(v) for v in edges.values()), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
