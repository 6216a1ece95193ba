# The proxy's CONNECT request-head parser (proxy/src/request_parse.c).
ph_add_fuzzer(NAME connect_request SOURCES ${CMAKE_CURRENT_LIST_DIR}/connect_request.c
              LIBS pinhole_proxy_request)
