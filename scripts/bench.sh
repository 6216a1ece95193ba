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
if [ -z "${PH_BENCH_S3_CONFIG:-}" ] && [ -x "$BUILD_DIR/bench/bench_artifacts" ]; then
    RGW_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pinhole-bench-rgw.XXXXXX")
    if sh scripts/start-ceph-rgw.sh "$RGW_DIR/rgw" >/dev/null 2>"$RGW_DIR/start.log"; then
        . "$RGW_DIR/rgw/rgw.env"
        (umask 077 && printf 'access_key = %s\nsecret_key = %s\n' "$PH_S3_ACCESS_KEY" \
            "$PH_S3_SECRET_KEY" >"$RGW_DIR/creds")
        cat >"$RGW_DIR/s3.conf" <<CONF
endpoint = $PH_S3_ENDPOINT
region = $PH_S3_REGION
bucket = pinhole-bench
allow_http = true
create_bucket = true
credentials_file = $RGW_DIR/creds
CONF
        PH_BENCH_S3_CONFIG=$RGW_DIR/s3.conf
        export PH_BENCH_S3_CONFIG
    else
        echo "bench: no RGW for the S3 rows ($(tail -1 "$RGW_DIR/start.log"))"
        rm -rf "$RGW_DIR"
        RGW_DIR=
    fi
fi
for b in "$BUILD_DIR"/bench/bench_*; do
    [ -x "$b" ] || continue
    echo "==> $(basename "$b")"
    "$b" || echo "$(basename "$b"): FAILED"
done
if [ -n "$RGW_DIR" ]; then
    sh scripts/stop-ceph-rgw.sh "$RGW_DIR/rgw" --purge >/dev/null 2>&1
    rm -rf "$RGW_DIR"
fi
