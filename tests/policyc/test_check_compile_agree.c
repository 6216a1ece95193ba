/*
 * test_check_compile_agree.c - `policyc check` and `policyc compile` agree on
 * every allowlist of the corpus (tests/data/allowlists/bad and good): check
 * exits 0 exactly when compile writes a table, 1 exactly when it refuses and
 * writes nothing, and neither ever exits otherwise (a crash, a signal, an
 * internal error). Runs the built binary, as CI does.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

/* Runs `policyc SUBCOMMAND NAME [-o TABLE]` in dir, output discarded; the
 * exit status, or -1 on a signal. */
static int run_quiet(const char *dir, const char *name, const char *table)
{
    char *cmd = NULL;
    if (table)
        assert_true(asprintf(&cmd, "cd '%s' && '%s/policyc/policyc' compile '%s' -o '%s' >/dev/null 2>&1",
                             dir, PH_BINARY_DIR, name, table) > 0);
    else
        assert_true(asprintf(&cmd, "cd '%s' && '%s/policyc/policyc' check -q '%s' >/dev/null 2>&1",
                             dir, PH_BINARY_DIR, name) > 0);
    int status = system(cmd);
    free(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Checks every *.yaml in dir; returns how many disagreed. *accepted counts
 * the files both commands accepted. */
static int check_dir(const char *subdir, size_t *files, size_t *accepted)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ph_test_source_path(subdir));
    char table[] = "/tmp/policyc-agree-XXXXXX";
    int fd = mkstemp(table);
    assert_true(fd >= 0);
    close(fd);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int failures = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".yaml") != 0)
            continue;
        (*files)++;
        unlink(table);
        int check = run_quiet(dir, e->d_name, NULL);
        int compile = run_quiet(dir, e->d_name, table);
        struct stat sb;
        bool written = stat(table, &sb) == 0;
        if ((check != 0 && check != 1) || check != compile || written != (compile == 0)) {
            fprintf(stderr, "%s/%s: check exit %d, compile exit %d, table %s\n", subdir,
                    e->d_name, check, compile, written ? "written" : "absent");
            failures++;
        }
        if (check == 0 && compile == 0)
            (*accepted)++;
    }
    closedir(d);
    unlink(table);
    return failures;
}

static void test_bad_corpus_check_and_compile_both_refuse(void **state)
{
    (void)state;
    size_t files = 0, accepted = 0;
    assert_int_equal(check_dir("tests/data/allowlists/bad", &files, &accepted), 0);
    assert_true(files >= 40);
    /* Only the warning files (PC1xx) of the bad corpus are valid policies. */
    assert_true(accepted < 10);
}

static void test_good_corpus_check_and_compile_both_accept(void **state)
{
    (void)state;
    size_t files = 0, accepted = 0;
    assert_int_equal(check_dir("tests/data/allowlists/good", &files, &accepted), 0);
    assert_true(files >= 4);
    assert_int_equal(accepted, files);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_corpus_check_and_compile_both_refuse),
        cmocka_unit_test(test_good_corpus_check_and_compile_both_accept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
