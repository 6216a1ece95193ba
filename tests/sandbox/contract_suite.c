/* contract_suite.c - the contract suite of the ExecutionEnvironment and
 * WorkspaceFiles ports (ADR-0029 decision 13): one set of tests, run against
 * every mechanism available on the machine, unchanged.
 *
 *   sandbox_contract_suite <mechanism>
 *
 * Exit 77 (ctest: Skipped) with a "SKIP:" line when the mechanism is not
 * available here. Isolation is NOT in this suite (decision 14): these tests
 * hold for fake, which has none. Each test asserts port semantics only: what
 * a command sees, what the result says, what the workspace holds. */
#include "sandbox_test_util.h"

#include "pinhole/clock.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define CAP_MS 10000

static ph_sandbox_mechanism g_mechanism;
static sbx_fixture g_fx;

static int group_setup(void **state)
{
    (void)state;
    return sbx_open(&g_fx, g_mechanism, CAP_MS) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    sbx_close(&g_fx);
    return 0;
}

static ph_execution_result *exec_cmd(ph_environment *env, const ph_execution_command *cmd)
{
    ph_execution_result *r = NULL;
    ph_diag diag = {0};
    if (ph_environment_execute(env, cmd, &r, &diag) != PH_OK)
        fail_msg("execute: %s", diag.message);
    return r;
}

static ph_workspace *workspace_of(ph_environment_spec *spec, ph_sandbox_lease **lease,
                                  ph_environment **env)
{
    ph_diag diag = {0};
    assert_int_equal(ph_sandbox_lease_open(g_fx.svc, spec, 600, lease, &diag), PH_OK);
    assert_int_equal(ph_sandbox_lease_environment(*lease, env, &diag), PH_OK);
    ph_workspace *ws = NULL;
    assert_int_equal(ph_sandbox_lease_workspace(*lease, &ws, &diag), PH_OK);
    return ws;
}

/* ---- the three operations ---- */

static void test_create_execute_destroy(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"true", NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 0);
    assert_false(r->timed_out);
    assert_int_equal(r->out.len, 0);
    assert_int_equal(r->files_changed_count, 0);
    ph_execution_result_free(&r);
    assert_null(r);
    ph_environment_destroy(&env);
    assert_null(env);
    ph_environment_destroy(&env); /* NULL is fine */
}

