#!/bin/sh
# Smoke-run every fuzzer built in BUILD_DIR for SECONDS each, starting from
# its seed corpus in fuzz/corpus/<name>/ (left untouched: new inputs go to a
# scratch directory), with fuzz/dict/<name>.dict when there is one.
set -u
BUILD_DIR=${1:?usage: fuzz-smoke.sh BUILD_DIR [SECONDS]}
SECONDS_EACH=${2:-10}
cd "$(dirname "$0")/.."
passed=0; failed=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for bin in "$BUILD_DIR"/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=$(basename "$bin" | sed 's/^fuzz_//')
    mkdir -p "$scratch/$name"
    set -- -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    [ -f "fuzz/dict/$name.dict" ] && set -- "$@" -dict="fuzz/dict/$name.dict"
    if "$bin" "$@" "$scratch/$name" "fuzz/corpus/$name" >"$scratch/$name.log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$name.log" | tail -1)
        echo "fuzz $name: ok (${runs:-?} executions in ${SECONDS_EACH}s)"
        passed=$((passed + 1))
    else
        echo "fuzz $name: FAILED"
        tail -40 "$scratch/$name.log"
        failed=$((failed + 1))
    fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
