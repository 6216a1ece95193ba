# uring_proxy: an io_uring prototype of pinhole-proxy's CONNECT path (one
# thread, liburing), measured beside pinhole-proxy by bench_proxy --proxy in
# one run (scripts/bench.sh; docs/pinhole-proxy.md). Built only when
# liburing is installed; never installed.
pkg_check_modules(URING QUIET IMPORTED_TARGET liburing)
if(URING_FOUND AND TARGET pinhole-proxy-testloopback)
    # The proxy's own privilege drop; libevent only for proxy-int.h's headers.
    add_executable(uring_proxy ${CMAKE_CURRENT_LIST_DIR}/uring_proxy.c
                   ${PROJECT_SOURCE_DIR}/proxy/src/privdrop.c)
    target_link_libraries(uring_proxy PRIVATE pinhole_testloopback pinhole_proxy_request
                          PkgConfig::URING PkgConfig::LIBEVENT pinhole_flags)
endif()
