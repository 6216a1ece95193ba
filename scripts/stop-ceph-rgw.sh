#!/bin/sh
# Stops the cluster scripts/start-ceph-rgw.sh started under DATA_DIR: the
# gateway, then the OSD, then the mon, each by its pid file, with SIGTERM and
# SIGKILL after a second (each daemon takes ~2 s to exit on SIGTERM here, and
# radosgw can hang on it once the OSD is gone; the cluster is disposable).
# Leaves DATA_DIR in place; `--purge` removes it too.
#
#   scripts/stop-ceph-rgw.sh DATA_DIR [--purge]
set -u
[ $# -ge 1 ] || { echo "usage: $0 DATA_DIR [--purge]" >&2; exit 1; }
D=$1

# Only a pid whose command line names this cluster's config is ours.
ours() {
    [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "$D/ceph.conf"
}

stop_pidfile() { # $1 pid file, $2 tenths of a second before SIGKILL
    f=$1
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    case "$pid" in ''|*[!0-9]*) rm -f "$f"; return 0 ;; esac
    if ours "$pid"; then
        kill -TERM "$pid" 2>/dev/null
        n=0
        while [ -d "/proc/$pid" ] && [ "$n" -lt "$2" ]; do sleep 0.1; n=$((n + 1)); done
        if [ -d "/proc/$pid" ]; then
            kill -KILL "$pid" 2>/dev/null
            while [ -d "/proc/$pid" ]; do sleep 0.05; done
        fi
    fi
    rm -f "$f"
}

stop_pidfile "$D/run/client.rgw.a.pid" 10
for f in "$D"/run/osd.*.pid; do stop_pidfile "$f" 10; done
stop_pidfile "$D/run/mon.a.pid" 10
if [ "${2:-}" = "--purge" ]; then
    rm -rf "$D"
fi
exit 0
