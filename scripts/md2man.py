#!/usr/bin/python3
"""One man page from a page of docs/ (pandoc, `-t man`), at build time.

    md2man.py NAME SECTION SOURCE.md OUT [--part HEADING] [--summary TEXT]

The docs are written as man pages in Markdown: the first "# " line is the
page's title and is dropped (the name and section become the .TH line);
"## " headings become sections (.SH), "### " subsections. --part takes one
"## HEADING" of SOURCE (leading numbering such as "4. " ignored) and its
subsections, one level up: a tool documented inside a module's page; --drop
leaves sections out (benchmark figures and test lists stay in docs/). A page
without a "## NAME" section gets one from --summary, for whatis and apropos.
Exit status 1, with a message, when the part or pandoc fails.
"""
import argparse
import math
import os
import re
import subprocess
import sys


def heading_text(line):
    return re.sub(r"^\d+\.\s+", "", line.lstrip("#").strip())


def take_part(lines, part):
    out, inside = [], False
    for line in lines:
        if line.startswith("## ") or line.startswith("# "):
            if inside:
                break
            inside = line.startswith("## ") and heading_text(line) == part
            continue
        if inside:
            out.append(line[1:] if line.startswith("###") else line)
    if not out:
        sys.exit("md2man: no section '## %s'" % part)
    return out


# Text width the tables are laid out in: an 80-column terminal less the
# page's indent and a margin for a table inside a list.
TABLE_WIDTH = 66
CELL = re.compile(r"T\{\n((?:.*?\n)??)T\}(@?)", re.S)


ESCAPE = re.compile(r"\\f\[[A-Z]+\]|\\f[BIRPV]|\\\(..|\\\[[^]]*\]|\\[-&e:]")


def rendered(escape):
    """What an escape takes on the terminal: a break point splits a word,
    a named character is one column, a font change none."""
    e = escape.group(0)
    if e == "\\:":
        return " "
    return "x" if e.startswith("\\(") or e.startswith("\\[") or e in ("\\-", "\\e") else ""


def words(cell):
    """The widest unbreakable run of a cell, roughly as troff sees it."""
    return max((len(w) for w in ESCAPE.sub(rendered, cell).split()), default=1)


def break_points(cell):
    """Lets troff break a long code word in a narrow cell after , / _ . : =
    (a zero-width break point, \\:), where nothing else could."""
    def one(word):
        if len(ESCAPE.sub("x", word)) <= 10:
            return word
        return re.sub(r"(?<!\\)([,/_.:=])(?=.)", r"\1\\:", word)
    return "\n".join(" ".join(one(w) for w in line.split(" ")) for line in cell.split("\n"))


def fit_tables(roff):
    """Gives every table column an explicit width (pandoc leaves them to
    tbl, which lays a table with long cells out wider than the line): each
    column first gets its longest word (so nothing has to be broken), then
    the width left beside the column gaps is shared by each column's longest
    cell (square root, so a long column does not starve a short one)."""
    out, pos = [], 0
    for m in re.finditer(r"^\.TS\ntab\(@\);\n(.*?)\.\n(.*?)^\.TE$", roff, re.S | re.M):
        kinds = m.group(1).split()
        body = CELL.sub(lambda c: "T{\n%sT}%s" % (break_points(c.group(1)), c.group(2)),
                        m.group(2))
        longest = [1] * len(kinds)
        word = [1] * len(kinds)
        col = 0
        for c in CELL.finditer(body):
            if col < len(kinds):
                longest[col] = max(longest[col], len(c.group(1)))
                word[col] = max(word[col], words(c.group(1)))
            col = col + 1 if c.group(2) == "@" else 0
        room = TABLE_WIDTH - 3 * (len(kinds) - 1)
        need = [min(w + 1, 40) for w in word]
        while sum(need) > room and max(need) > 4:
            need[need.index(max(need))] -= 1  # the widest gives way (a hyphen breaks it)
        extra = room - sum(need)
        weight = [math.sqrt(min(n, 400)) for n in longest]
        widths = [n + int(extra * w / sum(weight)) for n, w in zip(need, weight)]
        spec = " ".join("%sw(%dn)" % (k, w) for k, w in zip(kinds, widths))
        out.append(roff[pos:m.start(1)])
        out.append(spec + ".\n" + body)
        pos = m.end(2)
    out.append(roff[pos:])
    return "".join(out)


def drop_parts(lines, names):
    out, skipping = [], False
    for line in lines:
        if line.startswith("## "):
            skipping = heading_text(line) in names
        if not skipping:
            out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("section")
    ap.add_argument("source")
    ap.add_argument("out")
    ap.add_argument("--part")
    ap.add_argument("--summary")
    ap.add_argument("--drop", default="", help="comma-separated '## ' sections left out")
    ap.add_argument("--version", default="")
    a = ap.parse_args()
    with open(a.source, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if a.part:
        lines = take_part(lines, a.part)
    elif lines and lines[0].startswith("# "):
        lines = lines[1:]
    if a.drop:
        lines = drop_parts(lines, set(a.drop.split(",")))
    if not any(re.match(r"^## NAME\s*$", l) for l in lines):
        if not a.summary:
            sys.exit("md2man: %s has no NAME section and no --summary" % a.source)
        first = next((l for l in lines if l.strip()), "")
        intro = [] if first.startswith("## ") else ["## DESCRIPTION", ""]
        lines = ["## NAME", "", "%s \\- %s" % (a.name, a.summary), ""] + intro + lines
    if a.drop or a.part:
        lines += ["", "## NOTES", "",
                  "This page is taken from **%s** (installed under /usr/share/doc/pinhole/), "
                  "which has %s." % (os.path.basename(a.source),
                                     "the whole text" if a.part else
                                     "the sections left out here too: " + ", ".join(a.drop.split(",")))]
    # NAME is plain text for whatis and apropos: no code spans.
    in_name = False
    for i, line in enumerate(lines):
        if line.startswith("## "):
            in_name = line.strip() == "## NAME"
        elif in_name:
            lines[i] = line.replace("`", "")
    text = "\n".join(lines) + "\n"
    cmd = ["pandoc", "-f", "gfm", "-t", "man", "-s", "--shift-heading-level-by=-1",
           "-M", "title=" + a.name.upper(), "-M", "section=" + a.section,
           "-M", "header=Pinhole", "-M", "footer=pinhole " + a.version,
           "-o", "-"]
    r = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True, check=False)
    if r.returncode != 0:
        sys.exit("md2man: pandoc failed for %s: %s" % (a.source, r.stderr.decode()))
    roff = fit_tables(r.stdout.decode("utf-8"))
    # Left-adjusted text: justified lines of long code words and narrow
    # table cells cannot be filled (troff warns "cannot adjust line").
    # On a terminal (continuous rendering, cR) the page grows as text needs;
    # tbl checks a text block against the page as it stands and warns "will
    # not fit on one page" when it happens to cross the old length: start
    # with room enough (the macros cut the page to its text at the end).
    roff = re.sub(r"^(\.TH .*)$", r"\1\n.ad l\n.if \\n[cR] .pl 100000v", roff, count=1,
                  flags=re.M)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(roff)


if __name__ == "__main__":
    main()
