# bench_sandbox: execute overhead of a trivial command on the fake mechanism
# (median, against a bare posix_spawn of the same program), and files_changed
# (two snapshots and the diff) over a 10,000-file workspace (target <= 50 ms).
add_executable(bench_sandbox ${CMAKE_CURRENT_LIST_DIR}/sandbox.c)
target_link_libraries(bench_sandbox PRIVATE pinhole_sandbox_internal pinhole_flags)
