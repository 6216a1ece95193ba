# The allowlist front end: YAML parser, validator, include resolution (policyc/src/load.h).
ph_add_fuzzer(NAME policy SOURCES ${CMAKE_CURRENT_LIST_DIR}/policy.c LIBS policyc_core)
