#!/bin/sh
# Run every benchmark built in BUILD_DIR (bench_* executables) and print their figures.
# bench_artifacts' S3 rows need an object store: without PH_BENCH_S3_CONFIG,
# a single-node Ceph RGW is brought up for the run (scripts/start-ceph-rgw.sh,
# memstore, loopback) when ceph is installed, and stopped after; otherwise
# the S3 rows are left out and this says so.
set -u
BUILD_DIR=${1:-build/release}
cd "$(dirname "$0")/.."
RGW_DIR=
BENCH_TMP=
if [ -z "${PH_BENCH_S3_CONFIG:-}" ] && [ -x "$BUILD_DIR/bench/bench_artifacts" ]; then
    BENCH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-bench-rgw.XXXXXX")
    RGW_DIR=$BENCH_TMP/rgw
    # The test fixture's gateway and keys (RGW_DIR/rgw.env, RGW_DIR/creds);
    # the benchmark's own settings: the backend's default part size and
    # multipart threshold (docs/artifacts.md), a bucket of its own.
    if sh tests/artifacts/rgw_fixture.sh start "$RGW_DIR" >/dev/null 2>"$BENCH_TMP/start.log"; then
        . "$RGW_DIR/rgw.env"
        printf 'endpoint = %s\nregion = %s\nbucket = pinhole-bench\nallow_http = true\n%s\n%s\n' \
            "$PH_S3_ENDPOINT" "$PH_S3_REGION" "create_bucket = true" \
            "credentials_file = $RGW_DIR/creds" >"$RGW_DIR/bench.conf"
        PH_BENCH_S3_CONFIG=$RGW_DIR/bench.conf
        export PH_BENCH_S3_CONFIG
    else
        echo "bench: no RGW for the S3 rows ($(tail -1 "$BENCH_TMP/start.log"))"
        rm -rf "$BENCH_TMP"
        RGW_DIR=
    fi
fi
for b in "$BUILD_DIR"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo "==> $(basename "$b")"
    "$b" || echo "$(basename "$b"): FAILED"
done
if [ -n "$RGW_DIR" ]; then
    sh tests/artifacts/rgw_fixture.sh stop "$RGW_DIR" >/dev/null 2>&1
    rm -rf "$BENCH_TMP"
fi
