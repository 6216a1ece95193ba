# bench_guard_check: URL decision without DNS (>= 5 M/s, one thread; ph_decide_url), with the
# parse and the lookup alone as baselines, and grant verification.
add_executable(bench_guard_check ${CMAKE_CURRENT_LIST_DIR}/guard_check.c)
target_link_libraries(bench_guard_check PRIVATE policyc_core pinhole_flags)
