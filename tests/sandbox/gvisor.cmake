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

# The host side of the sandbox: a hostile state directory, workspace
# limits, cleanup after every failure, an unchanged root filesystem. Run as
# root; the mechanism tests exit 77 when theirs is not available here.
if(TARGET sandbox.test_state_dir_hostile)
    set_tests_properties(sandbox.test_state_dir_hostile PROPERTIES SKIP_RETURN_CODE 77)
endif()
foreach(name test_workspace_quota test_create_failure_cleanup test_rootfs_unchanged)
    if(TARGET sandbox.${name})
        target_sources(sandbox.${name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/escape_support.c)
        add_dependencies(sandbox.${name} pinhole-forwarder)
        if(TARGET pinhole-sandbox-rootfs)
            add_dependencies(sandbox.${name} pinhole-sandbox-rootfs)
        endif()
        set_tests_properties(sandbox.${name} PROPERTIES
            LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 300)
        if(NOT name STREQUAL "test_rootfs_unchanged")
            add_test(NAME sandbox.${name}.docker COMMAND sandbox.${name} docker
                     WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
            set_tests_properties(sandbox.${name}.docker PROPERTIES
                LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 300)
        endif()
    endif()
endforeach()
