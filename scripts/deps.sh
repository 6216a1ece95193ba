#!/bin/sh
# Install every Debian 12 package Pinhole's build, tests and `make run` need.
# Idempotent: checks first, installs only what is missing. Works as root or via sudo.
set -eu

PACKAGES="
build-essential cmake pkg-config clang libclang-rt-14-dev
libevent-dev libc-ares-dev libssl-dev libyaml-dev libcmocka-dev
libpsl-dev publicsuffix libidn2-dev libunistring-dev libjansson-dev libcurl4-openssl-dev
ceph-mon ceph-osd radosgw
dnsmasq-base curl openssl ca-certificates iproute2 procps python3 python3-jsonschema
python3-httpx python3-requests python3-pip python3-venv python3-setuptools python3-wheel
busybox-static runsc docker.io e2fsprogs
strace tinyproxy squid
"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Daemons in the list (tinyproxy, squid: bench_proxy's peers, started by it
# in the foreground) must not be started by their packages: without systemd
# (a container) a start would fail the install or leave a daemon running.
# policy-rc.d exit 101 tells invoke-rc.d not to start anything; one already
# in place is left alone.
rcd=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    rcd=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$rcd" >/dev/null && $SUDO chmod 755 "$rcd"
fi
# shellcheck disable=SC2086
st=0
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null || st=$?
[ -z "$rcd" ] || $SUDO rm -f "$rcd"
[ "$st" -eq 0 ] || exit "$st"
echo "deps: done"
