#!/bin/sh
# make deb-check: the packages of build/deb installed into a fresh Debian 12
# chroot (debootstrap --variant=minbase bookworm, from the Debian mirror),
# then, inside it: the users, directories and unit state the maintainer
# scripts leave (nothing enabled or started), the Python package loading
# the installed libpinhole, policyc check and compile of the shipped
# example, a grant key, pinhole-proxy started as pinhole-proxy with the
# shipped settings (ports from the kernel) until its ready file names its
# listeners, then stopped by SIGTERM (exit 0 after the drain),
# pinhole-execd started with the options file the package wrote, and a purge
# that takes the user, the group and the execd state away.
# Too slow for every `make test` (the chroot and the packages' dependencies
# are downloaded); run as root. One line per check, as scripts/deb-check.sh:
#   deb-chroot <check>: ok [detail]   /   deb-chroot <check>: FAILED <why>
# then "deb-chroot: N s". Exit status 1 when a check failed.
#
#   sh scripts/deb-chroot-check.sh [OUTDIR]     (default build/deb)
# DEBIAN_MIRROR overrides http://deb.debian.org/debian. The chroot is
# OUTDIR/chroot, made anew each run; downloaded packages are kept in
# OUTDIR/debootstrap-cache.
set -u
cd "$(dirname "$0")/.."
start=$(date +%s)
out=$(cd "${1:-build/deb}" && pwd)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$out/chroot
failed=0
ok() { echo "deb-chroot $1: ok${2:+ $2}"; }
bad() { echo "deb-chroot $1: FAILED $2"; failed=1; }
finish() { echo "deb-chroot: $(($(date +%s) - start)) s"; exit $failed; }

