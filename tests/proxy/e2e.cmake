# End-to-end tests of pinhole-proxy: real dnsmasq, openssl s_server, curl and
# the byte-checking peer against the PINHOLE_TEST_LOOPBACK_UPSTREAM build.
# In a sanitizer build (PINHOLE_SANITIZE: pinhole-proxy and its test-loopback
# twin with ASan+UBSan) the proxy's suites also carry the label "sanitize";
# e2e_lib.sh fails a test on any sanitizer report.
if(TARGET pinhole-proxy-testloopback)
    add_executable(proxy_e2e_peer ${CMAKE_CURRENT_SOURCE_DIR}/proxy_e2e_peer.c)
    target_link_libraries(proxy_e2e_peer PRIVATE OpenSSL::Crypto pinhole_flags)
    set(PX_E2E_BINS $<TARGET_FILE:pinhole-proxy-testloopback> $<TARGET_FILE:policyc>
        $<TARGET_FILE:pinhole-guard> $<TARGET_FILE:proxy_e2e_peer> $<TARGET_FILE:pinhole-proxy>)
    set(PX_E2E_SANITIZED e2e_decisions e2e_transfer e2e_load e2e_faults e2e_forward e2e_forward_hostile
        e2e_forward_client_gone e2e_http_python e2e_http_pip e2e_http_apt e2e_tunnel_inspect
        e2e_proxy_protocol e2e_fleet e2e_forward_edges e2e_reload_special e2e_revoke
        e2e_reload_forward e2e_forward_redecide e2e_reload_churn e2e_forward_stream
        e2e_accept_backoff e2e_tunnel_fronting)
    # e2e_accept_backoff.sh's preloaded accept4/accept failing with EMFILE on
    # demand ($PH_BINARY_DIR/tests/proxy/libph_accept_fail.so). Built without
    # pinhole_flags: no sanitizer runtime in a preload; the sanitized proxy
    # (clang, its runtime linked in) reaches it from its own accept4
    # interceptor through RTLD_NEXT.
    add_library(ph_accept_fail MODULE ${PROJECT_SOURCE_DIR}/tests/support/accept_fail.c)
    target_compile_options(ph_accept_fail PRIVATE -Wall -Wextra -Werror)
    target_link_libraries(ph_accept_fail PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
    set_target_properties(ph_accept_fail PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    # e2e_secrets.sh's preloaded free(3) and realloc(3) searching each block
    # they give back for a grant token or key
    # ($PH_BINARY_DIR/tests/proxy/libph_free_scan.so). glibc's allocator
    # only: a sanitizer's allocator takes free(3) itself, so the sanitized
    # build has none (the script skips).
    if(NOT PINHOLE_SANITIZE)
        add_library(ph_free_scan MODULE ${PROJECT_SOURCE_DIR}/tests/support/free_scan.c)
        target_compile_options(ph_free_scan PRIVATE -Wall -Wextra -Werror)
        target_link_libraries(ph_free_scan PRIVATE ${CMAKE_DL_LIBS})
        set_target_properties(ph_free_scan PROPERTIES
            LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    endif()
    file(GLOB PX_E2E_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/e2e_*.sh)
    list(FILTER PX_E2E_SCRIPTS EXCLUDE REGEX "e2e_lib\\.sh$")
    foreach(script ${PX_E2E_SCRIPTS})
        get_filename_component(name ${script} NAME_WE)
        set(labels e2e)
        set(timeout 60)
        if(name STREQUAL "e2e_faults" OR name STREQUAL "e2e_fleet" OR name MATCHES "^e2e_http_")
            set(timeout 120)
        endif()
        if(PINHOLE_SANITIZE AND name IN_LIST PX_E2E_SANITIZED)
            list(APPEND labels sanitize)
            set(timeout 300)
        endif()
        ph_add_script_test(NAME proxy.${name} COMMAND bash ${script} ${PX_E2E_BINS} LABELS ${labels})
        set_tests_properties(proxy.${name} PROPERTIES TIMEOUT ${timeout})
    endforeach()
endif()

# System calls and heap allocations per CONNECT (and per forwarded request),
# counted with strace and
# bench_proxy's preloaded allocation counter (which a sanitizer build cannot
# preload: none there).
if(TARGET pinhole-proxy-testloopback AND PINHOLE_BUILD_BENCH AND NOT PINHOLE_SANITIZE)
    # connect_counts: per CONNECT; forward_counts: per forwarded plain-HTTP
    # request on a kept-alive connection; inspect_counts: what a tunnel's
    # inspection adds to a CONNECT carrying a ClientHello.
    foreach(counts connect_counts forward_counts inspect_counts)
        ph_add_script_test(NAME proxy.${counts}
            COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/${counts}.sh
                $<TARGET_FILE:pinhole-proxy-testloopback> $<TARGET_FILE:policyc>
                $<TARGET_FILE:pinhole-guard> $<TARGET_FILE:bench_alloc_count>
            LABELS e2e)
        set_tests_properties(proxy.${counts} PROPERTIES TIMEOUT 120)
    endforeach()
endif()

# The parity helper: the guard's verdict and the proxy's on one corpus.
if(TARGET pinhole-proxy-testloopback)
    add_executable(proxy_parity ${CMAKE_CURRENT_SOURCE_DIR}/proxy_parity.c
        ${PROJECT_SOURCE_DIR}/tests/guard/url_tsv.c ${PROJECT_SOURCE_DIR}/tests/support/test_support.c)
    target_include_directories(proxy_parity PRIVATE ${PROJECT_SOURCE_DIR}/tests/guard
        ${PROJECT_SOURCE_DIR}/tests/support ${PROJECT_SOURCE_DIR}/proxy/src)
    target_compile_definitions(proxy_parity PRIVATE
        PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PH_BINARY_DIR="${PROJECT_BINARY_DIR}")
    target_link_libraries(proxy_parity PRIVATE pinhole_static PkgConfig::CMOCKA pinhole_flags)
endif()
