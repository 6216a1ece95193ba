# The forwarding's HTTP/1.1 framing parser (proxy/src/http1.c): request and
# response heads, chunked bodies.
ph_add_fuzzer(NAME http1 SOURCES ${CMAKE_CURRENT_LIST_DIR}/http1.c
              LIBS pinhole_proxy_request)
