ph_add_fuzzer(NAME workspace_path SOURCES ${CMAKE_CURRENT_LIST_DIR}/workspace_path.c
              LIBS pinhole_sandbox_internal)
