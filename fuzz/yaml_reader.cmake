# The strict YAML reader of allowlists and the proxy config (guard/yaml, pinhole/yaml_reader.h).
ph_add_fuzzer(NAME yaml_reader SOURCES ${CMAKE_CURRENT_LIST_DIR}/yaml_reader.c LIBS pinhole_yaml)
