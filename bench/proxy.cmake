# bench_proxy: pinhole-proxy vs a direct connection to the same local upstream
# (transactions/s, added latency, bulk throughput, RSS of 10,000 idle tunnels,
# keep-alive plain-HTTP GETs).
if(TARGET pinhole-proxy-testloopback)
    add_executable(bench_proxy ${CMAKE_CURRENT_LIST_DIR}/proxy.c ${CMAKE_CURRENT_LIST_DIR}/proxy_http.c
        ${CMAKE_CURRENT_LIST_DIR}/floor_relay.c
        ${PROJECT_SOURCE_DIR}/tests/support/tls_records.c)
    # tls_records.c: the ClientHello of the inspected rows, built as the
    # reader's tests build theirs.
    target_include_directories(bench_proxy PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
    target_link_libraries(bench_proxy PRIVATE PkgConfig::LIBEVENT Threads::Threads pinhole_flags
        pinhole_proxy_request)
    target_compile_definitions(bench_proxy PRIVATE
        PX_PROXY="$<TARGET_FILE:pinhole-proxy-testloopback>"
        PX_POLICYC="$<TARGET_FILE:policyc>" PX_GUARD_CLI="$<TARGET_FILE:pinhole-guard>"
        PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    add_dependencies(bench_proxy pinhole-proxy-testloopback policyc pinhole-guard)
    # The allocation counter bench_proxy preloads into the proxy (--allocs):
    # without pinhole_flags, whose sanitizers cannot be preloaded.
    add_library(bench_alloc_count MODULE ${CMAKE_CURRENT_LIST_DIR}/alloc_count.c)
    target_compile_options(bench_alloc_count PRIVATE -Wall -Wextra -Werror)
    target_compile_definitions(bench_proxy PRIVATE
        PX_ALLOC_COUNT="$<TARGET_FILE:bench_alloc_count>")
    add_dependencies(bench_proxy bench_alloc_count)
endif()
