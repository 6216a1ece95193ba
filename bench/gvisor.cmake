# bench_gvisor: create+execute(true)+destroy medians on gvisor and fake, warm
# execute on gvisor (target <= 60 ms median) against a bare runsc exec, and
# 100 MB through pinhole-forwarder inside gVisor against the host reading the
# same unix socket. Needs root and runsc; exits 77 (SKIP) without them.
if(TARGET pinhole_sandbox_internal)
    add_executable(bench_gvisor ${CMAKE_CURRENT_LIST_DIR}/gvisor.c)
    target_link_libraries(bench_gvisor PRIVATE pinhole_sandbox_internal Threads::Threads pinhole_flags)
    add_dependencies(bench_gvisor pinhole-forwarder)
endif()
