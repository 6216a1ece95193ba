# The strict URL / CONNECT authority parser (guard/src/url_parse.c); linked
# with libcurl, whose URL API must extract the same host:port from every
# URL the parser accepts.
ph_add_fuzzer(NAME url SOURCES ${CMAKE_CURRENT_LIST_DIR}/url.c LIBS pinhole_internal PkgConfig::CURL)
