/* gate_sandbox_files_changed_snapshot.c - gate sandbox.files_changed_from_snapshot
 * (ADR-0029 decision 10): the service computes files_changed against a
 * snapshot taken before the command, without following symlinks, catching a
 * forged mtime (ctime, inode), and bounded (truncated rather than stalled). */
#include "sandbox_test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox-int.h"

static ph_execution_result *diff(ph_snapshot *a, ph_snapshot *b)
{
    ph_execution_result *r = calloc(1, sizeof *r);
    assert_int_equal(ph_snapshot_diff(a, b, r, NULL), PH_OK);
    return r;
}

static void test_forged_mtime_and_replaced_inode(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    int root = open(dir, O_RDONLY | O_DIRECTORY);
    int fd = openat(root, "forged", O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "aaaa", 4), 4);
    close(fd);
    fd = openat(root, "swapped", O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "bbbb", 4), 4);
    close(fd);
    struct stat before_st;
    assert_int_equal(fstatat(root, "forged", &before_st, 0), 0);
    ph_snapshot *before = NULL, *after = NULL;
    assert_int_equal(ph_snapshot_take(root, 1000, &before, NULL), PH_OK);
    usleep(20 * 1000);
    /* Same size, mtime restored: only ctime tells. */
    fd = openat(root, "forged", O_WRONLY);
    assert_int_equal(write(fd, "zzzz", 4), 4);
    close(fd);
    struct timespec times[2] = {before_st.st_atim, before_st.st_mtim};
    assert_int_equal(utimensat(root, "forged", times, 0), 0);
    /* Replaced by rename with identical size and times: the inode tells. */
    fd = openat(root, "swapped.new", O_WRONLY | O_CREAT, 0644);
    assert_int_equal(write(fd, "cccc", 4), 4);
    close(fd);
    assert_int_equal(renameat(root, "swapped.new", root, "swapped"), 0);
    assert_int_equal(ph_snapshot_take(root, 1000, &after, NULL), PH_OK);
    ph_execution_result *r = diff(before, after);
    assert_int_equal(r->files_changed_count, 2);
    assert_string_equal(r->files_changed[0].path, "forged");
    assert_int_equal(r->files_changed[0].kind, PH_CHANGE_MODIFIED);
    assert_string_equal(r->files_changed[1].path, "swapped");
    assert_int_equal(r->files_changed[1].kind, PH_CHANGE_MODIFIED);
    ph_execution_result_free(&r);
    ph_snapshot_free(&before);
    ph_snapshot_free(&after);
    close(root);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_symlinks_are_not_followed(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    int root = open(dir, O_RDONLY | O_DIRECTORY);
    assert_int_equal(symlinkat("/", root, "to-root"), 0);
    assert_int_equal(symlinkat("/usr", root, "to-usr"), 0);
    ph_snapshot *s = NULL;
    assert_int_equal(ph_snapshot_take(root, 1000, &s, NULL), PH_OK);
    assert_int_equal(ph_snapshot_count(s), 2); /* the links, not what they point at */
    assert_false(ph_snapshot_truncated(s));
    ph_snapshot_free(&s);
    close(root);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_bounded_walk_truncates(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    int root = open(dir, O_RDONLY | O_DIRECTORY);
    for (int i = 0; i < 50; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%02d", i);
        close(openat(root, name, O_WRONLY | O_CREAT, 0644));
    }
    ph_snapshot *a = NULL, *b = NULL;
    assert_int_equal(ph_snapshot_take(root, 10, &a, NULL), PH_OK);
    assert_true(ph_snapshot_truncated(a));
    assert_int_equal(ph_snapshot_count(a), 10);
    assert_int_equal(ph_snapshot_take(root, 10, &b, NULL), PH_OK);
    ph_execution_result *r = diff(a, b);
    assert_true(r->files_changed_truncated);
    ph_execution_result_free(&r);
    ph_snapshot_free(&a);
    ph_snapshot_free(&b);
    close(root);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_command_cannot_hide_a_change(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec spec = sbx_spec(&f);
    ph_environment *env = sbx_create(&f, &spec);
    ph_workspace *ws = NULL;
    assert_int_equal(ph_environment_workspace(env, &ws, NULL), PH_OK);
    assert_int_equal(ph_workspace_write(ws, "keep", "12345", 5, 0644, NULL), PH_OK);
    const char *argv[] = {"sh", "-c",
                          "m=$(stat -c %y keep); printf 54321 > keep; touch -d \"$m\" keep; "
                          "echo 'files_changed: []'",
                          NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->files_changed_count, 1);
    assert_string_equal(r->files_changed[0].path, "keep");
    assert_int_equal(r->files_changed[0].kind, PH_CHANGE_MODIFIED);
    ph_execution_result_free(&r);
    ph_workspace_close(&ws);
    ph_environment_destroy(&env);
    sbx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forged_mtime_and_replaced_inode),
        cmocka_unit_test(test_symlinks_are_not_followed),
        cmocka_unit_test(test_bounded_walk_truncates),
        cmocka_unit_test(test_command_cannot_hide_a_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
