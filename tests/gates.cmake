# The thirteen `sandbox` gates of ADR-0029 (docs/gates.md), as ctest labels:
# `ctest -L gate_sandbox_<gate>` runs every test that proves a gate. Tests
# named gate_sandbox_* prove one gate alone; the others are shared evidence
# owned by the module that implements the rule.
#
# CMake 3.25 can set properties only on tests of the current directory, so
# this file records the map and each tests/<module>/CMakeLists.txt ends with
# ph_apply_gate_labels().
set_property(GLOBAL PROPERTY PH_GATE_MAP "")
function(ph_gate gate)
    foreach(test ${ARGN})
        set_property(GLOBAL APPEND PROPERTY PH_GATE_MAP "${test}=gate_sandbox_${gate}")
    endforeach()
endfunction()

function(ph_apply_gate_labels)
    get_property(map GLOBAL PROPERTY PH_GATE_MAP)
    foreach(entry ${map})
        string(REPLACE "=" ";" pair "${entry}")
        list(GET pair 0 test)
        list(GET pair 1 label)
        if(TEST ${test})
            set_property(TEST ${test} APPEND PROPERTY LABELS ${label})
        endif()
    endforeach()
endfunction()

ph_gate(startup_refusal sandbox.gate_sandbox_startup_refusal sandbox.test_cli)
ph_gate(path_containment sandbox.gate_sandbox_path_containment sandbox.contract.fake
        fuzz_replay_workspace_path)
ph_gate(env_tiers sandbox.gate_sandbox_env_tiers sandbox.contract.fake)
ph_gate(grammar_refusals policyc.test_check_corpus policyc.test_check_compile_agree
        policyc.test_parse_load)
ph_gate(private_range_every_address guard.test_addr_classify guard.test_addr_embedded
        guard.test_resolve_guard proxy.e2e_decisions proxy.e2e_default_build)
ph_gate(pinned_dial guard.e2e_dial guard.test_guard_worker_example proxy.e2e_decisions
        proxy.e2e_pinned_dial)
ph_gate(two_yeses guard.test_grant proxy.e2e_decisions sandbox.e2e_gvisor_proxy
        sandbox.test_escape)
ph_gate(guard_proxy_parity proxy.e2e_parity)
ph_gate(timeout_by_minimum sandbox.gate_sandbox_timeout_minimum sandbox.contract.fake)
ph_gate(no_host_path sandbox.gate_sandbox_no_host_path sandbox.test_cli)
ph_gate(files_changed_snapshot sandbox.gate_sandbox_files_changed_snapshot sandbox.contract.fake
        sandbox.test_files_changed_complete)
ph_gate(artifact_key_and_filename artifacts.gate_sandbox_artifact_key_and_filename
        artifacts.test_artifact_key artifacts.test_filename_sanitize)
ph_gate(escape_test sandbox.test_escape sandbox.test_escape_limits sandbox.test_escape.docker
        sandbox.test_escape_limits.docker)
