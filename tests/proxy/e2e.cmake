# End-to-end tests of pinhole-proxy: real dnsmasq, openssl s_server, curl and
# the byte-checking peer against the PINHOLE_TEST_LOOPBACK_UPSTREAM build.
if(TARGET pinhole-proxy-testloopback)
    add_executable(proxy_e2e_peer ${CMAKE_CURRENT_SOURCE_DIR}/proxy_e2e_peer.c)
    target_link_libraries(proxy_e2e_peer PRIVATE OpenSSL::Crypto pinhole_flags)
    set(PX_E2E_BINS $<TARGET_FILE:pinhole-proxy-testloopback> $<TARGET_FILE:policyc>
        $<TARGET_FILE:pinhole-guard> $<TARGET_FILE:proxy_e2e_peer> $<TARGET_FILE:pinhole-proxy>)
    file(GLOB PX_E2E_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/e2e_*.sh)
    list(FILTER PX_E2E_SCRIPTS EXCLUDE REGEX "e2e_lib\\.sh$")
    foreach(script ${PX_E2E_SCRIPTS})
        get_filename_component(name ${script} NAME_WE)
        ph_add_script_test(NAME proxy.${name} COMMAND bash ${script} ${PX_E2E_BINS})
        set_tests_properties(proxy.${name} PROPERTIES TIMEOUT 60)
    endforeach()
endif()

# The parity helper: the guard's verdict and the proxy's on one corpus.
if(TARGET pinhole-proxy-testloopback)
    add_executable(proxy_parity ${CMAKE_CURRENT_SOURCE_DIR}/proxy_parity.c
        ${PROJECT_SOURCE_DIR}/tests/guard/url_tsv.c ${PROJECT_SOURCE_DIR}/tests/support/test_support.c)
    target_include_directories(proxy_parity PRIVATE ${PROJECT_SOURCE_DIR}/tests/guard
        ${PROJECT_SOURCE_DIR}/tests/support)
    target_compile_definitions(proxy_parity PRIVATE
        PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PH_BINARY_DIR="${PROJECT_BINARY_DIR}")
    target_link_libraries(proxy_parity PRIVATE pinhole_static PkgConfig::CMOCKA pinhole_flags)
endif()
