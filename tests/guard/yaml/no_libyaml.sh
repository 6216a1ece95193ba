#!/bin/sh
# no_libyaml.sh LIB - fails when the shared library LIB needs libyaml.
# Usage: no_libyaml.sh build/dev/guard/libpinhole.so
set -u
command -v readelf >/dev/null || { echo "SKIP: readelf is not installed"; exit 77; }
needed=$(readelf -d "$1" | grep NEEDED) || { echo "FAIL: $1 has no NEEDED entries"; exit 1; }
if printf '%s\n' "$needed" | grep -i yaml; then
    echo "FAIL: $1 needs libyaml"
    exit 1
fi
echo "ok: $1 needs $(printf '%s\n' "$needed" | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')"
