# The isolation tests (gvisor, docker) - included from
# tests/sandbox/CMakeLists.txt after its glob registered every test_*.c.
#  - test_escape*, test_gvisor* and the host-side tests (workspace limits,
#    failure cleanup, unchanged rootfs) link the host-side escape helpers;
#  - they exit 77 ("SKIP: ...") when their mechanism is not available here,
#    which ctest shows as Skipped, never as a silent pass;
#  - the escape, workspace-limit and failure-cleanup tests also run for
#    docker (sandbox.<name>.docker).
file(GLOB PH_ISOLATION_TESTS CONFIGURE_DEPENDS
     ${CMAKE_CURRENT_LIST_DIR}/test_escape*.c ${CMAKE_CURRENT_LIST_DIR}/test_gvisor*.c
     ${CMAKE_CURRENT_LIST_DIR}/test_workspace_quota.c
     ${CMAKE_CURRENT_LIST_DIR}/test_create_failure_cleanup.c
     ${CMAKE_CURRENT_LIST_DIR}/test_rootfs_unchanged.c
     ${CMAKE_CURRENT_LIST_DIR}/test_lifetime.c
     ${CMAKE_CURRENT_LIST_DIR}/test_host_identity.c)
# Static programs the lifetime test runs inside a sandbox (its root
# filesystem has no compiler): PTRACE_ATTACH on the sandbox's init.
add_executable(sandbox-ptrace-probe ${CMAKE_CURRENT_LIST_DIR}/ptrace_probe.c)
target_link_options(sandbox-ptrace-probe PRIVATE -static)
# Another: asynchronous I/O left in flight at a command's end.
add_executable(sandbox-aio-probe ${CMAKE_CURRENT_LIST_DIR}/aio_probe.c)
target_link_options(sandbox-aio-probe PRIVATE -static)
if(TARGET sandbox.test_lifetime)
    add_dependencies(sandbox.test_lifetime sandbox-ptrace-probe sandbox-aio-probe)
    target_compile_definitions(sandbox.test_lifetime PRIVATE
        PH_PTRACE_PROBE="$<TARGET_FILE:sandbox-ptrace-probe>"
        PH_AIO_PROBE="$<TARGET_FILE:sandbox-aio-probe>")
endif()
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
foreach(name test_escape test_escape_limits test_workspace_quota test_create_failure_cleanup
        test_lifetime test_host_identity)
    if(TARGET sandbox.${name})
        add_test(NAME sandbox.${name}.docker COMMAND sandbox.${name} docker
                 WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
        set_tests_properties(sandbox.${name}.docker PROPERTIES
            LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 180)
    endif()
endforeach()
# A command's end on fake too: its PID namespace (test_lifetime.c).
if(TARGET sandbox.test_lifetime)
    add_test(NAME sandbox.test_lifetime.fake COMMAND sandbox.test_lifetime fake
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(sandbox.test_lifetime.fake PROPERTIES
        LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 180)
endif()
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

# The host side of the sandbox: a hostile state directory (unit, root only),
# and, like the isolation tests above, workspace limits, cleanup after every
# failure and an unchanged root filesystem (run as root; they exit 77 when
# their mechanism is not available here).
if(TARGET sandbox.test_state_dir_hostile)
    set_tests_properties(sandbox.test_state_dir_hostile PROPERTIES SKIP_RETURN_CODE 77)
endif()

# Plain HTTP from inside gVisor: busybox wget with the tier-2 http_proxy
# through pinhole-forwarder and the test-loopback proxy's plain-HTTP
# forwarding, to the file-serving origin of the proxy's client tests.
if(TARGET pinhole-proxy-testloopback AND TARGET proxy_e2e_peer AND TARGET pinhole-sandbox)
    ph_add_script_test(NAME sandbox.e2e_gvisor_wget
        COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/e2e_gvisor_wget.sh
                $<TARGET_FILE:pinhole-proxy-testloopback> $<TARGET_FILE:policyc>
                $<TARGET_FILE:pinhole-guard> $<TARGET_FILE:proxy_e2e_peer>
                $<TARGET_FILE:pinhole-sandbox> ${PROJECT_SOURCE_DIR}/scripts/build-rootfs.sh)
    set_tests_properties(sandbox.e2e_gvisor_wget PROPERTIES
        LABELS "e2e;isolation" SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()
