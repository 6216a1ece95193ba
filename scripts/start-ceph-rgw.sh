#!/bin/sh
# Brings up a single-node Ceph cluster (one mon, one OSD, one RADOS Gateway)
# on loopback from Debian 12's packages, without systemd, with everything
# (config, stores, sockets, pid files, logs) under DATA_DIR.
#
#   scripts/start-ceph-rgw.sh DATA_DIR [memstore|bluestore]
#
# memstore (the default) keeps objects in the OSD's memory; bluestore puts
# them on a sparse file DATA_DIR/osd/block (needs O_DIRECT: ext4, xfs).
# On success prints, and writes to DATA_DIR/rgw.env, shell assignments:
#   PH_S3_ENDPOINT=http://127.0.0.1:PORT PH_S3_ACCESS_KEY=... PH_S3_SECRET_KEY=...
#   PH_S3_REGION=us-east-1
# Ports come from the kernel (bind to port 0, read it back); a daemon that
# loses the race for its port is restarted on a fresh one.
# Exit status: 0 up, 77 ceph is not installed, 1 anything else.
# The gateway answers virtual-host requests for <bucket>.localhost (rgw dns
# name): use endpoint http://localhost:PORT with addressing = virtual-host.
# Stop with scripts/stop-ceph-rgw.sh DATA_DIR.
set -eu

usage() { echo "usage: $0 DATA_DIR [memstore|bluestore]" >&2; exit 1; }
[ $# -ge 1 ] || usage
STORE=${2:-memstore}
case "$STORE" in memstore|bluestore) ;; *) usage ;; esac

for b in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool ceph-authtool; do
    if ! command -v "$b" >/dev/null 2>&1; then
        echo "start-ceph-rgw: $b not installed (apt-get install ceph-mon ceph-osd radosgw)" >&2
        exit 77
    fi
done

mkdir -p "$1"
D=$(cd "$1" && pwd)
if [ -e "$D/run/mon.pid" ] || [ -e "$D/ceph.conf" ]; then
    echo "start-ceph-rgw: $D already holds a cluster: stop it and remove the directory" >&2
    exit 1
fi
mkdir -p "$D/mon" "$D/osd" "$D/rgw" "$D/run" "$D/log"
CONF="$D/ceph.conf"
T0=$(date +%s.%N)

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
uuid() { cat /proc/sys/kernel/random/uuid; }
# Random key material for the test user: letters and digits only.
rand_alnum() { tr -dc 'A-Za-z0-9' </dev/urandom | head -c "$1"; }