static void test_workspace_is_at_the_constant_path(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_sandbox_lease *lease;
    ph_environment *env;
    ph_workspace *ws = workspace_of(&spec, &lease, &env);
    assert_int_equal(ph_workspace_write(ws, "sub/hello.txt", "hi\n", 3, 0644, NULL), PH_OK);
    const char *argv[] = {"sh", "-c", "pwd; cat /workspace/sub/hello.txt; echo $HOME", NULL};
    ph_execution_command cmd = {.argv = argv, .cwd = "sub", .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = exec_cmd(env, &cmd);
    assert_string_equal((char *)r->out.data, "/workspace/sub\nhi\n/workspace\n");
    ph_execution_result_free(&r);
    ph_workspace_close(&ws);
    ph_sandbox_lease_end(&lease);
}

/* ---- argv, stdin, output ---- */

static void test_argv_reaches_the_program_verbatim(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"printf", "[%s]\\n", "two words", "it's", "\"quoted\"", "",
                          "$HOME", "*", "a;b|c", "back\\slash", NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->exit_code, 0);
    assert_string_equal((char *)r->out.data, "[two words]\n[it's]\n[\"quoted\"]\n[]\n[$HOME]\n"
                                             "[*]\n[a;b|c]\n[back\\slash]\n");
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

/* An argv element is bytes, not text: one that is not UTF-8 reaches the
 * program verbatim on every mechanism (the runtimes' text-only argv is
 * bridged by the wrapper), the program's name included. */
static void test_argv_bytes_that_are_not_utf8(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"printf", "[%s][%s]", "caf\xe9", "\xff\xfe-\x01", NULL};
    ph_execution_result *r = sbx_run(env, argv);
    static const char want[] = "[caf\xe9][\xff\xfe-\x01]";
    assert_int_equal(r->exit_code, 0);
    assert_int_equal(r->out.len, sizeof want - 1);
    assert_memory_equal(r->out.data, want, sizeof want - 1);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

static void test_stdin_bytes_reach_the_command(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    static const uint8_t in[] = {'a', 0, 'b', '\n', 0xff, 'z'};
    const char *argv[] = {"cat", NULL};
    ph_execution_command cmd = {.argv = argv, .stdin_data = in, .stdin_len = sizeof in,
                                .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = exec_cmd(env, &cmd);
    assert_int_equal(r->out.len, sizeof in);
    assert_memory_equal(r->out.data, in, sizeof in);
    ph_execution_result_free(&r);
    /* No stdin: end of file at once, never the service's terminal. */
    const char *wc[] = {"wc", "-c", NULL};
    r = sbx_run(env, wc);
    assert_string_equal((char *)r->out.data, "0\n");
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

static void test_output_is_capped_per_stream(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.limits.output_bytes = 1000;
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"sh", "-c", "head -c 5000 /dev/zero | tr '\\0' o; "
                                      "head -c 999 /dev/zero | tr '\\0' e >&2", NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->out.len, 1000);
    assert_true(r->out.truncated);
    assert_int_equal(r->out.data[999], 'o');
    assert_int_equal(r->err.len, 999);
    assert_false(r->err.truncated);
    assert_int_equal(r->exit_code, 0);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

/* Output is bytes: NUL, invalid UTF-8 and every other byte come back as
 * written. */
static void test_binary_output_is_kept_byte_for_byte(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"sh", "-c", "printf 'a\\000b\\377\\000'; printf '\\000\\n' >&2", NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->out.len, 5);
    assert_memory_equal(r->out.data, "a\0b\377\0", 5);
    assert_int_equal(r->err.len, 2);
    assert_memory_equal(r->err.data, "\0\n", 2);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

/* ---- streamed output ---- */

typedef struct stream_log {
    uint8_t data[2][4096]; /* [0] stdout, [1] stderr */
    size_t len[2];
    int64_t first_ms[2];   /* when each stream's first piece came */
    int bad_stream;
} stream_log;

static void on_output(void *ctx, int stream, const uint8_t *data, size_t len)
{
    stream_log *l = ctx;
    if (stream != PH_STREAM_STDOUT && stream != PH_STREAM_STDERR) {
        l->bad_stream = stream;
        return;
    }
    int i = stream == PH_STREAM_STDOUT ? 0 : 1;
    if (l->len[i] == 0)
        l->first_ms[i] = ph_monotonic_ms();
    size_t room = sizeof l->data[i] - l->len[i];
    memcpy(l->data[i] + l->len[i], data, len < room ? len : room);
    l->len[i] += len;
}

/* The output arrives while the command runs, in order, and the pieces are
 * exactly what the result keeps (the cap applies to both). */
static void test_output_is_streamed_while_running(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.limits.output_bytes = 1000;
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"sh", "-c", "echo first; echo early-err >&2; sleep 2; "
                                      "head -c 3000 /dev/zero | tr '\\0' x; echo late-err >&2",
                          NULL};
    stream_log l = {0};
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET, .on_output = on_output,
                                .on_output_ctx = &l};
    ph_execution_result *r = exec_cmd(env, &cmd);
    int64_t end = ph_monotonic_ms();
    assert_int_equal(l.bad_stream, 0);
    assert_int_equal(r->exit_code, 0);
    /* Both streams' first pieces came before the command's 2 s sleep ended. */
    assert_true(l.first_ms[0] > 0 && end - l.first_ms[0] >= 1500);
    assert_true(l.first_ms[1] > 0 && end - l.first_ms[1] >= 1500);
    assert_int_equal(l.len[0], r->out.len);
    assert_memory_equal(l.data[0], r->out.data, r->out.len);
    assert_int_equal(l.len[1], r->err.len);
    assert_memory_equal(l.data[1], r->err.data, r->err.len);
    assert_int_equal(r->out.len, 1000);
    assert_true(r->out.truncated);
    assert_memory_equal(r->out.data, "first\nxx", 8);
    assert_string_equal((char *)r->err.data, "early-err\nlate-err\n");
    assert_int_equal(r->stream_dropped_bytes, 0);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

/* ---- exit codes and signals ---- */

static void test_exit_codes_and_signals(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *exit42[] = {"sh", "-c", "exit 42", NULL};
    ph_execution_result *r = sbx_run(env, exit42);
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 42);
    ph_execution_result_free(&r);

    const char *sig[] = {"sh", "-c", "kill -TERM $$", NULL};
    r = sbx_run(env, sig);
    assert_false(r->exited);
    assert_int_equal(r->term_signal, SIGTERM);
    assert_false(r->timed_out);
    ph_execution_result_free(&r);

    const char *missing[] = {"no-such-program-pinhole", NULL};
    r = sbx_run(env, missing);
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 127);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
}

