# The strict URL / CONNECT authority parser (guard/src/url_parse.c).
ph_add_fuzzer(NAME url SOURCES ${CMAKE_CURRENT_LIST_DIR}/url.c LIBS pinhole_internal)
