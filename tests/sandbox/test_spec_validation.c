/* test_spec_validation.c - create refuses a malformed EnvironmentSpec and an
 * execute refuses a malformed ExecutionCommand, naming the field, creating
 * nothing. */
#include "sandbox_test_util.h"

#include <dirent.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-int.h"

static size_t entries_in(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        n += de->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

static void refused(sbx_fixture *f, const ph_environment_spec *spec, ph_status want,
                    const char *field)
{
    ph_environment *env = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_create(f->svc, spec, &env, &diag), want);
    assert_null(env);
    if (strstr(diag.message, field) == NULL)
        fail_msg("diagnostic '%s' does not name %s", diag.message, field);
    assert_int_equal(entries_in(f->state_dir), 0);
}

static void test_bad_specs(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec s = sbx_spec(&f);
    s.tenant = "";
    refused(&f, &s, PH_E_INVAL, "tenant");
    s.tenant = "a/b";
    refused(&f, &s, PH_E_INVAL, "tenant");
    s = sbx_spec(&f);
    s.lease = "lease with space";
    refused(&f, &s, PH_E_INVAL, "lease");
    s = sbx_spec(&f);
    s.mechanism = PH_MECHANISM_GVISOR;
    refused(&f, &s, PH_E_DENIED, "mechanism");
    s = sbx_spec(&f);
    s.limits.output_bytes = 0;
    refused(&f, &s, PH_E_INVAL, "output_bytes");
    s = sbx_spec(&f);
    s.limits.wall_clock_ms = 0;
    refused(&f, &s, PH_E_INVAL, "wall_clock_ms");
    s = sbx_spec(&f);
    s.limits.pids = -7;
    refused(&f, &s, PH_E_INVAL, "pids");
    s = sbx_spec(&f);
    s.limits.cpu_millis = 184467440737096; /* x 100000 wraps 2^64 */
    refused(&f, &s, PH_E_INVAL, "cpu_millis");
    s = sbx_spec(&f);
    s.network.grant_token = "tok";
    refused(&f, &s, PH_E_INVAL, "proxy_socket_path");
    s.network.proxy_socket_path = "/s";
    s.network.grant_token = "has space";
    refused(&f, &s, PH_E_INVAL, "grant_token");
    s = sbx_spec(&f);
    s.passthrough_file = "/etc/pass\377through"; /* not UTF-8: spec.json could not keep it */
    refused(&f, &s, PH_E_INVAL, "passthrough_file");
    /* mkfs needs inodes * 256 < bytes: more than one per KiB is refused at
     * validation, not by mkfs as an I/O error after the image is made. */
    s = sbx_spec(&f);
    s.limits.workspace_bytes = 16ll * 1024 * 1024;
    s.limits.workspace_inodes = 16 * 1024 + 1;
    refused(&f, &s, PH_E_INVAL, "workspace_inodes_too_many");
    s.limits.workspace_bytes = PH_SANDBOX_UNSET; /* 1 GiB */
    s.limits.workspace_inodes = 1024 * 1024 + 1;
    refused(&f, &s, PH_E_INVAL, "workspace_inodes_too_many");
    sbx_close(&f);
}

/* An unset inode count fits the workspace: the default, or one per 4 KiB
 * block when that is fewer (16 MiB: 4096; 100000 inodes would not fit). */
static void test_default_inodes_fit_the_workspace(void **state)
{
    (void)state;
    ph_sandbox_limits l;
    ph_sandbox_limits_init(&l);
    assert_int_equal(ph_ws_limit_bytes(&l), 1024ull * 1024 * 1024);
    assert_int_equal(ph_ws_limit_inodes(&l), 100000);
    l.workspace_bytes = 16ll * 1024 * 1024;
    assert_int_equal(ph_ws_limit_inodes(&l), 4096);
    l.workspace_inodes = 64;
    assert_int_equal(ph_ws_limit_inodes(&l), 64);
}