/* ---- timeouts: each bound wins in turn ---- */

static void expect_timeout(ph_environment *env, int64_t model_s, int64_t budget_ms,
                           ph_timeout_bound bound, int64_t ms)
{
    const char *argv[] = {"sleep", "30", NULL};
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = model_s,
                                .run_budget_ms = budget_ms};
    ph_execution_result *r = exec_cmd(env, &cmd);
    assert_true(r->timed_out);
    assert_int_equal(r->timeout_bound, bound);
    /* A run budget is what is left of it once the command may start (the
     * wait for the environment's lock comes out of it). */
    if (bound == PH_TIMEOUT_BOUND_RUN_BUDGET)
        assert_true(r->timeout_ms <= ms && r->timeout_ms > ms - 50);
    else
        assert_int_equal(r->timeout_ms, ms);
    assert_false(r->exited);
    assert_true(r->duration_ms >= ms - 50);
    assert_true(r->duration_ms < ms + 3000);
    ph_execution_result_free(&r);
}

static void test_timeout_each_bound_wins(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.limits.wall_clock_ms = 400;
    ph_environment *env = sbx_create(&g_fx, &spec);
    expect_timeout(env, PH_SANDBOX_UNSET, PH_SANDBOX_UNSET, PH_TIMEOUT_BOUND_WALL_CLOCK, 400);
    expect_timeout(env, PH_SANDBOX_UNSET, 250, PH_TIMEOUT_BOUND_RUN_BUDGET, 250);
    ph_environment_destroy(&env);

    spec.limits.wall_clock_ms = 5000;
    env = sbx_create(&g_fx, &spec);
    expect_timeout(env, 1, 8000, PH_TIMEOUT_BOUND_MODEL, 1000);
    expect_timeout(env, 0, PH_SANDBOX_UNSET, PH_TIMEOUT_BOUND_MODEL, 1000); /* clamped up to 1 */
    /* The model cannot raise the bound: asking for an hour gets the cap. */
    const char *t[] = {"true", NULL};
    ph_execution_command cmd = {.argv = t, .timeout_seconds = 3600,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    spec.limits.wall_clock_ms = PH_SANDBOX_UNSET;
    ph_environment *env2 = sbx_create(&g_fx, &spec);
    ph_execution_result *r = exec_cmd(env2, &cmd);
    assert_int_equal(r->timeout_bound, PH_TIMEOUT_BOUND_SERVICE_CAP);
    assert_int_equal(r->timeout_ms, CAP_MS);
    assert_false(r->timed_out);
    ph_execution_result_free(&r);
    /* A spent budget starts nothing. */
    cmd.run_budget_ms = 0;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_execute(env2, &cmd, &r, &diag), PH_E_TIMEOUT);
    assert_null(r);
    ph_environment_destroy(&env2);
    ph_environment_destroy(&env);
}

