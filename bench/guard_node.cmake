# bench_guard_node: guardedFetch beside undici's plain fetch on loopback in
# one run (per request on a kept-alive connection, per new connection):
# the test-loopback addon (tests/node) and dnsmasq, so only with tests built.
if(TARGET pinhole_node_testloopback)
    get_property(PH_BENCH_NODE_MODULES GLOBAL PROPERTY PH_NODE_MODULES)
    file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/bench_guard_node
        CONTENT "#!/bin/sh\nPINHOLE_NODE_ADDON=$<TARGET_FILE:pinhole_node_testloopback> NODE_PATH=${PH_BENCH_NODE_MODULES} PH_POLICYC=$<TARGET_FILE:policyc> exec ${PH_NODE} ${CMAKE_CURRENT_LIST_DIR}/guard_node.js \"$@\"\n"
        FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                         WORLD_READ WORLD_EXECUTE)
endif()
