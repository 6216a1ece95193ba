# A CONNECT tunnel's TLS ClientHello reader (proxy/src/tls_hello.c); its
# seeds are real clients' hellos (scripts/capture_client_hellos.py).
ph_add_fuzzer(NAME tls_hello SOURCES ${CMAKE_CURRENT_LIST_DIR}/tls_hello.c
              ${PROJECT_SOURCE_DIR}/tests/support/tls_records.c
              LIBS pinhole_proxy_request)
# tls_records.c: the records re-split as the reader's unit test does.
foreach(t fuzz_tls_hello replay_tls_hello)
    if(TARGET ${t})
        target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
    endif()
endforeach()