static void test_timeout_service_cap_wins_alone(void **state)
{
    (void)state;
    sbx_fixture small;
    assert_true(sbx_open(&small, g_mechanism, 300));
    ph_environment_spec spec = sbx_spec(&small);
    ph_environment *env = sbx_create(&small, &spec);
    expect_timeout(env, PH_SANDBOX_UNSET, PH_SANDBOX_UNSET, PH_TIMEOUT_BOUND_SERVICE_CAP, 300);
    ph_environment_destroy(&env);
    sbx_close(&small);
}

static void test_deadline_kills_the_whole_tree(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.limits.wall_clock_ms = 500;
    ph_environment *env = sbx_create(&g_fx, &spec);
    /* A background child, and a daemon that left the session. Their
     * durations carry our pid: the check looks at every process on the
     * host, and another run of this suite sleeps too. */
    char arg[3][32], cmd[200];
    for (int i = 0; i < 3; i++)
        snprintf(arg[i], sizeof arg[i], "71.%u0%d", (unsigned)getpid(), i + 1);
    snprintf(cmd, sizeof cmd, "sleep %s & (setsid sleep %s > /dev/null 2>&1 &); sleep %s", arg[0],
             arg[1], arg[2]);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_true(r->timed_out);
    ph_execution_result_free(&r);
    usleep(200 * 1000);
    for (int i = 0; i < 3; i++)
        if (sbx_process_with_arg_exists(arg[i]))
            fail_msg("sleep %s outlived the deadline", arg[i]);
    ph_environment_destroy(&env);
}

/* ---- files_changed ---- */

