# The proxy's one HTTP/1.1 parser (proxy/src/http1.c): request heads (CONNECT and
# forwarded), response heads, chunked bodies.
ph_add_fuzzer(NAME http1 SOURCES ${CMAKE_CURRENT_LIST_DIR}/http1.c
              LIBS pinhole_proxy_request)
