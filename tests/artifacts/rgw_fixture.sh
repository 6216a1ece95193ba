#!/bin/sh
# The ctest fixture of the S3 backend tests: a fresh single-node Ceph RGW
# under DIR (scripts/start-ceph-rgw.sh) and DIR/s3.conf + DIR/creds (0600)
# for it. Exit 77 when ceph is not installed. `stop` tears it down.
#   rgw_fixture.sh start|stop DIR
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
D=$2
case "$1" in
stop)
    exec sh "$here/scripts/stop-ceph-rgw.sh" "$D" --purge ;;
start)
    sh "$here/scripts/stop-ceph-rgw.sh" "$D" --purge
    rc=0
    sh "$here/scripts/start-ceph-rgw.sh" "$D" >/dev/null || rc=$?
    [ "$rc" -eq 0 ] || exit "$rc"
    . "$D/rgw.env"
    umask 077
    printf 'access_key = %s\nsecret_key = %s\n' "$PH_S3_ACCESS_KEY" "$PH_S3_SECRET_KEY" >"$D/creds"
    cat >"$D/s3.conf" <<CONF
endpoint = $PH_S3_ENDPOINT
region = $PH_S3_REGION
bucket = pinhole-test
prefix = artifacts
allow_http = true
create_bucket = true
credentials_file = $D/creds
part_size = 5242880
multipart_threshold = 5242880
retries = 8
retry_base_ms = 100
CONF
    echo "rgw fixture: $PH_S3_ENDPOINT" ;;
*)
    echo "usage: $0 start|stop DIR" >&2; exit 1 ;;
esac
