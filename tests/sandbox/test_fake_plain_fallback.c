/* test_fake_plain_fallback.c - the fake mechanism where namespaces cannot be
 * made: a process in its own session, PWD=/workspace/..., the process group
 * and the session killed at the deadline, and the same results otherwise. */
#include "sandbox_test_util.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sandbox-int.h"

static void test_plain_mode_semantics(void **state)
{
    (void)state;
    ph_fake_force_plain = true;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec spec = sbx_spec(&f);
    spec.limits.wall_clock_ms = 400;
    ph_environment *env = sbx_create(&f, &spec);
    ph_workspace *ws = NULL;
    assert_int_equal(ph_environment_workspace(env, &ws, NULL), PH_OK);
    assert_int_equal(ph_workspace_write(ws, "sub/x", "1", 1, 0644, NULL), PH_OK);

    /* printenv directly: a shell would replace a PWD that is not its
     * physical cwd (which, in this fallback, is the host directory). */
    const char *penv[] = {"printenv", "PWD", "HOME", NULL};
    ph_execution_command cmd = {.argv = penv, .cwd = "sub", .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = NULL;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, NULL), PH_OK);
    assert_string_equal((char *)r->out.data, "/workspace/sub\n/workspace\n");
    ph_execution_result_free(&r);
    const char *argv[] = {"sh", "-c", "cat x; echo y > y; exit 3", NULL};
    cmd.argv = argv;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, NULL), PH_OK);
    assert_int_equal(r->exit_code, 3);
    assert_string_equal((char *)r->out.data, "1");
    assert_int_equal(r->files_changed_count, 1);
    assert_string_equal(r->files_changed[0].path, "sub/y");
    ph_execution_result_free(&r);

    /* The deadline kills the group and the session (not a setsid escapee:
     * that is the documented limit of this fallback). */
    const char *tree[] = {"sh", "-c", "sleep 83.25 & sleep 83.5", NULL};
    cmd.argv = tree;
    cmd.cwd = NULL;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, NULL), PH_OK);
    assert_true(r->timed_out);
    assert_int_equal(r->timeout_bound, PH_TIMEOUT_BOUND_WALL_CLOCK);
    ph_execution_result_free(&r);
    usleep(100 * 1000);
    assert_false(sbx_process_with_arg_exists("83.25"));
    assert_false(sbx_process_with_arg_exists("83.5"));
    ph_workspace_close(&ws);
    ph_environment_destroy(&env);
    sbx_close(&f);
    ph_fake_force_plain = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_mode_semantics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
