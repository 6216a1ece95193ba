# The proxy's JSON log lines, escaped without a jansson tree
# (proxy/src/log_json.c): jansson parses every line back to the same fields.
ph_add_fuzzer(NAME log_json SOURCES ${CMAKE_CURRENT_LIST_DIR}/log_json.c
              LIBS pinhole_proxy_log)
