# bench_table: compile 1,000,000 rules (time, peak RSS, table size), open +
# verify that table, and lookups/s over a 100,000-rule table, each beside its
# baseline or floor (libyaml alone, a plain read, a bsearch) in the same run.
add_executable(bench_table ${CMAKE_CURRENT_LIST_DIR}/table.c)
target_link_libraries(bench_table PRIVATE policyc_core PkgConfig::YAML pinhole_flags)