ls "$out"/*.deb >/dev/null 2>&1 || { bad packages "no .deb in $out (make deb)"; finish; }
[ "$(id -u)" -eq 0 ] || { bad setup "must run as root"; finish; }
rm -rf "$root"
mkdir -p "$out/debootstrap-cache"
if ! debootstrap --variant=minbase --cache-dir="$out/debootstrap-cache" bookworm "$root" "$mirror" \
        >"$out/debootstrap.log" 2>&1; then
    bad debootstrap "see $out/debootstrap.log"
    finish
fi
ok debootstrap "bookworm minbase from $mirror"
mkdir -p "$root/tmp/debs"
cp "$out"/*.deb "$root/tmp/debs/"
cp /etc/resolv.conf "$root/etc/resolv.conf"

# in_root CMD: runs CMD (sh -c) in the chroot, /proc and /dev/pts mounted in
# a mount namespace of its own (nothing stays mounted afterwards).
in_root() {
    unshare -m sh -c 'mount -t proc proc "$1/proc" && chroot "$1" /bin/sh -c "$2"' sh "$root" "$1"
}

# Nothing may start a daemon while installing (there is no init here
# anyway): the check below is that the packages do not try.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
if in_root 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
        apt-get install -y -qq --no-install-recommends /tmp/debs/*.deb' >"$out/chroot-install.log" 2>&1; then
    ok install "$(ls "$out"/*.deb | wc -l) packages and their dependencies"
else
    bad install "see $out/chroot-install.log"
    finish
fi

why=$(in_root '
    getent passwd pinhole-proxy | grep -q ":/nonexistent:/usr/sbin/nologin$" || echo "no system user pinhole-proxy"
    getent group pinhole-execd >/dev/null || echo "no group pinhole-execd"
    [ "$(stat -c %a /var/lib/pinhole-execd/state)" = 700 ] || echo "state dir not 0700"
    grep -q "^EXECD_OPTS=\"--allow-gid=$(getent group pinhole-execd | cut -d: -f3)\"$" \
        /etc/default/pinhole-execd || echo "/etc/default/pinhole-execd"
    ls /etc/systemd/system/*.wants/pinhole-* 2>/dev/null | grep -q . && echo "a unit is enabled"
    [ -f /lib/systemd/system/pinhole-proxy.service ] || echo "no proxy unit"
    true')
if [ -z "$why" ]; then ok maintscripts "user, group, state dir, options file; no unit enabled"
else bad maintscripts "$(echo $why)"; fi

py=$(in_root 'python3 -c "import pinhole, pinhole._lib as l; l.lib(); print(pinhole.__version__)"' 2>&1)
case "$py" in 0.*) ok python "import pinhole $py" ;; *) bad python "$py" ;; esac

v=$(in_root 'set -e
    cd /etc/pinhole
    policyc check /usr/share/doc/pinhole/examples/allowlist.yaml >/dev/null
    policyc compile -q /usr/share/doc/pinhole/examples/allowlist.yaml -o allowlist.ptab
    pinhole-guard keygen --kid k1 --output grant.key >/dev/null
    chown pinhole-proxy: grant.key
    echo compiled' 2>&1)
case "$v" in *compiled) ok policyc "check and compile of the shipped example" ;; *) bad policyc "$v" ;; esac

# The proxy as the unit runs it (its user, the shipped settings, the unit's
# socket), ports from the kernel; SIGTERM once the ready file is there.
r=$(in_root 'install -d -o pinhole-proxy -g pinhole-proxy -m 0750 /run/pinhole-proxy
    setpriv --reuid=pinhole-proxy --regid=pinhole-proxy --init-groups \
        pinhole-proxy --config=/etc/pinhole/proxy.yaml --unix-socket=/run/pinhole-proxy/proxy.sock \
        --listen=127.0.0.1:0 --admin-listen=127.0.0.1:0 --ready-file=/run/pinhole-proxy/ready \
        2>/tmp/proxy.log &
    pid=$!
    i=0
    while [ ! -s /run/pinhole-proxy/ready ] && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do
        sleep 0.1; i=$((i + 1))
    done
    cat /run/pinhole-proxy/ready 2>/dev/null | tr "\n" " "
    kill -TERM $pid 2>/dev/null
    wait $pid
    echo "exit=$?"' 2>&1)
case "$r" in
    *"listen 127.0.0.1:"*"unix /run/pinhole-proxy/proxy.sock"*"exit=0") ok proxy "$r" ;;
    *) bad proxy "$r $(in_root 'tail -3 /tmp/proxy.log' 2>&1)" ;;
esac

# pinhole-execd with the options file the package wrote, read as the unit
# reads it (the fake mechanism: there is no runsc in the chroot), in an
# environment like systemd's: no PWD either (the daemon counts PWD as a
# credential name and refuses it).
# Its user and group are the unit's (User=, Group=; root when unset), and
# its runtime directory is made as systemd makes a RuntimeDirectory: owned
# by them, RuntimeDirectoryMode. Then a worker (a user in the group
# pinhole-execd, as docs/deploy.md makes one) must reach the socket, and a
# user outside the group must not.
r=$(in_root 'u=/lib/systemd/system/pinhole-execd.service
    user=$(sed -n "s/^User=//p" $u); group=$(sed -n "s/^Group=//p" $u)
    mode=$(sed -n "s/^RuntimeDirectoryMode=//p" $u)
    install -d -m "${mode:-0755}" -o "${user:-root}" -g "${group:-root}" /run/pinhole-execd
    useradd -M -N -g nogroup -G pinhole-execd pinhole-test-worker
    useradd -M -N -g nogroup pinhole-test-other
    env -i PATH=/usr/bin:/bin setpriv --reuid="${user:-root}" --regid="${group:-root}" --clear-groups \
        sh -c "set -a; . /etc/default/pinhole-execd; set +a
        exec env -u PWD pinhole-execd --socket=/run/pinhole-execd/execd.sock --socket-mode=0660 \
            --state-dir=/var/lib/pinhole-execd/state --mechanism=fake --mode=development \
            \$EXECD_OPTS" 2>/tmp/execd.log &
    pid=$!
    i=0
    while ! grep -q "\"listening\"" /tmp/execd.log && kill -0 $pid 2>/dev/null && [ $i -lt 600 ]; do
        sleep 0.1; i=$((i + 1))
    done
    [ -S /run/pinhole-execd/execd.sock ] && echo socket
    dial="import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"/run/pinhole-execd/execd.sock\")"
    setpriv --reuid=pinhole-test-worker --regid=nogroup --init-groups python3 -c "$dial" 2>/dev/null &&
        echo worker-reaches
    setpriv --reuid=pinhole-test-other --regid=nogroup --init-groups python3 -c "$dial" 2>/dev/null ||
        echo other-refused
    kill -TERM $pid 2>/dev/null
    wait $pid
    echo "exit=$?"
    userdel pinhole-test-worker; userdel pinhole-test-other' 2>&1)
case "$r" in
    *socket*worker-reaches*other-refused*"exit=0")
        ok execd "started with /etc/default/pinhole-execd as the unit's user and group, a member of pinhole-execd reaches its socket, another user does not, stopped with 0" ;;
    *) bad execd "$(echo $r) $(in_root 'tail -3 /tmp/execd.log' 2>&1)" ;;
esac

why=$(in_root 'export DEBIAN_FRONTEND=noninteractive
    apt-get purge -y -qq pinhole-proxy pinhole-execd >/dev/null 2>&1 || echo "purge failed"
    getent passwd pinhole-proxy >/dev/null && echo "user left"
    getent group pinhole-execd >/dev/null && echo "group left"
    [ -e /var/lib/pinhole-execd ] && echo "state left"
    [ -e /etc/default/pinhole-execd ] && echo "options file left"
    true')
if [ -z "$why" ]; then ok purge "user, group, state and options file removed"
else bad purge "$(echo $why)"; fi

rm -rf "$root"
finish
