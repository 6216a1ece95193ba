#!/bin/sh
# The whole suite, as `make test` runs it: the dev build's tests (unit and
# end-to-end), the unit tests again under ASan+UBSan, then every fuzzer
# smoke-run from its seed corpus. One summary line per stage, then a total.
set -u
cd "$(dirname "$0")/.."
JOBS=$(nproc)
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
LOGDIR=build/test-logs
mkdir -p "$LOGDIR"
status=0
passed=0
failed=0
summary=""

# Adds the counts from a ctest log ("NN% tests passed, F tests failed out of T").
count_ctest() {
    line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -1)
    [ -n "$line" ] || return 0
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/')
    t=$(echo "$line" | sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\2/')
    passed=$((passed + t - f))
    failed=$((failed + f))
}


run_stage() {
    name=$1; log=$LOGDIR/$2; shift 2
    echo "==> $name"
    "$@" >"$log" 2>&1
    rc=$?
    cat "$log"
    if [ $rc -eq 0 ]; then
        summary="$summary
  $name: ok"
    else
        summary="$summary
  $name: FAILED (log: $log)"
        status=1
    fi
}

# The docker sandbox tests need an engine; without one they show as Skipped.
sh scripts/start-dockerd.sh
run_stage "dev tests (unit + e2e)" dev.log ctest --preset dev --output-junit junit-dev.xml
count_ctest "$LOGDIR/dev.log"
if run_stage "asan build" asan-build.log sh -c "cmake --preset asan >/dev/null && cmake --build --preset asan -j $JOBS"; [ $rc -eq 0 ]; then
    run_stage "asan unit tests" asan.log ctest --preset asan
    count_ctest "$LOGDIR/asan.log"
fi
run_stage "fuzz build" fuzz-build.log sh -c "cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j $JOBS"
run_stage "fuzz smoke (${FUZZ_SECONDS}s each)" fuzz.log sh scripts/fuzz-smoke.sh build/fuzz "$FUZZ_SECONDS"
fp=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\1/p' "$LOGDIR/fuzz.log" | tail -1)
ff=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed$/\2/p' "$LOGDIR/fuzz.log" | tail -1)
passed=$((passed + ${fp:-0}))
failed=$((failed + ${ff:-0}))

echo "==> summary$summary"
[ $status -eq 0 ] || [ $failed -gt 0 ] || failed=1
echo "$passed passed, $failed failed"
exit $status
