# bench_artifacts: put and get throughput of one large artifact (1 GiB by
# default; --size or PH_BENCH_ARTIFACT_BYTES) against cp of the same file.
add_executable(bench_artifacts ${CMAKE_CURRENT_LIST_DIR}/artifacts.c)
target_link_libraries(bench_artifacts PRIVATE pinhole_artifacts pinhole_flags)
target_include_directories(bench_artifacts PRIVATE ${PROJECT_SOURCE_DIR}/artifacts/src)
