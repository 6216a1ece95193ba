#!/bin/sh
# Run every benchmark built in BUILD_DIR (bench_* executables) and print their figures.
#
#   scripts/bench.sh [BUILD_DIR]
#   scripts/bench.sh --ab REV [BUILD_DIR]
#
# --ab REV: an A/B run of bench_proxy in one run: the pinhole-proxy of git
# revision REV (A; exported with git archive and built as a release build in
# build/ab/REV, once) against this tree's (B, from BUILD_DIR), the same
# rounds interleaved; each proxy reads a table its own revision's policyc
# compiled from its own revision's allowlist. Extra bench_proxy options may follow in BENCH_AB_ARGS.
#
# bench_artifacts' S3 rows need an object store: without PH_BENCH_S3_CONFIG,
# a single-node Ceph RGW is brought up for the run (scripts/start-ceph-rgw.sh,
# memstore, loopback) when ceph is installed, and stopped after; otherwise
# the S3 rows are left out and this says so.
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
    if [ ! -x "$old" ] || [ ! -x "$ab/build/policyc/policyc" ]; then
        echo "==> building pinhole-proxy of $rev in $ab (release)"
        rm -rf "$ab" && mkdir -p "$ab/src" || exit 1
        git archive "$rev" | tar -x -C "$ab/src" || exit 1
        cmake -S "$ab/src" -B "$ab/build" -DCMAKE_BUILD_TYPE=Release -DPINHOLE_BUILD_BENCH=ON \
            >"$ab/configure.log" 2>&1 || { echo "bench: configure of $rev failed: $ab/configure.log" >&2; exit 1; }
        MAKEFLAGS= cmake --build "$ab/build" -j "${JOBS:-2}" --target pinhole-proxy-testloopback --target policyc \
            >"$ab/build.log" 2>&1 || { echo "bench: build of $rev failed: $ab/build.log" >&2; exit 1; }
    fi
    echo "==> bench_proxy A/B: A = $rev, B = this tree ($(git describe --always --dirty))"
    # shellcheck disable=SC2086
    exec "$BUILD_DIR/bench/bench_proxy" --proxy "$old" --proxy "$new" ${BENCH_AB_ARGS:-}
fi
BUILD_DIR=${1:-build/release}
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
        # The gateway's and the OSD's CPU seconds per operation, too.
        PH_BENCH_S3_SERVER_PIDS="$(cat "$RGW_DIR/run/client.rgw.a.pid" "$RGW_DIR/run/osd.0.pid" 2>/dev/null | tr '\n' ' ')"
        export PH_BENCH_S3_CONFIG PH_BENCH_S3_SERVER_PIDS
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
