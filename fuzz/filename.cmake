ph_add_fuzzer(NAME filename SOURCES ${CMAKE_CURRENT_LIST_DIR}/filename.c LIBS pinhole_artifacts)
