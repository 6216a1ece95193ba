# bench_guard_addr: denylist classification (>= 20 M/s) and URL parse rate.
add_executable(bench_guard_addr ${CMAKE_CURRENT_LIST_DIR}/guard_addr.c)
target_link_libraries(bench_guard_addr PRIVATE pinhole_internal pinhole_flags)
