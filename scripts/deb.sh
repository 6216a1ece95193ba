#!/bin/sh
# make deb: the Debian binary packages (debian/, dh with the cmake build
# system) from this tree, built out of its way: the tracked and untracked
# (not ignored) files are copied to build/deb/src, dpkg-buildpackage runs
# there, and the .deb files land in build/deb/. The tree itself gets no
# debian/tmp, stamps or build directory.
#
#   sh scripts/deb.sh [OUTDIR]     (default build/deb)
# Prints the packages built; exit status 1 when the build fails (its log:
# OUTDIR/build.log).
set -eu
cd "$(dirname "$0")/.."
out=${1:-build/deb}
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/src
rm -rf "$src"
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo
mkdir -p "$src"
# The tree as it is now, build/ excluded (it is ignored).
git ls-files -z --cached --others --exclude-standard |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar --null -T - -cf - | tar -xf - -C "$src"
# Binary packages only, unsigned; no -dbgsym packages (a local build).
if ! (cd "$src" && DEB_BUILD_OPTIONS="noddebs parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
        dpkg-buildpackage -b -us -uc) >"$out/build.log" 2>&1; then
    tail -40 "$out/build.log"
    echo "deb: the build failed (log: $out/build.log)" >&2
    exit 1
fi
ls "$out"/*.deb
