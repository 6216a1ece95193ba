# The table reader: open + full verification + lookups (guard/src/table_*.c).
ph_add_fuzzer(NAME table SOURCES ${CMAKE_CURRENT_LIST_DIR}/table.c LIBS pinhole_internal)
