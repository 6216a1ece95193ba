# Location resolution for redirects (guard/src/redirect.c): a relative
# reference never leaves the base's origin; linked with libcurl, whose URL
# API must resolve every accepted result to the same scheme, host and port.
ph_add_fuzzer(NAME redirect SOURCES ${CMAKE_CURRENT_LIST_DIR}/redirect.c LIBS pinhole_internal PkgConfig::CURL)
