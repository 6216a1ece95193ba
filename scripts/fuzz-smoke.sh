#!/bin/sh
# Smoke-run every fuzzer built in BUILD_DIR for SECONDS each, starting from
# its seed corpus in fuzz/corpus/<name>/ (read-only: new inputs go to a
# scratch directory) with its dictionary when there is one.
set -u
BUILD_DIR=${1:?usage: fuzz-smoke.sh BUILD_DIR SECONDS}
SECONDS_EACH=${2:-10}
cd "$(dirname "$0")/.."
passed=0; failed=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for bin in "$BUILD_DIR"/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin" | sed 's/^fuzz_//')
    mkdir -p "$scratch/$name"
    dict=""
    [ -f "fuzz/dict/$name.dict" ] && dict="-dict=fuzz/dict/$name.dict"
    if "$bin" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=0 $dict "$scratch/$name" "fuzz/corpus/$name" \
        >"$scratch/$name.log" 2>&1; then
        echo "fuzz $name: ok ($(grep -c . "$scratch/$name.log" >/dev/null; grep -o 'stat::number_of_executed_units: [0-9]*' "$scratch/$name.log" | tail -1))"
        passed=$((passed + 1))
    else
        echo "fuzz $name: FAILED"; tail -40 "$scratch/$name.log"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
