#!/bin/sh
# Installs the build into a scratch prefix, moves the whole tree elsewhere
# (pinhole.pc is relocatable), then builds and runs a consumer against the
# installed headers, the shared and the static libpinhole via pkg-config, and
# an out-of-tree CMake project through find_package(pinhole) (pinhole::pinhole,
# whose compile lines must carry no c-ares include path).
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
         lib/cmake/pinhole/pinholeConfig.cmake lib/cmake/pinhole/pinholeConfigVersion.cmake \
         lib/cmake/pinhole/pinholeTargets.cmake \
         include/pinhole/dial.h include/pinhole/redirect.h include/pinhole/curl.h \
         lib/libpinhole-curl.so lib/pkgconfig/pinhole-curl.pc \
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
# find_package(pinhole) from the relocated prefix, nothing else on the paths.
mkdir "$scratch/cmake-consumer"
cp "$scratch/consumer.c" "$scratch/cmake-consumer/consumer.c"
cat >"$scratch/cmake-consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(pinhole_consumer LANGUAGES C)
find_package(pinhole 0.1 REQUIRED)
add_executable(x consumer.c)
target_link_libraries(x pinhole::pinhole)
add_executable(x_static consumer.c)
target_link_libraries(x_static pinhole::pinhole_static)
CM
unset PKG_CONFIG_PATH
cmake -S "$scratch/cmake-consumer" -B "$scratch/cmake-build" -DCMAKE_PREFIX_PATH="$P" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$scratch/cmake.log" 2>&1 \
    || { cat "$scratch/cmake.log"; echo "FAIL: find_package(pinhole)"; exit 1; }
cmake --build "$scratch/cmake-build" >>"$scratch/cmake.log" 2>&1 \
    || { cat "$scratch/cmake.log"; echo "FAIL: CMake consumer build"; exit 1; }
if grep -E '"command".*(-I|-isystem) *[^ ]*(c-ares|ares)' "$scratch/cmake-build/compile_commands.json"; then
    echo "FAIL: the CMake consumer's compile line has a c-ares include path"; exit 1
fi
grep -q -- "-I$P/include\|-isystem $P/include" "$scratch/cmake-build/compile_commands.json" \
    || { echo "FAIL: pinhole::pinhole does not carry the installed include directory"; exit 1; }
[ "$("$scratch/cmake-build/x")" = ip_literal ] || { echo "FAIL: CMake consumer (shared)"; exit 1; }
[ "$("$scratch/cmake-build/x_static")" = ip_literal ] || { echo "FAIL: CMake consumer (static)"; exit 1; }
cat >"$scratch/curl_consumer.c" <<'C'
#include <pinhole/curl.h>
#include <stdio.h>
int main(void)
{
    ph_curl *pc = NULL;
    if (ph_curl_attach(NULL, NULL, "default", NULL, &pc, NULL) != PH_E_INVAL) return 1;
    puts(ph_reason_code(PH_REASON_REDIRECT_DOWNGRADE));
    return 0;
}
C
cc "$scratch/curl_consumer.c" $(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs pinhole-curl) -Wl,-rpath,"$P/lib" \
    -o "$scratch/curl_consumer"
[ "$("$scratch/curl_consumer")" = redirect_downgrade ] || { echo "FAIL: pinhole-curl consumer"; exit 1; }
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
echo "install: ok (relocated prefix, shared and static consumers via pkg-config and find_package, pinhole-curl, policyc runs, every --version)"
