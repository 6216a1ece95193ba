#!/bin/sh
# Run every benchmark built in BUILD_DIR (bench_* executables) and print their figures.
#
#   scripts/bench.sh [BUILD_DIR]
#   scripts/bench.sh --ab REV [BUILD_DIR]
#
# --ab REV: an A/B run of bench_proxy in one run: the pinhole-proxy of git
# revision REV (A; exported with git archive and built as a release build in
# build/ab/REV, once) against this tree's (B, from BUILD_DIR), the same
# rounds interleaved. Extra bench_proxy options may follow in BENCH_AB_ARGS.
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--ab" ]; then
    [ $# -ge 2 ] || { echo "usage: scripts/bench.sh --ab REV [BUILD_DIR]" >&2; exit 2; }
    rev=$(git rev-parse --short "$2^{commit}") || { echo "bench: $2: not a revision" >&2; exit 2; }
    BUILD_DIR=${3:-build/bench}
    new="$BUILD_DIR/proxy/pinhole-proxy-testloopback"
    [ -x "$new" ] && [ -x "$BUILD_DIR/bench/bench_proxy" ] || {
        echo "bench: $BUILD_DIR has no bench_proxy/pinhole-proxy-testloopback (make bench builds them)" >&2
        exit 1
    }
    ab="build/ab/$rev"
    old="$ab/build/proxy/pinhole-proxy-testloopback"
    if [ ! -x "$old" ]; then
        echo "==> building pinhole-proxy of $rev in $ab (release)"
        rm -rf "$ab" && mkdir -p "$ab/src" || exit 1
        git archive "$rev" | tar -x -C "$ab/src" || exit 1
        cmake -S "$ab/src" -B "$ab/build" -DCMAKE_BUILD_TYPE=Release -DPINHOLE_BUILD_BENCH=ON \
            >"$ab/configure.log" 2>&1 || { echo "bench: configure of $rev failed: $ab/configure.log" >&2; exit 1; }
        MAKEFLAGS= cmake --build "$ab/build" -j "${JOBS:-2}" --target pinhole-proxy-testloopback \
            >"$ab/build.log" 2>&1 || { echo "bench: build of $rev failed: $ab/build.log" >&2; exit 1; }
    fi
    echo "==> bench_proxy A/B: A = $rev, B = this tree ($(git describe --always --dirty))"
    # shellcheck disable=SC2086
    exec "$BUILD_DIR/bench/bench_proxy" --proxy "$old" --proxy "$new" ${BENCH_AB_ARGS:-}
fi
BUILD_DIR=${1:-build/release}
for b in "$BUILD_DIR"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo "==> $(basename "$b")"
    "$b" || echo "$(basename "$b"): FAILED"
done
