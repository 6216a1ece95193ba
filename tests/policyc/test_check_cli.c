/*
 * test_check_cli.c - `policyc check` as a user runs it: exit codes (0 valid,
 * 1 invalid, 2 usage or I/O), --werror, several files, the summary lines and
 * each --format's shape. Runs the built binary.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "test_support.h"

/* Runs `policyc ARGS` from the source tree's tests/data/allowlists
 * directory; returns the exit status and the captured stdout in *out. */
static int run(const char *args, char **out)
{
    char *cmd = NULL;
    assert_true(asprintf(&cmd, "cd '%s' && '%s/policyc/policyc' %s 2>/dev/null",
                         ph_test_source_path("tests/data/allowlists"), PH_BINARY_DIR, args) > 0);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap + 1);
    while ((n = fread(buf + len, 1, cap - len, p)) > 0) {
        len += n;
        if (len == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    buf[len] = '\0';
    int status = pclose(p);
    free(cmd);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_valid_file_exits_0_with_summary(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check good/wildcards-and-includes.yaml", &out), 0);
    assert_string_equal(out, "good/wildcards-and-includes.yaml: ok (4 lists, 5 rules)\n");
    free(out);
}

static void test_invalid_file_exits_1_with_counts(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check bad/pc053-port-quoted.yaml", &out), 1);
    assert_non_null(strstr(out, "bad/pc053-port-quoted.yaml:6:17: error[PC053]: "));
    assert_non_null(strstr(out, "\nbad/pc053-port-quoted.yaml: 2 errors, 0 warnings\n"));
    free(out);
}

static void test_warnings_pass_unless_werror(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check bad/pc101-duplicate-rule.yaml", &out), 0);
    assert_non_null(strstr(out, "warning[PC101]"));
    assert_non_null(strstr(out, ": ok with 2 warnings (2 lists, 4 rules)\n"));
    free(out);
    assert_int_equal(run("check --werror bad/pc101-duplicate-rule.yaml", &out), 1);
    assert_non_null(strstr(out, "error[PC101]"));
    assert_non_null(strstr(out, ": 2 errors, 0 warnings\n"));
    free(out);
}

/* A range wider than 1024 ports is a warning an operator may keep; with
 * --werror it fails the check. */
static void test_wide_port_range_warns_unless_werror(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check bad/pc103-wide-port-range.yaml", &out), 0);
    assert_non_null(strstr(out, "warning[PC103]: port range '2000-3024' spans 1025 ports"));
    assert_non_null(strstr(out, ": ok with 3 warnings (1 list, 2 rules)\n"));
    free(out);
    assert_int_equal(run("check --werror bad/pc103-wide-port-range.yaml", &out), 1);
    assert_non_null(strstr(out, "error[PC103]"));
    free(out);
}

static void test_several_files_each_get_a_summary(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check -q good/minimal.yaml bad/pc014-version.yaml good/flow-style.yaml",
                         &out), 1);
    assert_null(strstr(out, ": ok"));
    assert_non_null(strstr(out, "error[PC014]"));
    free(out);
    assert_int_equal(run("check good/minimal.yaml bad/pc014-version.yaml", &out), 1);
    assert_non_null(strstr(out, "good/minimal.yaml: ok (1 list, 1 rule)\n"));
    assert_non_null(strstr(out, "bad/pc014-version.yaml: 1 error, 0 warnings\n"));
    free(out);
}

static void test_unreadable_file_exits_2_but_others_are_checked(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check no-such-file.yaml good/minimal.yaml", &out), 2);
    assert_non_null(strstr(out, "no-such-file.yaml: error[PC001]: cannot open: "));
    assert_non_null(strstr(out, "good/minimal.yaml: ok"));
    free(out);
}

static void test_dash_reads_standard_input(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check - < good/minimal.yaml", &out), 0);
    assert_string_equal(out, "<stdin>: ok (1 list, 1 rule)\n");
    free(out);
}

static void test_usage_errors_exit_2(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check", &out), 2);
    free(out);
    assert_int_equal(run("check --format=xml good/minimal.yaml", &out), 2);
    free(out);
    assert_int_equal(run("check --no-such-option good/minimal.yaml", &out), 2);
    free(out);
    assert_int_equal(run("check --help", &out), 0);
    assert_non_null(strstr(out, "Usage: policyc check"));
    assert_non_null(strstr(out, "--werror"));
    free(out);
}

static void test_machine_formats_cover_all_files(void **s)
{
    (void)s;
    char *out;
    assert_int_equal(run("check --format=json bad/pc014-version.yaml bad/pc057-port-reversed.yaml",
                         &out), 1);
    assert_non_null(strstr(out, "\"schema\": \"pinhole-policyc-check/1\""));
    assert_non_null(strstr(out, "\"errors\": 2"));
    assert_non_null(strstr(out, "\"code\": \"PC014\""));
    assert_non_null(strstr(out, "\"code\": \"PC057\""));
    free(out);
    assert_int_equal(run("check --format=sarif good/minimal.yaml", &out), 0);
    assert_non_null(strstr(out, "\"version\": \"2.1.0\""));
    assert_non_null(strstr(out, "\"results\": []"));
    free(out);
    assert_int_equal(run("check --format=github bad/pc057-port-reversed.yaml", &out), 1);
    assert_non_null(strstr(out, "::error file=bad/pc057-port-reversed.yaml,line=6,col=17,title=PC057::"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file_exits_0_with_summary),
        cmocka_unit_test(test_invalid_file_exits_1_with_counts),
        cmocka_unit_test(test_warnings_pass_unless_werror),
        cmocka_unit_test(test_wide_port_range_warns_unless_werror),
        cmocka_unit_test(test_several_files_each_get_a_summary),
        cmocka_unit_test(test_unreadable_file_exits_2_but_others_are_checked),
        cmocka_unit_test(test_dash_reads_standard_input),
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_machine_formats_cover_all_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
