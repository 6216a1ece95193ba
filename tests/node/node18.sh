#!/bin/sh
# node18.sh ROOT ARGS...: Debian's Node.js 18 as scripts/node18.sh unpacked
# it in ROOT, run with ARGS: libnode from ROOT, and, in a mount namespace of
# its own, ROOT/usr/share laid over /usr/share (a read-only overlay; Debian's
# node loads builtins from /usr/share/nodejs). The host's /usr/share is not
# touched. Needs root (unshare -m); exit 77 (skip) otherwise.
set -eu
root=$1
shift
if [ "$(id -u)" -ne 0 ] || [ ! -x "$root/usr/bin/node" ]; then
    echo "SKIP: needs root and Debian's node 18 in $root (scripts/node18.sh)"
    exit 77
fi
export LD_LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu"
exec unshare -m --propagation private sh -c '
    mount -t overlay pinhole-node18 -o "lowerdir=$0/usr/share:/usr/share" /usr/share &&
    exec "$0/usr/bin/node" "$@"' "$root" "$@"
