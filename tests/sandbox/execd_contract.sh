#!/bin/bash
# execd_contract.sh EXECD TEST MECHANISM - runs a port test binary (the
# contract suite, the export test: compiled against pinhole/execd_as_port.h)
# through a pinhole-execd started here on a private socket and state
# directory. Exit 77 when the mechanism is not
# available (the daemon exits 69), the suite's status otherwise.
set -u
execd=$1 suite=$2 mechanism=$3
# PH_EXECD_TMPDIR: where the daemon's socket and state go (the escape test
# keeps host files off /tmp).
if [ -n "${PH_EXECD_TMPDIR:-}" ]; then
    mkdir -p "$PH_EXECD_TMPDIR" && chmod 755 "$PH_EXECD_TMPDIR"
    tmp=$(mktemp -d -p "$PH_EXECD_TMPDIR")
else
    tmp=$(mktemp -d)
fi
chmod 755 "$tmp"
# A canary in the daemon's environment (and the suite's): the escape test
# looks for it inside the sandboxes.
PH_ESCAPE_DAEMON_CANARY="canary-service-env-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export PH_ESCAPE_DAEMON_CANARY
daemon=
proxy=
cleanup() {
    [ -n "$daemon" ] && kill -TERM "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
    [ -n "$proxy" ] && kill "$proxy" 2>/dev/null && wait "$proxy" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
# A listening socket where the daemon's --proxy-socket points (a mechanism
# may bind-mount it into a granted sandbox); nothing is ever relayed.
/usr/bin/python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); time.sleep(3600)' \
    "$tmp/proxy.sock" &
proxy=$!
# The daemon refuses to start with a credential name in its environment, and
# a shell's is full of them (PWD, CA bundle settings): start it from a built
# one, passing on only the mechanism's own settings.
pass=()
for v in PINHOLE_GVISOR_ROOTFS PINHOLE_FORWARDER PINHOLE_RUNSC PINHOLE_SANDBOX_UID \
         PINHOLE_SANDBOX_GID PINHOLE_DOCKER TMPDIR PH_ESCAPE_DAEMON_CANARY; do
    [ -n "${!v:-}" ] && pass+=("$v=${!v}")
done
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pass[@]}" \
    "$execd" --socket="$tmp/execd.sock" --state-dir="$tmp/state" --allow-uid="$(id -u)" \
    --mechanism="$mechanism" --mode=development --proxy-socket="$tmp/proxy.sock" \
    2>"$tmp/execd.log" &
daemon=$!
for _ in $(seq 100); do
    [ -S "$tmp/execd.sock" ] && break
    if ! kill -0 "$daemon" 2>/dev/null; then
        wait "$daemon"; rc=$?; daemon=
        if [ "$rc" = 69 ]; then
            echo "SKIP: mechanism $mechanism is not available here: $(tail -1 "$tmp/execd.log")"
            exit 77
        fi
        echo "pinhole-execd exited $rc:"; cat "$tmp/execd.log"; exit 1
    fi
    sleep 0.1
done
PINHOLE_EXECD_SOCKET="$tmp/execd.sock" PINHOLE_EXECD_STATE_DIR="$tmp/state" \
    PINHOLE_EXECD_PROXY_SOCKET="$tmp/proxy.sock" "$suite" "$mechanism"
rc=$?
# A clean stop is part of the test: every sandbox destroyed, exit 0 (and,
# in sanitizer builds, no report).
kill -TERM "$daemon"
wait "$daemon"
drc=$?
daemon=
if [ "$drc" != 0 ]; then
    echo "pinhole-execd exited $drc at SIGTERM"
    [ "$rc" = 0 ] && rc=1
fi
if [ -n "$(ls -A "$tmp/state" 2>/dev/null)" ]; then
    echo "pinhole-execd left sandboxes behind: $(ls "$tmp/state")"
    [ "$rc" = 0 ] && rc=1
fi
if [ "$rc" != 0 ]; then
    echo "--- pinhole-execd log (last 40 lines)"; tail -40 "$tmp/execd.log"
fi
exit "$rc"
