# Guard tests that need more than libpinhole.
#
# tests/guard/CMakeLists.txt registered every test_*.c as a "unit" test; the
# ones that start processes (dnsmasq on a loopback port, the pinhole-guard
# binary) are relabelled "e2e" here. Tests that build tables link policyc's
# compiler (test-only: libpinhole itself never depends on policyc).
set(PH_GUARD_TABLE_TESTS
    guard.test_guard_check guard.test_guard_reload guard.test_resolve_guard guard.test_guard_cli
    guard.test_guard_worker_example guard.test_wildcard_dns guard.test_decide_parity)
set(PH_GUARD_DNS_TESTS
    guard.test_resolve guard.test_resolver_driver guard.test_resolve_guard guard.test_guard_cli
    guard.test_guard_worker_example)
foreach(t ${PH_GUARD_TABLE_TESTS})
    if(TARGET ${t})
        target_sources(${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/guard_fixture.c)
        target_link_libraries(${t} PRIVATE policyc_core)
    endif()
endforeach()
foreach(t ${PH_GUARD_DNS_TESTS})
    if(TARGET ${t})
        target_sources(${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/dnsmasq_fixture.c)
        set_tests_properties(${t} PROPERTIES LABELS e2e)
    endif()
endforeach()
if(TARGET guard.test_guard_cli AND TARGET pinhole-guard)
    add_dependencies(guard.test_guard_cli pinhole-guard)
    target_compile_definitions(guard.test_guard_cli PRIVATE
        PH_GUARD_CLI="$<TARGET_FILE:pinhole-guard>")
endif()

# The libcurl worker example against a local upstream. The default denylist
# refuses 127.0.0.0/8, so a second build of the example links the guard's
# test-loopback build (pinhole_testloopback, guard/CMakeLists.txt: exempts
# exactly 127.0.0.0/8 and ::1; DESIGN section 7). Test-only: never
# installed, never linked by a product binary. The test also runs the normal
# example to show the default build refuses loopback.
if(TARGET guard.test_guard_worker_example AND TARGET example_worker_libcurl
   AND TARGET pinhole_testloopback)
    add_executable(worker_libcurl_loopback ${PROJECT_SOURCE_DIR}/examples/worker_libcurl.c)
    target_link_libraries(worker_libcurl_loopback
        PRIVATE pinhole_testloopback PkgConfig::CURL pinhole_flags)
    add_dependencies(guard.test_guard_worker_example example_worker_libcurl worker_libcurl_loopback)
    target_compile_definitions(guard.test_guard_worker_example PRIVATE
        PH_WORKER_DEFAULT="$<TARGET_FILE:example_worker_libcurl>"
        PH_WORKER_LOOPBACK="$<TARGET_FILE:worker_libcurl_loopback>")
endif()