static void test_bad_commands(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec s = sbx_spec(&f);
    ph_environment *env = sbx_create(&f, &s);
    ph_execution_result *r = NULL;
    ph_diag diag = {0};
    const char *empty0[] = {"", NULL};
    const char *none[] = {NULL};
    ph_execution_command cmd = {.argv = empty0, .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    assert_int_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_E_INVAL);
    cmd.argv = none;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_E_INVAL);
    cmd.argv = NULL;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_E_INVAL);
    const char *t[] = {"true", NULL};
    cmd.argv = t;
    cmd.stdin_len = 5; /* length without data */
    assert_int_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_E_INVAL);
    static const uint8_t byte = 'x';
    cmd.stdin_data = &byte;
    cmd.stdin_len = (size_t)64 * 1024 * 1024 + 1; /* over the cap: refused before reading */
    assert_int_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_E_LIMIT);
    assert_null(r);
    ph_environment_destroy(&env);
    assert_int_equal(entries_in(f.state_dir), 0); /* destroy leaves nothing */
    sbx_close(&f);
}

static void test_destroy_removes_a_very_deep_tree(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 20000));
    ph_environment_spec s = sbx_spec(&f);
    ph_environment *env = sbx_create(&f, &s);
    /* 400 levels, more than the remover keeps open (PH_TREE_OPEN_LEVELS),
     * and a link to / it must not follow. */
    const char *argv[] = {"sh", "-c",
                          "i=0; while [ $i -lt 400 ]; do mkdir d && cd d || exit 1; "
                          "i=$((i+1)); done; echo leaf > f; ln -s / up",
                          NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->exit_code, 0);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
    assert_int_equal(entries_in(f.state_dir), 0);
    sbx_close(&f);
}

/* $PINHOLE_SANDBOX_ID_RANGE is operator input: a sign or a first + count
 * that wraps must be refused, never turned into ids through 0 (root). */
static void test_bad_id_ranges(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    assert_non_null(dir);
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE,
                             .hard_cap_ms = 5000,
                             .state_dir = dir};
    const char *bad[] = {"-1:5", "1000:-1", "18446744073709551615:2", "1000:18446744073709550616",
                         "+1000:5", " 1000:5", "1000: 5", "999:5", "1000:0", "1000", ":5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(setenv("PINHOLE_SANDBOX_ID_RANGE", bad[i], 1), 0);
        ph_execution_service *svc = NULL;
        ph_diag diag = {0};
        ph_status st = ph_execution_service_open(&cfg, &svc, &diag);
        if (st != PH_E_INVAL || strstr(diag.message, "id_range_invalid") == NULL)
            fail_msg("range '%s' was not refused: %s", bad[i], diag.message);
        assert_null(svc);
    }
    /* Ranges holding nobody or an account of /etc/passwd: a sandbox running
     * as one could signal its processes or open its files. */
    char account[32] = "";
    setpwent();
    for (struct passwd *pw; (pw = getpwent()) != NULL;)
        if (pw->pw_uid >= 1000 && pw->pw_uid < 2000000000u && pw->pw_uid != 65534) {
            snprintf(account, sizeof account, "%u:1", (unsigned)pw->pw_uid);
            break;
        }
    endpwent();
    const char *accounts[] = {"65534:1", "60000:10000", account};
    for (size_t i = 0; i < 3; i++) {
        if (accounts[i][0] == '\0')
            continue;
        assert_int_equal(setenv("PINHOLE_SANDBOX_ID_RANGE", accounts[i], 1), 0);
        ph_execution_service *svc = NULL;
        ph_diag diag = {0};
        ph_status st = ph_execution_service_open(&cfg, &svc, &diag);
        printf("  range %s: %s\n", accounts[i], diag.message);
        if (st != PH_E_INVAL || strstr(diag.message, "id_range_account") == NULL)
            fail_msg("range '%s' holding an account was not refused: %s", accounts[i],
                     diag.message);
        assert_null(svc);
    }
    assert_int_equal(setenv("PINHOLE_SANDBOX_ID_RANGE", "3100000:5", 1), 0);
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_execution_service_open(&cfg, &svc, &diag), PH_OK);
    ph_execution_service_close(&svc);
    unsetenv("PINHOLE_SANDBOX_ID_RANGE");
    ph_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_default_inodes_fit_the_workspace),
        cmocka_unit_test(test_bad_commands),
        cmocka_unit_test(test_destroy_removes_a_very_deep_tree),
        cmocka_unit_test(test_bad_id_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
