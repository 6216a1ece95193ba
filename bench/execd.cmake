# bench_execd: the daemon against the in-process library (docs/execd.md).
if(TARGET pinhole-execd AND TARGET pinhole_execd_client)
    add_executable(bench_execd ${CMAKE_CURRENT_LIST_DIR}/execd.c)
    target_link_libraries(bench_execd PRIVATE pinhole_execd_client pinhole_sandbox Threads::Threads
                          pinhole_flags)
    target_compile_definitions(bench_execd PRIVATE PH_EXECD_BINARY="$<TARGET_FILE:pinhole-execd>")
    add_dependencies(bench_execd pinhole-execd)
endif()