fail() {
    echo "start-ceph-rgw: $*" >&2
    for f in "$D"/log/*.log; do
        [ -f "$f" ] && { echo "--- $f (tail)" >&2; tail -n 15 "$f" >&2; }
    done
    "$(dirname "$0")/stop-ceph-rgw.sh" "$D" >/dev/null 2>&1 || true
    exit 1
}

# Waits up to $2 tenths of a second for command $1 to succeed.
wait_for() {
    n=0
    while ! eval "$1" >/dev/null 2>&1; do
        n=$((n + 1))
        [ "$n" -le "$2" ] || return 1
        sleep 0.1
    done
}

FSID=$(uuid)
write_conf() { # $1 mon port, $2 rgw port
    cat >"$CONF" <<EOF
[global]
fsid = $FSID
mon host = v2:127.0.0.1:$1
public addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
run dir = $D/run
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $D/log/cluster.log
crash dir = $D/run
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
paxos propose interval = 0.05
mon data avail crit = 1
mon data avail warn = 2
[mon]
mon data = $D/mon/\$cluster-\$id
[osd]
osd data = $D/osd/\$cluster-\$id
osd objectstore = $STORE
osd op num shards = 1
osd op num threads per shard = 2
memstore device bytes = 8589934592
bluestore block path = $D/osd/block
bluestore block create = true
bluestore block size = 21474836480
bluestore cache autotune = false
bluestore cache size = 134217728
osd memory target = 939524096
[client.rgw.a]
# radosgw defaults to cephx and a secure mon connection: say none, crc.
auth client required = none
ms mon client mode = crc
rgw init timeout = 60
rgw frontends = beast endpoint=127.0.0.1:$2 tcp_nodelay=1
rgw data = $D/rgw
rgw enable usage log = false
# Virtual-host addressing: a Host of <bucket>.localhost names the bucket
# (libcurl resolves every *.localhost name to loopback itself); other hosts,
# 127.0.0.1 among them, stay path-style.
rgw dns name = localhost
# Deleted objects' data is freed by RGW's garbage collector, by default two
# hours later: a disposable cluster frees it within seconds instead, so a
# memstore OSD does not fill up across test and benchmark runs.
rgw gc obj min wait = 5
rgw gc processor period = 10
EOF
}

# ---- mon ----
try=0
while :; do
    try=$((try + 1))
    MON_PORT=$(free_port)
    write_conf "$MON_PORT" 0
    rm -rf "$D/mon/ceph-a" "$D/monmap"
    monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$D/monmap" >/dev/null
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$D/monmap" >/dev/null 2>&1 || fail "mon mkfs failed"
    if ceph-mon -c "$CONF" -i a >/dev/null 2>&1 &&
        wait_for "ceph -c '$CONF' --connect-timeout 3 mon stat" 100; then
        break
    fi
    [ -f "$D/run/mon.a.pid" ] && kill "$(cat "$D/run/mon.a.pid")" 2>/dev/null || true
    [ "$try" -lt 5 ] || fail "mon did not come up"
done
ceph -c "$CONF" osd set-require-min-compat-client luminous >/dev/null 2>&1 || true

# ---- osd ----
OSD_UUID=$(uuid)
OSD_ID=$(ceph -c "$CONF" osd new "$OSD_UUID") || fail "osd new failed"
mkdir -p "$D/osd/ceph-$OSD_ID"
ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >"$D/log/osd-mkfs.log" 2>&1 ||
    fail "osd mkfs failed"
ceph-osd -c "$CONF" -i "$OSD_ID" >/dev/null 2>&1 || fail "osd did not start"
wait_for "ceph -c '$CONF' osd stat | grep -q '1 up'" 300 || fail "osd not up"

# ---- rgw ----
try=0
while :; do
    try=$((try + 1))
    RGW_PORT=$(free_port)
    write_conf "$MON_PORT" "$RGW_PORT"
    radosgw -c "$CONF" -n client.rgw.a >/dev/null 2>&1 || fail "radosgw did not start"
    if wait_for "curl -s -o /dev/null http://127.0.0.1:$RGW_PORT/" 600; then
        break
    fi
    [ -f "$D/run/client.rgw.a.pid" ] && kill -9 "$(cat "$D/run/client.rgw.a.pid")" 2>/dev/null || true
    rm -f "$D/run/client.rgw.a.pid"
    [ "$try" -lt 3 ] || fail "radosgw did not answer"
done

ACCESS=$(rand_alnum 20)
SECRET=$(rand_alnum 40)
radosgw-admin -c "$CONF" -n client.rgw.a user create --uid=pinhole-test --display-name=pinhole-test \
    --access-key="$ACCESS" --secret-key="$SECRET" >/dev/null 2>&1 || fail "user create failed"

T1=$(date +%s.%N)
umask 077
cat >"$D/rgw.env" <<EOF
PH_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
PH_S3_REGION=us-east-1
PH_S3_ACCESS_KEY=$ACCESS
PH_S3_SECRET_KEY=$SECRET
EOF
cat "$D/rgw.env"
echo "start-ceph-rgw: up in $(echo "$T1 - $T0" | bc 2>/dev/null || /usr/bin/python3 -c "print(round($T1-$T0,2))") s ($STORE)" >&2