static void test_files_changed_from_a_snapshot(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_sandbox_lease *lease;
    ph_environment *env;
    ph_workspace *ws = workspace_of(&spec, &lease, &env);
    const char *seed[] = {"mod.txt", "del.txt", "old-name.txt", "forged.txt", "same.txt",
                          "d/inner.txt", "gone/x/y.txt"};
    for (size_t i = 0; i < sizeof seed / sizeof seed[0]; i++)
        assert_int_equal(ph_workspace_write(ws, seed[i], "12345\n", 6, 0644, NULL), PH_OK);
    const char *argv[] = {
        "sh", "-c",
        "set -e; echo more >> mod.txt; rm del.txt; mv old-name.txt new-name.txt;"
        "m=$(stat -c %y forged.txt); printf '54321\\n' > forged.txt; touch -d \"$m\" forged.txt;"
        "mkdir -p n1/n2/n3; echo deep > n1/n2/n3/leaf.txt; ln -s /etc/passwd link-out;"
        "ln -s / link-root; rm -r gone; echo x > d/inner.txt",
        NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->exit_code, 0);
    const struct {
        const char *path;
        ph_change_kind kind;
        long size;
    } want[] = {
        {"d/inner.txt", PH_CHANGE_MODIFIED, 2},  {"del.txt", PH_CHANGE_DELETED, 0},
        {"forged.txt", PH_CHANGE_MODIFIED, 6},   {"gone/x/y.txt", PH_CHANGE_DELETED, 0},
        {"link-out", PH_CHANGE_ADDED, 11},       {"link-root", PH_CHANGE_ADDED, 1},
        {"mod.txt", PH_CHANGE_MODIFIED, 11},     {"n1/n2/n3/leaf.txt", PH_CHANGE_ADDED, 5},
        {"new-name.txt", PH_CHANGE_ADDED, 6},    {"old-name.txt", PH_CHANGE_DELETED, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const ph_file_change *c = sbx_change(r, want[i].path);
        if (c == NULL)
            fail_msg("no change reported for %s", want[i].path);
        assert_int_equal(c->kind, want[i].kind);
        assert_int_equal(c->size, want[i].size);
    }
    assert_int_equal(r->files_changed_count, sizeof want / sizeof want[0]);
    assert_null(sbx_change(r, "same.txt"));
    assert_false(r->files_changed_truncated);
    for (size_t i = 1; i < r->files_changed_count; i++)
        assert_true(strcmp(r->files_changed[i - 1].path, r->files_changed[i].path) < 0);
    ph_execution_result_free(&r);
    ph_workspace_close(&ws);
    ph_sandbox_lease_end(&lease);
}

/* ---- workspace path rules ---- */

static void test_workspace_path_rules(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_sandbox_lease *lease;
    ph_environment *env;
    ph_workspace *ws = workspace_of(&spec, &lease, &env);
    const char *argv[] = {"sh", "-c",
                          "mkdir -p in && echo inside > in/f && ln -s in/f ok-link && "
                          "ln -s /etc/hostname abs-link && ln -s ../../../../../etc rel-link && "
                          "ln -s /etc dir-link",
                          NULL};
    ph_execution_result *r = sbx_run(env, argv);
    assert_int_equal(r->exit_code, 0);
    ph_execution_result_free(&r);

    uint8_t *data;
    size_t len;
    ph_diag diag = {0};
    assert_int_equal(ph_workspace_read(ws, "ok-link", 100, &data, &len, &diag), PH_OK);
    assert_string_equal((char *)data, "inside\n");
    free(data);
    const char *refused[] = {"/etc/hostname", "../x", "in/../../x", "abs-link", "rel-link/passwd",
                             "dir-link/hostname"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        ph_status st = ph_workspace_read(ws, refused[i], 4096, &data, &len, &diag);
        if (st != PH_E_DENIED)
            fail_msg("%s: expected a refusal, got %s", refused[i], ph_strerror(st));
    }
    assert_int_equal(ph_workspace_write(ws, "dir-link/pinhole-test", "x", 1, 0644, &diag),
                     PH_E_DENIED);
    /* The execution side: a cwd outside the workspace is refused. */
    const char *t[] = {"true", NULL};
    const char *bad_cwd[] = {"..", "/tmp", "dir-link", "in/../.."};
    for (size_t i = 0; i < sizeof bad_cwd / sizeof bad_cwd[0]; i++) {
        ph_execution_command cmd = {.argv = t, .cwd = bad_cwd[i],
                                    .timeout_seconds = PH_SANDBOX_UNSET,
                                    .run_budget_ms = PH_SANDBOX_UNSET};
        assert_int_equal(ph_environment_execute(env, &cmd, &r, &diag), PH_E_DENIED);
    }
    ph_execution_command missing = {.argv = t, .cwd = "nope", .timeout_seconds = PH_SANDBOX_UNSET,
                                    .run_budget_ms = PH_SANDBOX_UNSET};
    assert_int_equal(ph_environment_execute(env, &missing, &r, &diag), PH_E_NOT_FOUND);
    ph_workspace_close(&ws);
    ph_sandbox_lease_end(&lease);
}

/* ---- environment tiers ---- */

static void test_environment_is_built_in_tiers(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char list[512];
    snprintf(list, sizeof list, "%s/passthrough", dir);
    const char *names = "# operator list\nPH_THRU_OK\nOPENAI_API_KEY\nPH_CANARY_SECRET\n"
                        "github_token\nPATH\n\nPH_THRU_UNSET\n";
    assert_int_equal(ph_test_write_file(list, names, strlen(names)), 0);
    setenv("PH_THRU_OK", "visible value", 1);
    setenv("OPENAI_API_KEY", "canary-9f1c-openai", 1);
    setenv("PH_CANARY_SECRET", "canary-9f1c-secret", 1);
    setenv("github_token", "canary-9f1c-gh", 1);
    unsetenv("PH_THRU_UNSET");
    g_fx.warnings[0] = '\0';

    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.passthrough_file = list;
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"env", NULL};
    ph_execution_result *r = sbx_run(env, argv);
    const char *out = (const char *)r->out.data;
    assert_true(sbx_contains(out, r->out.len, "PH_THRU_OK=visible value\n"));
    assert_true(sbx_contains(out, r->out.len, "HOME=/workspace\n"));
    assert_true(sbx_contains(out, r->out.len, "LANG=C.UTF-8\n"));
    assert_true(sbx_contains(out, r->out.len, "TMPDIR=/tmp\n"));
    assert_false(sbx_contains(out, r->out.len, "canary-9f1c"));
    assert_false(sbx_contains(out, r->out.len, "PH_THRU_UNSET"));
    assert_false(sbx_contains(out, r->out.len, "PROXY"));
    assert_true(strstr(g_fx.warnings, "passthrough_credential_refused") != NULL);
    assert_true(strstr(g_fx.warnings, "OPENAI_API_KEY") != NULL);
    assert_true(strstr(g_fx.warnings, "github_token") != NULL);
    assert_true(strstr(g_fx.warnings, "passthrough_synthesized_refused") != NULL);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);

    /* Unreadable list: tier 2 alone, a warning, and the run still works. */
    g_fx.warnings[0] = '\0';
    snprintf(list, sizeof list, "%s/missing", dir);
    spec.passthrough_file = list;
    env = sbx_create(&g_fx, &spec);
    r = sbx_run(env, argv);
    assert_int_equal(r->exit_code, 0);
    size_t lines = 0;
    for (size_t i = 0; i < r->out.len; i++)
        lines += r->out.data[i] == '\n';
    assert_int_equal(lines, 5); /* PATH HOME TMPDIR LANG PWD */
    assert_false(sbx_contains(r->out.data, r->out.len, "PH_THRU_OK"));
    assert_true(strstr(g_fx.warnings, "passthrough_unreadable") != NULL);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);

    /* Network granted: the proxy variables carry the grant. */
    spec.passthrough_file = NULL;
    spec.network.grant_token = "tok.abc";
    /* A real listening socket: a mechanism may bind-mount it in. */
    char sock_path[512];
    snprintf(sock_path, sizeof sock_path, "%s/proxy.sock", dir);
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    assert_true(strlen(sock_path) < sizeof sun.sun_path);
    strcpy(sun.sun_path, sock_path);
    assert_int_equal(bind(sock, (struct sockaddr *)&sun, sizeof sun), 0);
    assert_int_equal(listen(sock, 4), 0);
    spec.network.proxy_socket_path = sock_path;
    spec.network.proxy_port = 3129;
    env = sbx_create(&g_fx, &spec);
    r = sbx_run(env, argv);
    assert_true(sbx_contains(r->out.data, r->out.len,
                             "HTTPS_PROXY=http://lease-1:tok.abc@127.0.0.1:3129\n"));
    assert_true(sbx_contains(r->out.data, r->out.len,
                             "http_proxy=http://lease-1:tok.abc@127.0.0.1:3129\n"));
    assert_true(sbx_contains(r->out.data, r->out.len, "NO_PROXY=\n"));
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
    close(sock);
    unsetenv("OPENAI_API_KEY");
    unsetenv("PH_CANARY_SECRET");
    unsetenv("github_token");
    ph_test_rmtree(dir);
    free(dir);
}

