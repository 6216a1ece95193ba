#!/bin/sh
# Unpack Debian 12's own Node.js 18 (nodejs, libnode108 and the three
# packages whose files it loads from /usr/share/nodejs) into DIR, beside a
# system node that is not Debian's (NodeSource's 20, which conflicts with
# it): nothing is installed, only unpacked, so the system's node stays as
# it is. tests/node runs its tests under both when DIR/usr/bin/node exists
# (tests/node/node18.sh). Idempotent.
#
#   scripts/node18.sh [DIR]        (default /opt/pinhole-node18)
set -eu
DIR=${1:-/opt/pinhole-node18}
if [ -x "$DIR/usr/bin/node" ]; then
    echo "node18: $DIR has $("$DIR/usr/bin/node" --version 2>/dev/null || echo 'a node')"
    exit 0
fi
ver=$(apt-cache madison nodejs | awk '$3 ~ /^18\./ { print $3; exit }')
[ -n "$ver" ] || { echo "node18: apt knows no nodejs 18 (run apt-get update)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-node18.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
(cd "$tmp" && apt-get download -q "nodejs=$ver" "libnode108=$ver" \
    node-acorn node-cjs-module-lexer node-undici >/dev/null 2>&1) ||
    { echo "node18: apt-get download failed" >&2; exit 1; }
mkdir -p "$DIR.new"
for d in "$tmp"/*.deb; do dpkg-deb -x "$d" "$DIR.new"; done
rm -rf "$DIR" && mv "$DIR.new" "$DIR"
echo "node18: Debian's nodejs $ver unpacked in $DIR"
