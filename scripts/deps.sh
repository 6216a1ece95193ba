#!/bin/sh
# Install every Debian 12 package Pinhole's build, tests and `make run` need.
# Idempotent: checks first, installs only what is missing. Works as root or via sudo.
set -eu

PACKAGES="
build-essential cmake pkg-config clang libclang-rt-14-dev
libevent-dev libc-ares-dev libssl-dev libyaml-dev libcmocka-dev
libpsl-dev publicsuffix libidn2-dev libunistring-dev libjansson-dev libcurl4-openssl-dev zlib1g-dev
ceph-mon ceph-osd radosgw
dnsmasq-base curl openssl ca-certificates iproute2 procps python3 python3-jsonschema
python3-httpx python3-requests python3-pip python3-venv python3-setuptools python3-wheel
busybox-static runsc docker.io e2fsprogs
strace tinyproxy squid stress-ng haproxy python3-yaml wget git
dpkg-dev debhelper dh-python pandoc lintian man-db debootstrap
nodejs libuv1-dev
"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
# guard/node needs npm beside node: Debian's nodejs (18) ships it as the
# separate npm package; a NodeSource nodejs bundles it (and conflicts with
# Debian's npm), so only ask for it when no npm is on PATH.
if ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi

# Debian's own node 18 beside a system node that is another (tests/node
# runs under both): unpacked, not installed (scripts/node18.sh).
node18() {
    case "$(node --version 2>/dev/null)" in
    v18.*) ;;
    *) sh "$(dirname "$0")/node18.sh" || echo "deps: Debian's node 18 not unpacked; the node.18.* tests skip" ;;
    esac
}

if [ -z "$missing" ]; then
    node18
    echo "deps: all packages present"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# squid and tinyproxy are only bench_proxy's peers (it starts its own on
# kernel-assigned ports with private configs): their post-install scripts
# must not start the system daemons. Unless a policy-rc.d is already there
# (containers have one), one that denies exactly those two for the install;
# where systemd runs, they are disabled too.
rcd=/usr/sbin/policy-rc.d
if [ ! -e "$rcd" ]; then
    printf '#!/bin/sh\ncase "$1" in squid|tinyproxy) exit 101 ;; esac\nexit 0\n' |
        $SUDO tee "$rcd" >/dev/null
    $SUDO chmod 755 "$rcd"
    trap '$SUDO rm -f "$rcd"' EXIT
fi
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
if [ -d /run/systemd/system ]; then
    for s in squid tinyproxy; do $SUDO systemctl disable --now "$s" >/dev/null 2>&1 || true; done
fi
node18
echo "deps: done"
