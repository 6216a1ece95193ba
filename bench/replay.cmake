# bench_replay: policyc replay's lines/s on 1M proxy log lines (>= 1 M/s, one thread), beside the
# guard's decision rate and jansson's parse alone.
add_executable(bench_replay ${CMAKE_CURRENT_LIST_DIR}/replay.c)
target_link_libraries(bench_replay PRIVATE policyc_core pinhole_flags)
