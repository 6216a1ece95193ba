# Issue 6: the isolation tests (gvisor, docker) - included from
# tests/sandbox/CMakeLists.txt after its glob registered every test_*.c.
#  - test_escape* and test_gvisor* link the host-side escape helpers;
#  - they exit 77 ("SKIP: ...") when their mechanism is not available here,
#    which ctest shows as Skipped, never as a silent pass;
#  - the escape test also runs for docker (sandbox.test_escape.docker).
file(GLOB PH_ISOLATION_TESTS CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_LIST_DIR}/test_escape*.c ${CMAKE_CURRENT_LIST_DIR}/test_gvisor*.c)
foreach(src ${PH_ISOLATION_TESTS})
    get_filename_component(name ${src} NAME_WE)
    if(TARGET sandbox.${name})
        target_sources(sandbox.${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/escape_support.c)
        add_dependencies(sandbox.${name} pinhole-forwarder)
        if(TARGET pinhole-sandbox-rootfs)
            add_dependencies(sandbox.${name} pinhole-sandbox-rootfs)
        endif()
        set_tests_properties(sandbox.${name} PROPERTIES
            LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 180)
    endif()
endforeach()
foreach(name test_escape test_escape_limits)
    if(TARGET sandbox.${name})
        add_test(NAME sandbox.${name}.docker COMMAND sandbox.${name} docker
                 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
        set_tests_properties(sandbox.${name}.docker PROPERTIES
            LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 180)
    endif()
endforeach()
# The negative control: the same attacks against fake (no isolation), where
# the ones docs/security.md lists must succeed (test_escape.c, FAKE_ESCAPES).
if(TARGET sandbox.test_escape)
    add_test(NAME sandbox.test_escape.fake COMMAND sandbox.test_escape fake
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(sandbox.test_escape.fake PROPERTIES
        LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 180)
endif()

# Network only through the proxy, end to end: curl inside gVisor through
# pinhole-forwarder and the test-loopback pinhole-proxy's unix socket, with
# the proxy's own e2e set-up (dnsmasq, openssl s_server, policyc, grants).
if(TARGET pinhole-proxy-testloopback AND TARGET proxy_e2e_peer AND TARGET pinhole-sandbox)
    ph_add_script_test(NAME sandbox.e2e_gvisor_proxy
        COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/e2e_gvisor_proxy.sh
                $<TARGET_FILE:pinhole-proxy-testloopback> $<TARGET_FILE:policyc>
                $<TARGET_FILE:pinhole-guard> $<TARGET_FILE:proxy_e2e_peer>
                $<TARGET_FILE:pinhole-sandbox> ${PROJECT_SOURCE_DIR}/scripts/build-rootfs.sh)
    set_tests_properties(sandbox.e2e_gvisor_proxy PROPERTIES
        LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
