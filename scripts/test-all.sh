#!/bin/sh
# The whole suite, as `make test` runs it: the dev build's tests (unit and
# end-to-end), the unit tests again under ASan+UBSan, then every fuzzer
# smoke-run on its seed corpus. Prints one summary line per stage and a total.
set -u
cd "$(dirname "$0")/.."
JOBS=$(nproc)
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
status=0
summary=""

stage() {
    name=$1; shift
    echo "==> $name"
    if "$@"; then summary="$summary
  $name: ok"; else summary="$summary
  $name: FAILED"; status=1; fi
}

stage "dev tests" ctest --preset dev --output-junit junit-dev.xml
stage "asan build" sh -c "cmake --preset asan >/dev/null && cmake --build --preset asan -j $JOBS"
stage "asan unit tests" ctest --preset asan
stage "fuzz build" sh -c "cmake --preset fuzz >/dev/null && cmake --build --preset fuzz -j $JOBS"
stage "fuzz smoke" sh scripts/fuzz-smoke.sh build/fuzz "$FUZZ_SECONDS"

echo "==> summary$summary"
if [ $status -eq 0 ]; then echo "make test: all stages passed"; else echo "make test: FAILED"; fi
exit $status
