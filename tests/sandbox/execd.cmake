# pinhole-execd tests (docs/execd.md), included from tests/sandbox/CMakeLists.txt.
#  - execd.contract_<mechanism>: THE contract suite, unchanged, compiled
#    against the service (pinhole/execd_as_port.h) and run through a daemon
#    the wrapper starts: client -> pinhole-execd -> mechanism. Exit 77 when the
#    mechanism is not available here.
#  - execd.test_execd: the daemon's own behaviour (authentication, scoping,
#    limits, recovery, disconnect, leases, refusals), against fake.
if(NOT TARGET pinhole-execd)
    return()
endif()
add_executable(execd_contract_suite ${CMAKE_CURRENT_LIST_DIR}/contract_suite.c
               ${PH_SANDBOX_TEST_SUPPORT})
target_compile_options(execd_contract_suite PRIVATE -include pinhole/execd_as_port.h)
target_link_libraries(execd_contract_suite PRIVATE pinhole_execd_client pinhole_sandbox_internal
                      PkgConfig::CMOCKA pinhole_flags)
target_include_directories(execd_contract_suite PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
target_compile_definitions(execd_contract_suite PRIVATE
    PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PH_BINARY_DIR="${PROJECT_BINARY_DIR}")
foreach(mechanism fake gvisor)
    add_test(NAME execd.contract_${mechanism}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/execd_contract.sh
                     $<TARGET_FILE:pinhole-execd> $<TARGET_FILE:execd_contract_suite> ${mechanism}
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(execd.contract_${mechanism} PROPERTIES
        LABELS "e2e;contract" SKIP_RETURN_CODE 77 TIMEOUT 180)
endforeach()
if(TARGET pinhole-sandbox-rootfs)
    add_dependencies(execd_contract_suite pinhole-sandbox-rootfs)
endif()
add_dependencies(execd_contract_suite pinhole-execd pinhole-forwarder)

ph_add_unit_test(NAME execd.test_execd SOURCES ${CMAKE_CURRENT_LIST_DIR}/execd/test_execd.c
                 ${PH_SANDBOX_TEST_SUPPORT}
                 LIBS pinhole_execd_client pinhole_execd_wire pinhole_sandbox_internal OpenSSL::SSL
                 LABELS e2e)
target_compile_definitions(execd.test_execd PRIVATE
    PH_EXECD_BINARY="$<TARGET_FILE:pinhole-execd>" PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    PH_SANDBOX_CLI="$<TARGET_FILE:pinhole-sandbox>")
add_dependencies(execd.test_execd pinhole-execd pinhole-sandbox)
target_include_directories(execd.test_execd PRIVATE ${CMAKE_CURRENT_LIST_DIR})
set_tests_properties(execd.test_execd PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
# In a sanitizer build the daemon runs under ASan+UBSan here too: any report
# fails the test (daemon_stop reads the daemon's log).
if(PINHOLE_SANITIZE)
    set_tests_properties(execd.test_execd PROPERTIES LABELS "e2e;sanitize" TIMEOUT 600)
endif()

# artifact.export end to end through the service (the worker's side compiled
# against pinhole/execd_as_port.h), run by the same wrapper on fake.
if(TARGET pinhole_artifacts_export_execd)
    add_executable(execd_artifact_export ${CMAKE_CURRENT_LIST_DIR}/execd/test_execd_artifact_export.c
                   ${PH_SANDBOX_TEST_SUPPORT})
    target_compile_options(execd_artifact_export PRIVATE -include pinhole/execd_as_port.h)
    target_include_directories(execd_artifact_export PRIVATE ${PROJECT_SOURCE_DIR}/tests/support
                               ${CMAKE_CURRENT_LIST_DIR})
    target_link_libraries(execd_artifact_export PRIVATE pinhole_artifacts_export_execd
                          pinhole_execd_client pinhole_sandbox_internal PkgConfig::CMOCKA
                          pinhole_flags)
    target_compile_definitions(execd_artifact_export PRIVATE
        PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PH_BINARY_DIR="${PROJECT_BINARY_DIR}")
    add_test(NAME execd.artifact_export
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/execd_contract.sh
                     $<TARGET_FILE:pinhole-execd> $<TARGET_FILE:execd_artifact_export> fake
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(execd.artifact_export PROPERTIES LABELS e2e SKIP_RETURN_CODE 77
                         TIMEOUT 120)
endif()

# The builtin tools' JSON schemas against what the service accepts and returns.
ph_add_script_test(NAME execd.tool_schemas
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/tool_schemas.py
            $<TARGET_FILE:pinhole-execd> ${PROJECT_SOURCE_DIR})
set_tests_properties(execd.tool_schemas PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# A SIGTERM the moment the socket appears stops the daemon cleanly (exit 0).
ph_add_script_test(NAME execd.sigterm_at_start
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/sigterm_at_start.py
            $<TARGET_FILE:pinhole-execd>)
set_tests_properties(execd.sigterm_at_start PROPERTIES TIMEOUT 120)

# A daemon whose flock of execd.lock comes after another's clean stop
# removed that file is refused when a third took the new one (strace holds
# its flock back; skipped without strace).
ph_add_script_test(NAME execd.lock_after_a_stop
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/lock_after_a_stop.py
            $<TARGET_FILE:pinhole-execd>)
set_tests_properties(execd.lock_after_a_stop PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# A start made while a killed daemon's child, between clone and exec, still
# holds its lock, socket and port waits for them and serves (strace holds the
# child there; skipped without strace).
ph_add_script_test(NAME execd.restart_after_a_kill
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/restart_after_a_kill.py
            $<TARGET_FILE:pinhole-execd>)
set_tests_properties(execd.restart_after_a_kill PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# No process the daemon starts (fake: the namespace init and the command;
# gvisor: the runsc client, gofer and sandbox) holds its lock or a listening
# socket (skipped when the mechanism is not available).
foreach(mechanism fake gvisor)
    ph_add_script_test(NAME execd.child_descriptors_${mechanism}
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/child_descriptors.py
                $<TARGET_FILE:pinhole-execd> ${mechanism})
    set_tests_properties(execd.child_descriptors_${mechanism} PROPERTIES SKIP_RETURN_CODE 77
                         TIMEOUT 120)
endforeach()

# Disconnect kills the command inside gVisor too (skipped without runsc).
ph_add_script_test(NAME execd.disconnect_gvisor
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/disconnect_gvisor.py
            $<TARGET_FILE:pinhole-execd>)
set_tests_properties(execd.disconnect_gvisor PROPERTIES LABELS "e2e;isolation"
                     SKIP_RETURN_CODE 77 TIMEOUT 120)

# pinhole.execd, the Python workers' client, against the daemon.
ph_add_script_test(NAME execd.python_client
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/python_client.py
            $<TARGET_FILE:pinhole-execd>)
set_tests_properties(execd.python_client PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# The escape test (harness case 26), unchanged, through the service: client ->
# pinhole-execd -> gvisor. Host files (the daemon's state with both tenants'
# workspaces, canaries, sockets) stay off /tmp, as in-process.
add_executable(execd_escape ${CMAKE_CURRENT_LIST_DIR}/test_escape.c
               ${CMAKE_CURRENT_LIST_DIR}/escape_support.c ${PH_SANDBOX_TEST_SUPPORT})
target_compile_options(execd_escape PRIVATE -include pinhole/execd_as_port.h)
target_link_libraries(execd_escape PRIVATE pinhole_execd_client pinhole_sandbox_internal
                      PkgConfig::CMOCKA pinhole_flags)
target_include_directories(execd_escape PRIVATE ${PROJECT_SOURCE_DIR}/tests/support
                           ${CMAKE_CURRENT_LIST_DIR})
target_compile_definitions(execd_escape PRIVATE
    PH_SOURCE_DIR="${PROJECT_SOURCE_DIR}" PH_BINARY_DIR="${PROJECT_BINARY_DIR}")
add_dependencies(execd_escape pinhole-execd pinhole-forwarder)
if(TARGET pinhole-sandbox-rootfs)
    add_dependencies(execd_escape pinhole-sandbox-rootfs)
endif()
string(FIND "${PROJECT_BINARY_DIR}/" "/tmp/" ph_tmp_build)
if(ph_tmp_build EQUAL 0)
    set(ph_escape_tmp /var/tmp/pinhole-escape-tmp)
else()
    set(ph_escape_tmp ${PROJECT_BINARY_DIR}/escape-tmp)
endif()
# gvisor: every attack fails; fake (the negative control): the attacks that
# docs/security.md lists succeed through the service too.
foreach(mechanism gvisor fake)
    add_test(NAME execd.escape_${mechanism}
             COMMAND env PH_EXECD_TMPDIR=${ph_escape_tmp}
                     bash ${CMAKE_CURRENT_LIST_DIR}/execd_contract.sh
                     $<TARGET_FILE:pinhole-execd> $<TARGET_FILE:execd_escape> ${mechanism}
             WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
    set_tests_properties(execd.escape_${mechanism} PROPERTIES LABELS "e2e;isolation"
                         SKIP_RETURN_CODE 77 TIMEOUT 240)
endforeach()

# SIGKILL at many moments of a create and a destroy: the restart destroys
# everything the dead daemon left (gvisor: 24 moments, about 35 s; fake: the
# moments that mechanism has; docker: 19, about 25 s). Skipped where the
# mechanism is not available.
foreach(mechanism gvisor fake docker)
    ph_add_script_test(NAME execd.crash_recovery_${mechanism}
        COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/crash_recovery.py
                $<TARGET_FILE:pinhole-execd> ${mechanism})
    set_tests_properties(execd.crash_recovery_${mechanism} PROPERTIES LABELS "e2e;isolation"
                         SKIP_RETURN_CODE 77 TIMEOUT 240)
endforeach()

# Creates abandoned by their client while they run leave no sandbox.
ph_add_script_test(NAME execd.abandoned_create_gvisor
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/execd/abandoned_create.py
            $<TARGET_FILE:pinhole-execd> gvisor)
set_tests_properties(execd.abandoned_create_gvisor PROPERTIES LABELS "e2e;isolation"
                     SKIP_RETURN_CODE 77 TIMEOUT 180)
