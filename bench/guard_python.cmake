# bench_guard_python: Guard.check_url from Python (ctypes over libpinhole),
# checks/s on one thread, beside the same ph_decide_url loop in C, on the
# same guard, table and URLs in the same process (the C loop is a small
# shared library the script calls once per round).
add_library(bench_guard_python_loop SHARED ${CMAKE_CURRENT_LIST_DIR}/guard_python_loop.c)
target_link_libraries(bench_guard_python_loop PRIVATE pinhole_shared pinhole_flags)
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/bench_guard_python
    CONTENT "#!/bin/sh\nexec /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/guard_python.py --lib $<TARGET_FILE:pinhole_shared> --loop $<TARGET_FILE:bench_guard_python_loop> --policyc $<TARGET_FILE:policyc> \"$@\"\n"
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                     WORLD_READ WORLD_EXECUTE)
