# Grant tokens, Proxy-Authorization values and key files (guard/src/grant*.c).
ph_add_fuzzer(NAME grant SOURCES ${CMAKE_CURRENT_LIST_DIR}/grant.c LIBS pinhole_internal)
