#!/bin/sh
# build-rootfs.sh: build a minimal read-only root filesystem for the gvisor
# and docker sandbox mechanisms from busybox-static.
#
# Usage: scripts/build-rootfs.sh [--force] DIR
#
# The result holds /bin/busybox with one symlink per applet (sh, ls, cat,
# wget, ...), GNU touch and dash (as /bin/sh) copied from the host
# with their libraries (PH_ROOTFS_HOST_TOOLS), an /etc/passwd and /etc/group naming the sandbox user (uid and
# gid 1000, "sandbox"), and empty mount points (/workspace, /tmp, /proc, /dev,
# /sys, /run/pinhole, and the files /run/pinhole/forwarder and
# /run/pinhole/proxy.sock). It is what the tests use; for a fuller Debian
# root filesystem see docs/sandbox-gvisor.md (debootstrap).
#
# The tree is shared read-only by every sandbox, but runsc's gofer creates
# in it, on the host, the mount point of any bind mount that lacks one; so
# every bind mount target exists here, with the type its source has (both
# are files), and the gvisor mechanism refuses a tree without them. A tree
# built by an older version of this script (no stubs) is rebuilt.
#
# Exit codes: 0 built (or already present), 1 failure, 2 usage error.
set -eu

usage() {
    echo "usage: $0 [--force] DIR" >&2
    echo "  builds a busybox root filesystem in DIR (refuses a non-empty DIR without --force)" >&2
}

force=0
case "${1:-}" in
    --help|-h) usage; exit 0 ;;
    --force) force=1; shift ;;
esac
[ $# -eq 1 ] || { usage; exit 2; }
dir=$1

busybox=${PH_BUSYBOX:-/bin/busybox}
if ! [ -x "$busybox" ]; then
    echo "build-rootfs: $busybox not found (install busybox-static)" >&2
    exit 1
fi
# A dynamically linked busybox would need a loader and libc in the rootfs.
if command -v file >/dev/null 2>&1 && ! file -L "$busybox" | grep -q 'statically linked'; then
    echo "build-rootfs: $busybox is not statically linked (install busybox-static)" >&2
    exit 1
fi

if [ -e "$dir/.pinhole-rootfs" ] && [ "$force" -eq 0 ]; then
    if [ -f "$dir/run/pinhole/forwarder" ] && [ -f "$dir/run/pinhole/proxy.sock" ]; then
        exit 0
    fi
    force=1 # ours, from before the mount-point stubs
fi
if [ -d "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && [ "$force" -eq 0 ]; then
    echo "build-rootfs: $dir is not empty (use --force)" >&2
    exit 1
fi

# Build next to the target and rename, so a half-built tree is never used.
tmp="$dir.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/sbin" "$tmp/usr/bin" "$tmp/usr/sbin" "$tmp/etc" \
         "$tmp/workspace" "$tmp/tmp" "$tmp/proc" "$tmp/dev" "$tmp/sys" "$tmp/run/pinhole"
cp "$busybox" "$tmp/bin/busybox"
chmod 0755 "$tmp/bin/busybox"
for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] && continue
    ln -sf busybox "$tmp/bin/$applet"
done
# A few GNU tools whose behaviour busybox lacks (touch -d with nanoseconds
# and a zone, as printed by stat -c %y), copied from the host with the
# shared libraries they load. They land in /usr/bin, ahead of /bin in the
# sandbox PATH. (GNU stat is not copied: it needs statx, which the 2022
# gVisor refuses; busybox stat -c %y prints what GNU touch -d reads.)
# Debian's busybox sh runs its own applets before searching
# PATH, so with dash available /bin/sh is dash, which does search PATH.
# PH_ROOTFS_HOST_TOOLS="" builds a pure busybox tree.
for tool in ${PH_ROOTFS_HOST_TOOLS-touch dash}; do
    src=$(command -v "$tool" 2>/dev/null) || continue
    case "$src" in /*) ;; *) continue ;; esac
    cp -L "$src" "$tmp/usr/bin/$tool"
    for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*'); do
        [ -e "$tmp$lib" ] && continue
        mkdir -p "$tmp$(dirname "$lib")"
        cp -L "$lib" "$tmp$lib"
    done
done
if [ -x "$tmp/usr/bin/dash" ]; then
    ln -sf /usr/bin/dash "$tmp/bin/sh"
fi

cat >"$tmp/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$tmp/etc/group" <<GROUP
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GROUP
: >"$tmp/etc/hosts"
: >"$tmp/etc/resolv.conf"
chmod 1777 "$tmp/tmp"
# Mount points of the bind mounts (see the top): empty, read-only files.
: >"$tmp/run/pinhole/forwarder"
: >"$tmp/run/pinhole/proxy.sock"
chmod 0444 "$tmp/run/pinhole/forwarder" "$tmp/run/pinhole/proxy.sock"
touch "$tmp/.pinhole-rootfs"

rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "build-rootfs: built $dir" >&2
