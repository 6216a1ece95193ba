/* test_cgroup_probe.c - v1, v2 and hybrid cgroup hierarchy detection on
 * fake trees (limits through cgroups on every layout, refused when a
 * controller the spec's limits need is missing). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cgroup_probe-int.h"
#include "test_support.h"

/* Creates root/<rel> (parents included) holding text. */
static void put(const char *root, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    assert_int_equal(ph_test_write_file(path, text, strlen(text)), 0);
}

static void v1_controllers(const char *root)
{
    /* As the kernel shows them: the root of a v1 pids tree has no pids.max. */
    put(root, "memory/cgroup.procs", "1\n");
    put(root, "memory/memory.limit_in_bytes", "9223372036854771712\n");
    put(root, "pids/cgroup.procs", "1\n");
    /* Debian mounts cpu,cpuacct together and links cpu to it. */
    put(root, "cpu,cpuacct/cgroup.procs", "1\n");
    put(root, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    char link[1024];
    snprintf(link, sizeof link, "%s/cpu", root);
    assert_int_equal(symlink("cpu,cpuacct", link), 0);
}

static int setup(void **state)
{
    *state = ph_test_mkdtemp();
    return *state == NULL;
}

static int teardown(void **state)
{
    ph_test_rmtree(*state);
    free(*state);
    return 0;
}

static void unified_v2_tree_is_v2_with_its_listed_controllers(void **state)
{
    put(*state, "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
    ph_cgroup_probe p;
    assert_int_equal(ph_cgroup_probe_root(*state, &p, NULL), PH_OK);
    assert_int_equal(p.layout, PH_CGROUP_V2);
    assert_int_equal(p.controllers, PH_CGROUP_NEEDED);
    assert_int_equal(ph_cgroup_require_limits(&p, NULL), PH_OK);
    char path[512];
    assert_int_equal(ph_cgroup_file_path(&p, *state, "pids", "pinhole-e1", "pids.max", path,
                                         sizeof path), 0);
    assert_string_equal(strstr(path, "/pinhole-e1"), "/pinhole-e1/pids.max");
    assert_null(strstr(path, "/pids/"));
}

static void v2_without_memory_controller_refuses_limits(void **state)
{
    /* "cpuset" and "memoryx" must not pass for "cpu" and "memory". */
    put(*state, "cgroup.controllers", "cpuset io memoryx pids\n");
    ph_cgroup_probe p;
    assert_int_equal(ph_cgroup_probe_root(*state, &p, NULL), PH_OK);
    assert_int_equal(p.layout, PH_CGROUP_V2);
    assert_int_equal(p.controllers, PH_CGROUP_PIDS);
    ph_diag d = {0};
    assert_int_equal(ph_cgroup_require_limits(&p, &d), PH_E_UNSUPPORTED);
    assert_non_null(strstr(d.message, "v2"));
    assert_non_null(strstr(d.message, "memory"));
}

static void per_controller_trees_are_v1(void **state)
{
    v1_controllers(*state);
    ph_cgroup_probe p;
    assert_int_equal(ph_cgroup_probe_root(*state, &p, NULL), PH_OK);
    assert_int_equal(p.layout, PH_CGROUP_V1);
    assert_int_equal(p.controllers, PH_CGROUP_NEEDED);
    assert_int_equal(ph_cgroup_require_limits(&p, NULL), PH_OK);
    char path[512];
    assert_int_equal(ph_cgroup_file_path(&p, *state, "memory", "pinhole-e1",
                                         "memory.limit_in_bytes", path, sizeof path), 0);
    assert_non_null(strstr(path, "/memory/pinhole-e1/memory.limit_in_bytes"));
}

static void v1_trees_plus_empty_unified_tree_are_hybrid(void **state)
{
    v1_controllers(*state);
    put(*state, "unified/cgroup.controllers", "");
    ph_cgroup_probe p;
    assert_int_equal(ph_cgroup_probe_root(*state, &p, NULL), PH_OK);
    assert_int_equal(p.layout, PH_CGROUP_HYBRID);
    assert_string_equal(ph_cgroup_layout_name(p.layout), "hybrid");
    assert_int_equal(ph_cgroup_require_limits(&p, NULL), PH_OK);
    char path[512];
    assert_int_equal(ph_cgroup_file_path(&p, *state, "cpu", "pinhole-e1", "cpu.cfs_quota_us",
                                         path, sizeof path), 0);
    assert_non_null(strstr(path, "/cpu/pinhole-e1/cpu.cfs_quota_us"));
}

static void v1_with_an_unmounted_pids_directory_refuses_limits(void **state)
{
    v1_controllers(*state);
    char pids[1024];
    snprintf(pids, sizeof pids, "%s/pids/cgroup.procs", (char *)*state);
    assert_int_equal(unlink(pids), 0); /* the mount point stays, empty */
    ph_cgroup_probe p;
    assert_int_equal(ph_cgroup_probe_root(*state, &p, NULL), PH_OK);
    assert_int_equal(p.layout, PH_CGROUP_V1);
    assert_int_equal(p.controllers, PH_CGROUP_MEMORY | PH_CGROUP_CPU);
    ph_diag d = {0};
    assert_int_equal(ph_cgroup_require_limits(&p, &d), PH_E_UNSUPPORTED);
    assert_non_null(strstr(d.message, "pids"));
}

static void empty_root_is_none_and_refuses_limits(void **state)
{
    ph_cgroup_probe p;
    assert_int_equal(ph_cgroup_probe_root(*state, &p, NULL), PH_OK);
    assert_int_equal(p.layout, PH_CGROUP_NONE);
    assert_int_equal(ph_cgroup_require_limits(&p, NULL), PH_E_UNSUPPORTED);
    char path[64];
    assert_int_equal(ph_cgroup_file_path(&p, *state, "pids", "g", "pids.max", path, sizeof path),
                     -1);
}

static void missing_root_is_an_error(void **state)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/absent", (char *)*state);
    ph_cgroup_probe p = {.layout = PH_CGROUP_V2, .controllers = PH_CGROUP_NEEDED};
    ph_diag d = {0};
    assert_int_equal(ph_cgroup_probe_root(path, &p, &d), PH_E_IO);
    assert_int_equal(p.layout, PH_CGROUP_NONE);
    assert_int_equal(p.controllers, 0);
}

static void path_that_does_not_fit_is_refused(void **state)
{
    (void)state;
    ph_cgroup_probe p = {.layout = PH_CGROUP_V1, .controllers = PH_CGROUP_NEEDED};
    char small[16];
    assert_int_equal(ph_cgroup_file_path(&p, "/sys/fs/cgroup", "memory", "pinhole-long-id",
                                         "memory.max", small, sizeof small), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(unified_v2_tree_is_v2_with_its_listed_controllers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(v2_without_memory_controller_refuses_limits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(per_controller_trees_are_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(v1_trees_plus_empty_unified_tree_are_hybrid, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(v1_with_an_unmounted_pids_directory_refuses_limits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(empty_root_is_none_and_refuses_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_root_is_an_error, setup, teardown),
        cmocka_unit_test(path_that_does_not_fit_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
