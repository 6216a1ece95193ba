# The PROXY protocol v2 header a load balancer sends first
# (proxy/src/proxy_protocol.c); seeds: HAProxy's send-proxy-v2 headers and
# the refusals of tests/proxy/test_proxy_protocol.c.
ph_add_fuzzer(NAME proxy_protocol SOURCES ${CMAKE_CURRENT_LIST_DIR}/proxy_protocol.c
              LIBS pinhole_proxy_request)
