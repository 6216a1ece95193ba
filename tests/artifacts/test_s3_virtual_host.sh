#!/bin/sh
# Virtual-host addressing on the RGW fixture: pinhole-artifacts with
# addressing = virtual-host and endpoint http://localhost:PORT puts (one
# single PUT, one multipart), gets byte-identical content back, and sweeps
# an expired artifact, through a recording forwarder (http_recorder.py); every
# request the forwarder saw must carry Host <bucket>.localhost:PORT and a
# target without the bucket. The round trip itself shows RGW read the bucket
# from the Host: path-style, the first key segment would name the bucket.
#   test_s3_virtual_host.sh CLI RECORDER   (env PH_RGW_DIR, PH_TEST_S3_CONFIG)
# Exit 77 without the fixture (ceph not installed).
set -eu
CLI=$1
REC=$2
if [ -z "${PH_TEST_S3_CONFIG:-}" ] || [ ! -r "$PH_TEST_S3_CONFIG" ]; then
    echo "test_s3_virtual_host: no RGW fixture (ceph not installed?): skipped" >&2
    exit 77
fi
. "$PH_RGW_DIR/rgw.env"
UP=${PH_S3_ENDPOINT##*:}
BUCKET=pinhole-vhost
T=$(mktemp -d)
RP=
cleanup() { [ -z "$RP" ] || kill "$RP" 2>/dev/null || true; rm -rf "$T"; }
trap cleanup EXIT
fail() { echo "test_s3_virtual_host: FAIL: $*" >&2; [ ! -f "$T/requests.log" ] || sed 's/^/  /' "$T/requests.log" >&2; exit 1; }

/usr/bin/python3 "$REC" "$T/port" "$UP" "$T/requests.log" &
RP=$!
i=0
while [ ! -s "$T/port" ]; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || fail "recorder did not start"
    sleep 0.05
done
PORT=$(cat "$T/port")
cat >"$T/s3.conf" <<CONF
endpoint = http://localhost:$PORT
region = $PH_S3_REGION
bucket = $BUCKET
prefix = vhost/$$
addressing = virtual-host
allow_http = true
create_bucket = true
credentials_file = $PH_RGW_DIR/creds
part_size = 5242880
multipart_threshold = 5242880
retries = 4
CONF
s3() { "$CLI" --backend s3 --s3-config "$T/s3.conf" "$@"; }
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

printf 'virtual-host payload\n' >"$T/small"
head -c 6000000 /dev/urandom >"$T/big" # over multipart_threshold: two parts
small=$(s3 put --tenant acme "$T/small" | field artifact_id) || fail "small put"
big=$(s3 put --tenant acme "$T/big" | field artifact_id) || fail "multipart put"
s3 get --tenant acme "$small" >"$T/small.out" || fail "small get"
s3 get --tenant acme "$big" >"$T/big.out" || fail "multipart get"
cmp -s "$T/small" "$T/small.out" || fail "small content differs"
cmp -s "$T/big" "$T/big.out" || fail "multipart content differs"
s3 stat --tenant acme "$big" >/dev/null || fail "stat"
# Sweep with the clock past the one-second expiry of a third artifact.
gone=$(s3 put --tenant acme --ttl 1 "$T/small" | field artifact_id) || fail "ttl put"
now=$(($(date +%s) + 120))
s3 sweep --now "$now" >"$T/sweep.json" || fail "sweep"
grep -q '"expired":1,' "$T/sweep.json" ||
    fail "sweep removed nothing: $(cat "$T/sweep.json")"
if s3 stat --tenant acme "$gone" >/dev/null 2>&1; then fail "expired artifact still there"; fi
s3 rm --tenant acme "$small" && s3 rm --tenant acme "$big" || fail "rm"

# Every request: the bucket in the Host, never in the target.
n=$(wc -l <"$T/requests.log")
[ "$n" -ge 10 ] || fail "only $n requests recorded"
bad=$(grep -v -E "^[A-Z]+ /[^ ]* $BUCKET\\.localhost:$PORT\$" "$T/requests.log" || true)
[ -z "$bad" ] || fail "not virtual-host addressed: $bad"
if grep -q -E "^[A-Z]+ /$BUCKET(/|\\?| |\$)" "$T/requests.log"; then fail "bucket in a target"; fi
for m in 'PUT /vhost/' 'POST /vhost/.*uploads' 'GET /\?.*list-type=2' 'GET /\?.*uploads' \
    'DELETE /vhost/'; do
    grep -q -E "^$m" "$T/requests.log" || fail "no request like '$m'"
done
echo "test_s3_virtual_host: $n requests, all virtual-host addressed ($BUCKET.localhost:$PORT)"
