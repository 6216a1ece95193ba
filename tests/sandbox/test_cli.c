/* test_cli.c - pinhole-sandbox end to end: the startup refusal, create /
 * exec / files / read / destroy across processes, run, exit codes, JSON, and
 * no host path in anything it prints. */
#include "sandbox_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char g_state[512];

/* Runs `pinhole-sandbox <args>` through sh with the state dir set; returns
 * its exit status and its stdout+stderr in out. */
static int cli(char *out, size_t cap, const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "PINHOLE_SANDBOX_STATE_DIR='%s' %s/sandbox/pinhole-sandbox %s 2>&1 </dev/null",
             g_state, PH_BINARY_DIR, args);
    return sbx_shell(cmd, out, cap);
}

static int setup(void **state)
{
    (void)state;
    char *d = ph_test_mkdtemp();
    snprintf(g_state, sizeof g_state, "%s", d);
    free(d);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_test_rmtree(g_state);
    return 0;
}

static void test_production_refuses_fake_and_docker(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(cli(out, sizeof out, "--mechanism fake run -- true"), 125);
    assert_non_null(strstr(out, "mechanism_refused_in_production"));
    assert_int_equal(cli(out, sizeof out, "--mode production --mechanism docker create"), 3);
    assert_non_null(strstr(out, "mechanism_refused_in_production"));
    assert_int_equal(cli(out, sizeof out, "--mechanism nope create"), 2);
}

static void test_run_and_exit_codes(void **state)
{
    (void)state;
    char out[4096];
    const char *dev = "--mechanism fake --mode development";
    char args[512];
    snprintf(args, sizeof args, "%s run -- sh -c 'echo out; exit 7'", dev);
    assert_int_equal(cli(out, sizeof out, args), 7);
    assert_non_null(strstr(out, "out\n"));
    snprintf(args, sizeof args, "%s run --wall-clock-ms 200 -- sleep 5", dev);
    assert_int_equal(cli(out, sizeof out, args), 124);
    assert_non_null(strstr(out, "wall_clock"));
    snprintf(args, sizeof args, "%s run -- sh -c 'kill -KILL $$'", dev);
    assert_int_equal(cli(out, sizeof out, args), 128 + 9);
    snprintf(args, sizeof args, "%s run sh", dev);
    assert_int_equal(cli(out, sizeof out, args), 125);
}

static void test_create_exec_files_read_destroy(void **state)
{
    (void)state;
    char out[8192], args[1024], id[64];
    const char *dev = "--mechanism fake --mode development";
    snprintf(args, sizeof args, "%s create --tenant t --lease l", dev);
    assert_int_equal(cli(out, sizeof out, args), 0);
    assert_int_equal(strncmp(out, "env-", 4), 0);
    snprintf(id, sizeof id, "%.20s", out);
    snprintf(args, sizeof args, "%s --json exec %s -- sh -c 'mkdir d && echo hi > d/f && pwd'",
             dev, id);
    assert_int_equal(cli(out, sizeof out, args), 0);
    assert_non_null(strstr(out, "\"text\": \"/workspace\\n\""));
    assert_non_null(strstr(out, "\"path\": \"d/f\""));
    assert_null(strstr(out, g_state));
    snprintf(args, sizeof args, "%s files %s d", dev, id);
    assert_int_equal(cli(out, sizeof out, args), 0);
    assert_non_null(strstr(out, " f\n"));
    snprintf(args, sizeof args, "%s read %s d/f", dev, id);
    assert_int_equal(cli(out, sizeof out, args), 0);
    assert_string_equal(out, "hi\n");
    snprintf(args, sizeof args, "%s read %s ../../etc/passwd", dev, id);
    assert_int_equal(cli(out, sizeof out, args), 3);
    assert_null(strstr(out, g_state));
    snprintf(args, sizeof args, "%s destroy %s", dev, id);
    assert_int_equal(cli(out, sizeof out, args), 0);
    snprintf(args, sizeof args, "%s files %s", dev, id);
    assert_int_equal(cli(out, sizeof out, args), 1);
    assert_int_equal(cli(out, sizeof out, "--help"), 0);
    assert_non_null(strstr(out, "Exit status"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_production_refuses_fake_and_docker),
        cmocka_unit_test(test_run_and_exit_codes),
        cmocka_unit_test(test_create_exec_files_read_destroy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
