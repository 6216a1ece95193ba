/* gate_sandbox_no_host_path.c - gate sandbox.no_host_path (ADR-0029 decision
 * 9): no host path crosses the port in either direction. The state directory
 * (where workspaces live on the host) must appear in no result, no output a
 * command can produce about its own location, no environment variable, and
 * no diagnostic. */
#include "sandbox_test_util.h"

#include <string.h>

#include "sandbox-int.h"

static void test_no_host_path_anywhere(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec spec = sbx_spec(&f);
    ph_environment *env = sbx_create(&f, &spec);
    const char *id = ph_environment_id(env);
    assert_null(strstr(id, f.state_dir));
    assert_int_equal(strncmp(id, "env-", 4), 0);

    const char *argv[] = {"sh", "-c",
                          "mkdir -p d; cd d; echo x > f; pwd; pwd -P; readlink /proc/self/cwd; "
                          "env; cat /proc/self/mountinfo | grep -c ' /workspace ' >/dev/null",
                          NULL};
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = NULL;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, NULL), PH_OK);
    assert_int_equal(r->exit_code, 0);
    assert_true(sbx_contains(r->out.data, r->out.len, "/workspace/d\n/workspace/d\n/workspace/d\n"));
    assert_false(sbx_contains(r->out.data, r->out.len, f.state_dir));
    assert_false(sbx_contains(r->err.data, r->err.len, f.state_dir));
    assert_int_equal(r->files_changed_count, 1);
    assert_string_equal(r->files_changed[0].path, "d/f");
    ph_execution_result_free(&r);

    /* Errors talk in workspace terms only. */
    ph_diag diag = {0};
    const char *t[] = {"true", NULL};
    const char *cwds[] = {"missing", "../x", "/etc"};
    for (size_t i = 0; i < 3; i++) {
        cmd.argv = t;
        cmd.cwd = cwds[i];
        assert_int_not_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_OK);
        assert_null(strstr(diag.message, f.state_dir));
    }
    ph_workspace *ws = NULL;
    assert_int_equal(ph_environment_workspace(env, &ws, &diag), PH_OK);
    uint8_t *data;
    size_t len;
    assert_int_not_equal(ph_workspace_read(ws, "nope", 10, &data, &len, &diag), PH_OK);
    assert_null(strstr(diag.message, f.state_dir));
    ph_workspace_close(&ws);
    ph_environment_destroy(&env);

    /* Reattaching by id: the id names the environment, never a path. */
    assert_int_not_equal(ph_environment_reattach(f.svc, "../../etc", &env, &diag), PH_OK);
    assert_null(env);
    sbx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_host_path_anywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
