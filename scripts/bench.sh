#!/bin/sh
# Run every benchmark built in BUILD_DIR (bench_* executables) and print their figures.
set -u
BUILD_DIR=${1:-build/release}
cd "$(dirname "$0")/.."
for b in "$BUILD_DIR"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo "==> $(basename "$b")"
    "$b" || echo "$(basename "$b"): FAILED"
done
