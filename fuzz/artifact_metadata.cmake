ph_add_fuzzer(NAME artifact_metadata SOURCES ${CMAKE_CURRENT_LIST_DIR}/artifact_metadata.c
              LIBS pinhole_artifacts)
