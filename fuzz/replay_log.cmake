# policyc replay's reader of the proxy's connection log (policyc/src/replay_log.c).
ph_add_fuzzer(NAME replay_log SOURCES ${CMAKE_CURRENT_LIST_DIR}/replay_log.c LIBS policyc_core)
