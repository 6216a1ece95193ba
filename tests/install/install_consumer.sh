#!/bin/sh
# Installs the build into a scratch prefix, moves the whole tree elsewhere
# (pinhole.pc is relocatable), then builds and runs a consumer against the
# installed headers, the shared and the static libpinhole via pkg-config.
# Usage: install_consumer.sh BUILD_DIR
set -eu
BUILD=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$BUILD" --prefix "$scratch/first" >/dev/null
mv "$scratch/first" "$scratch/moved"
P=$scratch/moved
for f in bin/policyc bin/pinhole-guard include/pinhole/status.h include/pinhole/table.h \
         include/pinhole/version.h include/pinhole/diag.h \
         lib/libpinhole.a lib/libpinhole.so lib/pkgconfig/pinhole.pc \
         lib/libpinhole-base.a lib/libpinhole-base.so lib/pkgconfig/pinhole-base.pc \
         share/doc/pinhole/allowlist.md share/doc/pinhole/examples/allowlist.yaml; do
    [ -e "$P/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
cat >"$scratch/consumer.c" <<'C'
#include <pinhole/host.h>
#include <pinhole/status.h>
#include <pinhole/version.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    if (strcmp(ph_version(), PH_VERSION_STRING) != 0) return 1;
    if (ph_host_check("example.com", 11, NULL) != PH_HOST_OK) return 1;
    if (ph_host_check("127.1", 5, NULL) != PH_HOST_IP_LITERAL) return 1;
    puts(ph_reason_code(PH_REASON_IP_LITERAL));
    return 0;
}
C
export PKG_CONFIG_PATH=$P/lib/pkgconfig
cc "$scratch/consumer.c" $(pkg-config --cflags --libs pinhole) -Wl,-rpath,"$P/lib" -o "$scratch/shared"
[ "$("$scratch/shared")" = ip_literal ] || { echo "FAIL: shared consumer"; exit 1; }
cc "$scratch/consumer.c" $(pkg-config --cflags pinhole) "$P/lib/libpinhole.a" "$P/lib/libpinhole-base.a" \
    $(pkg-config --libs-only-l libcrypto libcares libidn2) -lpthread -o "$scratch/static"
[ "$("$scratch/static")" = ip_literal ] || { echo "FAIL: static consumer"; exit 1; }
"$P/bin/policyc" check "$P/share/doc/pinhole/examples/allowlist.yaml" >/dev/null
# Every binary reports the project's version (pinhole/version.h).
want=$(sed -n 's/^#define PH_VERSION_STRING "\(.*\)"$/\1/p' "$P/include/pinhole/version.h")
for b in policyc pinhole-guard pinhole-proxy pinhole-sandbox pinhole-artifacts pinhole-execd; do
    [ -x "$P/bin/$b" ] || continue
    got=$("$P/bin/$b" --version | head -n 1)
    [ "$got" = "$b $want" ] || { echo "FAIL: $b --version says '$got', not '$b $want'"; exit 1; }
done
fwd=$P/libexec/pinhole/pinhole-forwarder
if [ -x "$fwd" ]; then
    [ "$("$fwd" --version)" = "pinhole-forwarder $want" ] || { echo "FAIL: forwarder --version"; exit 1; }
fi
echo "install: ok (relocated prefix, shared and static consumers, policyc runs)"