/* ---- lease lifecycle ---- */

static void test_lazy_creation_holds_and_lease_end(void **state)
{
    (void)state;
    ph_environment_spec spec = sbx_spec(&g_fx);
    ph_sandbox_lease *lease = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_sandbox_lease_open(g_fx.svc, &spec, 60, &lease, &diag), PH_OK);
    assert_false(ph_sandbox_lease_has_sandbox(lease));
    ph_workspace *ws = NULL;
    assert_int_equal(ph_sandbox_lease_workspace(lease, &ws, &diag), PH_OK);
    assert_true(ph_sandbox_lease_has_sandbox(lease));
    assert_int_equal(ph_workspace_write(ws, "kept.txt", "k", 1, 0644, &diag), PH_OK);

    /* A short hold keeps it. */
    ph_sandbox_lease_hold_begin(lease, 1000);
    assert_false(ph_sandbox_lease_hold_tick(lease, 1030));
    assert_false(ph_sandbox_lease_hold_end(lease, 1059));
    ph_environment *env = NULL;
    assert_int_equal(ph_sandbox_lease_environment(lease, &env, &diag), PH_OK);
    const char *cat[] = {"cat", "kept.txt", NULL};
    ph_execution_result *r = sbx_run(env, cat);
    assert_string_equal((char *)r->out.data, "k");
    ph_execution_result_free(&r);

    /* A hold of approval_hold_seconds destroys it; the next call is fresh. */
    ph_sandbox_lease_hold_begin(lease, 2000);
    assert_true(ph_sandbox_lease_hold_tick(lease, 2060));
    assert_false(ph_sandbox_lease_has_sandbox(lease));
    ph_ws_stat st;
    assert_int_equal(ph_workspace_stat(ws, "kept.txt", &st, &diag), PH_E_NOT_FOUND);
    assert_false(ph_sandbox_lease_hold_end(lease, 2061));
    ph_workspace_close(&ws);
    assert_int_equal(ph_sandbox_lease_workspace(lease, &ws, &diag), PH_OK);
    ph_ws_list *list = NULL;
    assert_int_equal(ph_workspace_list(ws, ".", 10, &list, &diag), PH_OK);
    assert_int_equal(list->count, 0);
    ph_ws_list_free(&list);
    assert_int_equal(ph_workspace_write(ws, "second.txt", "2", 1, 0644, &diag), PH_OK);

    /* Lease end destroys; a resumed run (a new lease) starts empty. */
    ph_sandbox_lease_end(&lease);
    assert_null(lease);
    assert_int_equal(ph_workspace_stat(ws, "second.txt", &st, &diag), PH_E_NOT_FOUND);
    assert_int_not_equal(ph_workspace_write(ws, "late.txt", "x", 1, 0644, &diag), PH_OK);
    ph_workspace_close(&ws);
    assert_int_equal(ph_sandbox_lease_open(g_fx.svc, &spec, 60, &lease, &diag), PH_OK);
    assert_int_equal(ph_sandbox_lease_workspace(lease, &ws, &diag), PH_OK);
    assert_int_equal(ph_workspace_list(ws, "", 10, &list, &diag), PH_OK);
    assert_int_equal(list->count, 0);
    ph_ws_list_free(&list);
    ph_workspace_close(&ws);
    ph_sandbox_lease_end(&lease);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <gvisor|docker|fake>\n", argv[0]);
        return 2;
    }
    ph_diag diag = {0};
    if (ph_sandbox_mechanism_from_name(argv[1], &g_mechanism, &diag) != PH_OK) {
        fprintf(stderr, "%s\n", diag.message);
        return 2;
    }
    if (ph_sandbox_mechanism_available(g_mechanism, &diag) != PH_OK) {
        printf("SKIP: mechanism %s is not available here: %s\n", argv[1], diag.message);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_execute_destroy),
        cmocka_unit_test(test_workspace_is_at_the_constant_path),
        cmocka_unit_test(test_argv_reaches_the_program_verbatim),
        cmocka_unit_test(test_argv_bytes_that_are_not_utf8),
        cmocka_unit_test(test_stdin_bytes_reach_the_command),
        cmocka_unit_test(test_output_is_capped_per_stream),
        cmocka_unit_test(test_binary_output_is_kept_byte_for_byte),
        cmocka_unit_test(test_output_is_streamed_while_running),
        cmocka_unit_test(test_exit_codes_and_signals),
        cmocka_unit_test(test_timeout_each_bound_wins),
        cmocka_unit_test(test_timeout_service_cap_wins_alone),
        cmocka_unit_test(test_deadline_kills_the_whole_tree),
        cmocka_unit_test(test_files_changed_from_a_snapshot),
        cmocka_unit_test(test_workspace_path_rules),
        cmocka_unit_test(test_environment_is_built_in_tiers),
        cmocka_unit_test(test_lazy_creation_holds_and_lease_end),
    };
    char name[64];
    snprintf(name, sizeof name, "sandbox contract suite (%s)", argv[1]);
    return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], group_setup,
                                   group_teardown);
}
