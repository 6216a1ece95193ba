# policyc fleet-status against small HTTP servers standing in for the
# proxies' admin listeners (tests/policyc/fleet_status.py); the real fleet
# (HAProxy and three pinhole-proxy) is tests/proxy/e2e_fleet.sh.
if(TARGET policyc)
    ph_add_script_test(NAME policyc.fleet_status COMMAND /usr/bin/python3
        ${CMAKE_CURRENT_SOURCE_DIR}/fleet_status.py $<TARGET_FILE:policyc> LABELS e2e)
    set_tests_properties(policyc.fleet_status PROPERTIES TIMEOUT 60)
endif()
