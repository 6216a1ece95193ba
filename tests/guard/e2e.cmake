# Guard tests that need more than libpinhole.
#
# tests/guard/CMakeLists.txt registered every test_*.c as a "unit" test; the
# ones that start processes (dnsmasq on a loopback port, the pinhole-guard
# binary) are relabelled "e2e" here. Tests that build tables link policyc's
# compiler (test-only: libpinhole itself never depends on policyc).
set(PH_GUARD_TABLE_TESTS
    guard.test_guard_check guard.test_guard_reload guard.test_resolve_guard guard.test_guard_cli
    guard.test_guard_worker_example guard.test_wildcard_dns guard.test_decide
    guard.test_redirect guard.test_dns_cache guard.test_revocation)
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

# The default denylist refuses 127.0.0.0/8, so the end-to-end tests that
# dial local servers link pinhole_testloopback (guard/CMakeLists.txt: the
# guard compiled with PINHOLE_TEST_LOOPBACK_UPSTREAM, exempting exactly
# 127.0.0.0/8 and ::1; DESIGN section 7). Test-only: never installed, never
# linked by a product binary.

# ph_dial_url and libpinhole-curl against local servers named by dnsmasq
# (tables compiled by the policyc binary: policyc_core would link the
# default libpinhole too). Also run under ASan+UBSan in the asan preset.
set(PH_GUARD_LOOPBACK_E2E e2e_dial)
if(TARGET pinhole_curl)
    list(APPEND PH_GUARD_LOOPBACK_E2E e2e_curl)
endif()
set(PH_GUARD_LOOPBACK_LABELS e2e)
if(PINHOLE_SANITIZE)
    list(APPEND PH_GUARD_LOOPBACK_LABELS sanitize)
endif()
foreach(name ${PH_GUARD_LOOPBACK_E2E})
    ph_add_unit_test(NAME guard.${name}
        SOURCES ${CMAKE_CURRENT_LIST_DIR}/${name}.c ${CMAKE_CURRENT_LIST_DIR}/dnsmasq_fixture.c
                ${PROJECT_SOURCE_DIR}/tests/support/test_support.c
        LIBS pinhole_testloopback LABELS ${PH_GUARD_LOOPBACK_LABELS})
    target_compile_definitions(guard.${name} PRIVATE PH_POLICYC="$<TARGET_FILE:policyc>")
    add_dependencies(guard.${name} policyc)
    set_tests_properties(guard.${name} PROPERTIES TIMEOUT 120)
endforeach()
if(TARGET guard.e2e_curl)
    # The attachment's source, on the loopback libpinhole.
    target_sources(guard.e2e_curl PRIVATE ${PROJECT_SOURCE_DIR}/guard/curl/src/curl_attach.c)
    target_include_directories(guard.e2e_curl PRIVATE ${PROJECT_SOURCE_DIR}/guard/curl/include)
    target_link_libraries(guard.e2e_curl PRIVATE PkgConfig::CURL OpenSSL::SSL)
endif()

# The libcurl worker example against a local upstream: a second build of
# the example on the loopback libpinhole. The test also runs the normal
# example to show the default build refuses loopback.
if(TARGET guard.test_guard_worker_example AND TARGET example_worker_libcurl)
    add_executable(worker_libcurl_loopback ${PROJECT_SOURCE_DIR}/examples/worker_libcurl.c
        ${PROJECT_SOURCE_DIR}/guard/curl/src/curl_attach.c)
    target_include_directories(worker_libcurl_loopback PRIVATE ${PROJECT_SOURCE_DIR}/guard/curl/include)
    target_link_libraries(worker_libcurl_loopback
        PRIVATE pinhole_testloopback PkgConfig::CURL pinhole_flags)
    add_dependencies(guard.test_guard_worker_example example_worker_libcurl worker_libcurl_loopback)
    target_compile_definitions(guard.test_guard_worker_example PRIVATE
        PH_WORKER_DEFAULT="$<TARGET_FILE:example_worker_libcurl>"
        PH_WORKER_LOOPBACK="$<TARGET_FILE:worker_libcurl_loopback>")
endif()
