# bench_gvisor_proxy: a 100 MB download through pinhole-forwarder inside
# gVisor and pinhole-proxy, against the proxy alone, from one local upstream
# in the same run (bench/gvisor_proxy.sh). A generated wrapper so that
# scripts/bench.sh runs it like every bench_* executable; it exits 77 (SKIP)
# without root, runsc, busybox-static or dnsmasq.
if(TARGET pinhole-proxy-testloopback AND TARGET proxy_e2e_peer AND TARGET pinhole-sandbox
   AND TARGET pinhole-forwarder)
    file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/bench_gvisor_proxy
        CONTENT "#!/bin/sh\n# Generated from bench/gvisor_proxy.cmake; arguments: [MEGABYTES [REPEAT]] or --help.\n\
PH_SOURCE_DIR='${PROJECT_SOURCE_DIR}' exec bash '${CMAKE_CURRENT_LIST_DIR}/gvisor_proxy.sh' \
'$<TARGET_FILE:pinhole-proxy-testloopback>' '$<TARGET_FILE:policyc>' '$<TARGET_FILE:pinhole-guard>' \
'$<TARGET_FILE:proxy_e2e_peer>' '$<TARGET_FILE:pinhole-sandbox>' \
'${PROJECT_SOURCE_DIR}/scripts/build-rootfs.sh' \"$@\"\n"
        FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                         WORLD_READ WORLD_EXECUTE)
    add_custom_target(bench_gvisor_proxy_deps ALL DEPENDS pinhole-proxy-testloopback proxy_e2e_peer
                      policyc pinhole-guard pinhole-sandbox pinhole-forwarder)
endif()
