#!/bin/sh
# start-dockerd.sh: start a local Docker engine for the docker sandbox
# mechanism's tests (the development fallback), without systemd.
#
# Usage: scripts/start-dockerd.sh [--stop] [--help]
#
# Idempotent: when an engine already answers `docker version` it does
# nothing. Otherwise it starts dockerd (Debian's docker.io, with its own
# containerd) in the background and waits until the engine answers. The
# engine is configured for the sandbox only:
#   - no networking of its own: --bridge=none, no iptables, no IP forwarding
#     or masquerading (containers run with --network=none; the script fails
#     closed and stops the engine if a docker0 interface appears anyway);
#   - its own state: --data-root $PH_DOCKERD_DATA (/var/lib/pinhole-dockerd),
#     --exec-root $PH_DOCKERD_EXEC (/run/pinhole-dockerd), log in
#     $PH_DOCKERD_EXEC/dockerd.log;
#   - overlay2 storage, falling back to vfs where overlay2 cannot mount;
#   - listens on the default socket unix:///var/run/docker.sock, so the
#     mechanism finds it without DOCKER_HOST.
# Images are never pulled: the mechanism imports the test root filesystem
# (scripts/build-rootfs.sh) with `docker import`.
#
# When no engine can be started (dockerd not installed, not root, the daemon
# does not come up) it prints a visible SKIP message and exits 0: the docker
# tests then skip with their own message. Under PINHOLE_REQUIRE_ALL=1 (CI:
# scripts/deps.sh installs docker.io, so a missing engine is a fault) it
# prints FAIL instead and exits 3.
#
# --stop stops an engine this script started (pid in $PH_DOCKERD_EXEC) and
# unmounts what it left under the data root; the data root itself (the
# imported image) is kept for the next start.
#
# Exit codes: 0 engine running, or a SKIP message printed; 1 --stop failed;
# 2 usage error; 3 no engine under PINHOLE_REQUIRE_ALL=1.
set -u

data=${PH_DOCKERD_DATA:-/var/lib/pinhole-dockerd}
exec_root=${PH_DOCKERD_EXEC:-/run/pinhole-dockerd}
socket=/var/run/docker.sock
pidfile=$exec_root/dockerd.pid
log=$exec_root/dockerd.log
wait_s=${PH_DOCKERD_WAIT:-30}

usage() {
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0"
}

skip() {
    if [ "${PINHOLE_REQUIRE_ALL:-0}" = 1 ]; then
        echo "start-dockerd: FAIL: no Docker engine: $* (PINHOLE_REQUIRE_ALL=1)" >&2
        exit 3
    fi
    echo "start-dockerd: SKIP: no Docker engine: $*; the docker sandbox tests will be skipped" >&2
    exit 0
}

engine_answers() {
    docker -H "unix://$socket" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# The pid recorded by our dockerd, if that process still runs.
our_pid() {
    [ -r "$pidfile" ] || return 1
    pid=$(cat "$pidfile" 2>/dev/null)
    case "$pid" in '' | *[!0-9]*) return 1 ;; esac
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

stop_engine() {
    pid=$(our_pid) || { echo "start-dockerd: no engine started by this script is running"; return 0; }
    kill -TERM "$pid"
    i=0
    while kill -0 "$pid" 2>/dev/null; do
        i=$((i + 1))
        if [ "$i" -gt 150 ]; then
            echo "start-dockerd: dockerd (pid $pid) did not stop within 15 s" >&2
            return 1
        fi
        sleep 0.1
    done
    # dockerd binds its data root onto itself; with vfs it leaves that mount
    # behind. Unmount what remains at or under the data root, deepest first.
    awk -v d="$data" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
        sort -r | while read -r m; do umount "$m" || echo "start-dockerd: cannot unmount $m" >&2; done
    echo "start-dockerd: engine stopped (pid $pid)"
}

# start_with DRIVER: 0 when the engine answers, 1 when dockerd died or timed out.
start_with() {
    driver=$1
    mkdir -p "$data" "$exec_root" || return 1
    chmod 0700 "$data" "$exec_root"
    echo "start-dockerd: starting dockerd (storage $driver, data $data, log $log)"
    # setsid: the engine outlives this script and its caller's session.
    setsid dockerd \
        --host "unix://$socket" \
        --data-root "$data" --exec-root "$exec_root" --pidfile "$pidfile" \
        --storage-driver "$driver" \
        --bridge=none --iptables=false --ip6tables=false \
        --ip-forward=false --ip-masq=false --userland-proxy=false \
        --log-level=warn \
        </dev/null >>"$log" 2>&1 &
    started=$!
    deadline=$(($(date +%s) + wait_s))
    while [ "$(date +%s)" -le "$deadline" ]; do
        if engine_answers; then
            return 0
        fi
        if ! kill -0 "$started" 2>/dev/null; then
            return 1
        fi
        sleep 0.2
    done
    kill -TERM "$started" 2>/dev/null
    return 1
}

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    --stop) [ $# -eq 1 ] || { usage >&2; exit 2; }; stop_engine; exit $? ;;
    '') ;;
    *) usage >&2; exit 2 ;;
esac

command -v docker >/dev/null 2>&1 || skip "the docker CLI is not installed (apt-get install docker.io)"
if engine_answers; then
    echo "start-dockerd: a Docker engine already answers on $socket"
    exit 0
fi
command -v dockerd >/dev/null 2>&1 || skip "dockerd is not installed (apt-get install docker.io)"
[ "$(id -u)" -eq 0 ] || skip "starting dockerd needs root"
if pid=$(our_pid); then
    skip "dockerd (pid $pid) runs but does not answer on $socket; see $log"
fi

t0=$(date +%s)
if ! start_with overlay2; then
    tail -n 5 "$log" >&2 2>/dev/null
    echo "start-dockerd: overlay2 failed, retrying with vfs" >&2
    # Give the failed daemon's containerd time to release the exec root.
    sleep 1
    start_with vfs || { tail -n 20 "$log" >&2 2>/dev/null; skip "dockerd did not start (see $log)"; }
fi
# Fail closed: this engine must never have created a network interface.
if [ -e /sys/class/net/docker0 ]; then
    stop_engine >&2
    skip "a docker0 interface exists; refusing to run the sandbox tests next to it"
fi
echo "start-dockerd: Docker engine $(docker -H "unix://$socket" version --format '{{.Server.Version}}') running on $socket (started in $(($(date +%s) - t0)) s)"
