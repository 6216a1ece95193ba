# Compiler flags shared by every Pinhole target: warnings (as errors only when
# PINHOLE_WERROR is on), hardening, OpenSSL 3 API only, and the sanitizers for
# the asan preset.
#
# PINHOLE_WERROR is ON in the dev, asan and fuzz presets, which are what
# `make test` and CI (.ci/run) build: a new warning fails there. It is OFF by
# default and in the release preset, so a release build with a newer
# compiler that warns about something new still builds.
option(PINHOLE_WERROR "Treat compiler warnings as errors (dev, asan, fuzz and CI builds)" OFF)

add_library(pinhole_flags INTERFACE)
target_compile_options(pinhole_flags INTERFACE
    $<$<BOOL:${PINHOLE_WERROR}>:-Werror>
    -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes
    -Wmissing-prototypes -Wpointer-arith -Wvla -Wcast-qual -Wundef
    -Wno-unused-parameter -fno-strict-aliasing -fstack-protector-strong)
target_compile_definitions(pinhole_flags INTERFACE
    _GNU_SOURCE OPENSSL_API_COMPAT=30000 OPENSSL_NO_DEPRECATED
    $<$<BOOL:${PINHOLE_TEST_LOOPBACK_UPSTREAM}>:PINHOLE_TEST_LOOPBACK_UPSTREAM=1>)
if(NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
    target_compile_definitions(pinhole_flags INTERFACE _FORTIFY_SOURCE=2)
endif()

if(PINHOLE_SANITIZE)
    target_compile_options(pinhole_flags INTERFACE
        -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_link_options(pinhole_flags INTERFACE -fsanitize=address,undefined)
endif()
