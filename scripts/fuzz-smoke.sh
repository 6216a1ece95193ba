#!/bin/sh
# Smoke-run every fuzzer declared in fuzz/*.cmake (ph_add_fuzzer(NAME <name>
# ...)) from BUILD_DIR for SECONDS each, starting from its seed corpus in
# fuzz/corpus/<name>/ (left untouched: new inputs go to a scratch directory),
# with fuzz/dict/<name>.dict when there is one. Crashing inputs are kept in
# BUILD_DIR/fuzz-artifacts/.
#
# One line per fuzzer, "fuzz <name>: ok (...)" or "fuzz <name>: FAILED (why)",
# then "N passed, N failed". It fails when any fuzzer fails, when a declared
# fuzzer was not built, when a fuzzer was built that is not declared, and
# when none is declared or built. Any sanitizer report stops the fuzzer
# (the fuzz preset compiles with -fno-sanitize-recover=all; halt_on_error
# and abort_on_error are set here), and a "runtime error:" line in the log
# fails the run even if the fuzzer exited 0.
set -u
BUILD_DIR=${1:?usage: fuzz-smoke.sh BUILD_DIR [SECONDS]}
SECONDS_EACH=${2:-10}
cd "$(dirname "$0")/.."
halt=halt_on_error=1:abort_on_error=1
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}$halt
UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}$halt:print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS
passed=0; failed=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

declared=$(sed -nE 's/^[[:space:]]*ph_add_fuzzer\([[:space:]]*NAME[[:space:]]+([A-Za-z0-9_]+).*/\1/p' \
    fuzz/*.cmake | sort -u)
built=$(for bin in "$BUILD_DIR"/fuzz/fuzz_*; do
    [ -f "$bin" ] && [ -x "$bin" ] && basename "$bin" | sed 's/^fuzz_//'
done | sort -u)
n_declared=$(printf '%s\n' "$declared" | grep -c .)
n_built=$(printf '%s\n' "$built" | grep -c .)
echo "fuzz-smoke: $n_declared fuzzers declared in fuzz/*.cmake, $n_built built in $BUILD_DIR/fuzz"

for name in $declared; do
    bin=$BUILD_DIR/fuzz/fuzz_$name
    if ! [ -x "$bin" ]; then
        echo "fuzz $name: FAILED (declared in fuzz/*.cmake but not built: $bin)"
        failed=$((failed + 1))
        continue
    fi
    mkdir -p "$scratch/$name" "$BUILD_DIR/fuzz-artifacts"
    # A crashing input is kept under the build dir, never in the source tree.
    set -- -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -error_exitcode=1 -artifact_prefix="$BUILD_DIR/fuzz-artifacts/$name-"
    [ -f "fuzz/dict/$name.dict" ] && set -- "$@" -dict="fuzz/dict/$name.dict"
    "$bin" "$@" "$scratch/$name" "fuzz/corpus/$name" >"$scratch/$name.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q 'runtime error:' "$scratch/$name.log"; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/$name.log" | tail -1)
        echo "fuzz $name: ok (${runs:-?} executions in ${SECONDS_EACH}s)"
        passed=$((passed + 1))
    else
        why=$(grep -m1 -E 'runtime error:|ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|libFuzzer)' \
            "$scratch/$name.log" | cut -c1-200)
        echo "fuzz $name: FAILED (exit $rc${why:+: $why})"
        ls "$BUILD_DIR/fuzz-artifacts/$name-"* 2>/dev/null | sed 's/^/  input kept: /'

        tail -40 "$scratch/$name.log"
        failed=$((failed + 1))
    fi
done
for name in $built; do
    if ! printf '%s\n' "$declared" | grep -qx "$name"; then
        echo "fuzz $name: FAILED (built as $BUILD_DIR/fuzz/fuzz_$name but not declared in fuzz/*.cmake)"
        failed=$((failed + 1))
    fi
done
if [ "$n_declared" -eq 0 ] || [ "$n_built" -eq 0 ]; then
    echo "fuzz-smoke: FAILED: $n_declared declared, $n_built built: nothing was fuzzed"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
