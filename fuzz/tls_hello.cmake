# A CONNECT tunnel's TLS ClientHello reader (proxy/src/tls_hello.c); its
# seeds are real clients' hellos (scripts/capture_client_hellos.py).
ph_add_fuzzer(NAME tls_hello SOURCES ${CMAKE_CURRENT_LIST_DIR}/tls_hello.c
              LIBS pinhole_proxy_request)
