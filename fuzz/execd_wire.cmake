if(TARGET pinhole_execd_wire)
    ph_add_fuzzer(NAME execd_wire SOURCES ${CMAKE_CURRENT_LIST_DIR}/execd_wire.c
                  LIBS pinhole_execd_wire)
endif()
