/* test_lifetime.c - a command ends when every process it started has ended
 * (decisions 7 and 10; docs/sandbox.md, "Process lifetime").
 *
 * Usage: sandbox.test_lifetime [gvisor|docker|fake]   (default gvisor)
 * Exit 77 with "SKIP: ..." when the mechanism is not available here.
 *
 * Each case leaves processes behind in a different way (a double fork, a
 * new session, SIGTERM ignored, a stopped process, the in-sandbox wrapper
 * killed or stopped by the command) and checks, once execute has returned:
 *  - nothing the command started is alive: seen by a later command's `ps`
 *    inside the sandbox (gvisor, docker: the processes would be there) and
 *    by a sweep of the host's /proc (docker, fake: the processes would be
 *    host processes);
 *  - files_changed holds every change those processes made: a file on disk
 *    is in the result, so nothing wrote after the result was computed;
 *  - a process still alive at the deadline made the result timed_out.
 * Every leftover carries a marker argument (a sleep of a length holding
 * this test process's pid, so no other test or concurrent run of this one
 * uses it) and the checks look only at this test's processes.
 */
#include "test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape_support.h"
#include "sandbox-int.h"

static ph_sandbox_mechanism g_mechanism;
static unsigned g_tag; /* this run's part of every marker */
static sbx_fixture g_fx;
static ph_environment *g_env;
static ph_workspace *g_ws;

static int group_setup(void **state)
{
    (void)state;
    if (!sbx_open(&g_fx, g_mechanism, 60000))
        return -1;
    ph_environment_spec spec = sbx_spec(&g_fx);
    g_env = sbx_create(&g_fx, &spec);
    ph_diag diag = {0};
    assert_int_equal(ph_environment_workspace(g_env, &g_ws, &diag), PH_OK);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ph_workspace_close(&g_ws);
    ph_environment_destroy(&g_env);
    sbx_close(&g_fx);
    return 0;
}

/* The in-sandbox wrapper (pinhole-forwarder --run) exists on gvisor and
 * docker; on fake the command's parent is the PID namespace's init, which
 * the kernel shields from the command's signals. */
static bool has_wrapper(void)
{
    return g_mechanism != PH_MECHANISM_FAKE;
}

static ph_execution_result *run_sh(const char *script, int64_t timeout_seconds)
{
    return esc_sh_timed(g_env, script, timeout_seconds);
}

/* Fails when a process whose arguments hold marker is alive. */
static void assert_no_survivor(const char *marker)
{
    if (g_mechanism != PH_MECHANISM_GVISOR && sbx_process_with_arg_exists(marker))
        fail_msg("a host process with '%s' outlived its command", marker);
    if (g_mechanism == PH_MECHANISM_FAKE)
        return; /* each command has a PID namespace of its own */
    ph_execution_result *r = run_sh("ps -o pid,args", 30);
    if (!r->exited || r->exit_code != 0)
        fail_msg("ps in the sandbox failed: %.*s", (int)r->err.len, (const char *)r->err.data);
    if (sbx_contains(r->out.data, r->out.len, marker))
        fail_msg("a process with '%s' outlived its command:\n%.*s", marker, (int)r->out.len,
                 (const char *)r->out.data);
    ph_execution_result_free(&r);
}

static bool workspace_has(const char *path)
{
    ph_ws_stat st;
    ph_diag diag = {0};
    return ph_workspace_stat(g_ws, path, &st, &diag) == PH_OK;
}

static void remove_file(const char *path)
{
    char script[128];
    snprintf(script, sizeof script, "rm -f /workspace/%s", path);
    ph_execution_result *r = run_sh(script, 30);
    ph_execution_result_free(&r);
}

/* The marker of case n: "3601.<tag><n>" (a valid sleep length). */
static const char *marker(char *buf, size_t cap, int n)
{
    snprintf(buf, cap, "3601.%05u%d", g_tag, n);
    return buf;
}

/* Runs script_tmpl with every "@M" replaced by the case's marker m. */
static ph_execution_result *run_marked(const char *script_tmpl, const char *m, int64_t timeout_s)
{
    char script[512];
    size_t n = 0, ml = strlen(m);
    for (const char *p = script_tmpl; *p != '\0' && n + ml < sizeof script - 1; p++) {
        if (p[0] == '@' && p[1] == 'M') {
            memcpy(script + n, m, ml);
            n += ml;
            p++;
        } else {
            script[n++] = *p;
        }
    }
    script[n] = '\0';
    return run_sh(script, timeout_s);
}

/* Leftovers the wrapper ends when the command exits: the result comes at
 * once (well before the deadline), not timed out, and nothing is left. */
static void check_swept(const char *script_tmpl, int n)
{
    char m[32];
    marker(m, sizeof m, n);
    ph_execution_result *r = run_marked(script_tmpl, m, 20);
    if (!r->exited || r->exit_code != 0 || r->timed_out)
        fail_msg("exited %d code %d signal %d timed_out %d: %.*s", r->exited, r->exit_code,
                 r->term_signal, r->timed_out, (int)r->err.len, (const char *)r->err.data);
    assert_true(r->duration_ms < 20000);
    printf("  case %d returned after %lld ms\n", n, (long long)r->duration_ms);
    ph_execution_result_free(&r);
    assert_no_survivor(m);
}

static void double_fork(void **state)
{
    (void)state;
    check_swept("( ( exec sleep @M ) & ) ; exit 0", 1);
}

static void new_session(void **state)
{
    (void)state;
    check_swept("setsid sleep @M </dev/null >/dev/null 2>&1 & exit 0", 2);
}

static void ignores_sigterm(void **state)
{
    (void)state;
    check_swept("sh -c 'trap \"\" TERM HUP INT; exec sleep @M' </dev/null >/dev/null 2>&1 & "
                "exit 0",
                3);
}

static void stopped_process(void **state)
{
    (void)state;
    check_swept("sleep @M </dev/null >/dev/null 2>&1 & kill -STOP $!; exit 0", 4);
}

/* The reproduction: the command kills its wrapper, so the
 * wrapper's sweep never runs, and leaves a writer that holds none of the
 * output pipes. The writer is alive at the 2 s deadline: the result is
 * timed out, lists the file it wrote, and the writer is gone. */
static void wrapper_killed(void **state)
{
    (void)state;
    remove_file("hidden");
    char m[32];
    ph_execution_result *r = run_marked("(exec >/dev/null 2>&1 </dev/null; sleep 1; "
                                        "while :; do echo x >> /workspace/hidden; sleep 0.3; "
                                        "done; : @M) & kill -9 $PPID",
                                        marker(m, sizeof m, 5), 2);
    const ph_file_change *c = sbx_change(r, "hidden");
    printf("  wrapper killed: timed_out %d, duration %lld ms, hidden %s\n", r->timed_out,
           (long long)r->duration_ms, c ? ph_change_kind_name(c->kind) : "not reported");
    bool on_disk = workspace_has("hidden");
    if (on_disk && (c == NULL || c->kind != PH_CHANGE_ADDED))
        fail_msg("hidden was written but the result does not list it as added");
    if (has_wrapper()) {
        assert_true(r->timed_out);
        assert_true(on_disk);
    }
    ph_execution_result_free(&r);
    assert_no_survivor(m);
    /* Nothing writes any more: the file is as the result saw it. */
    if (on_disk) {
        ph_ws_stat a, b;
        ph_diag diag = {0};
        assert_int_equal(ph_workspace_stat(g_ws, "hidden", &a, &diag), PH_OK);
        ph_execution_result *idle = run_sh("sleep 0.7", 10);
        ph_execution_result_free(&idle);
        assert_int_equal(ph_workspace_stat(g_ws, "hidden", &b, &diag), PH_OK);
        assert_int_equal(a.size, b.size);
    }
    remove_file("hidden");
}

/* The wrapper killed, and what it left ends by itself before the deadline:
 * the result waits for it (not timed out) and lists what it wrote. */
static void wrapper_killed_rest_ends(void **state)
{
    (void)state;
    remove_file("late");
    char m[32];
    ph_execution_result *r = run_marked("(exec >/dev/null 2>&1 </dev/null; sleep 0.5; "
                                        "echo done > /workspace/late; : @M) & kill -9 $PPID",
                                        marker(m, sizeof m, 6), 20);
    const ph_file_change *c = sbx_change(r, "late");
    printf("  wrapper killed, rest ends: timed_out %d, duration %lld ms, late %s\n",
           r->timed_out, (long long)r->duration_ms, c ? ph_change_kind_name(c->kind) : "not reported");
    bool on_disk = workspace_has("late");
    if (on_disk && (c == NULL || c->kind != PH_CHANGE_ADDED))
        fail_msg("late was written but the result does not list it as added");
    assert_false(r->timed_out);
    if (has_wrapper())
        assert_true(on_disk);
    ph_execution_result_free(&r);
    assert_no_survivor(m);
    remove_file("late");
}

/* The wrapper stopped (SIGSTOP) by the command: it can neither wait nor
 * sweep; the deadline ends everything. */
static void wrapper_stopped(void **state)
{
    (void)state;
    char m[32];
    ph_execution_result *r = run_marked(
        "sleep @M </dev/null >/dev/null 2>&1 & kill -STOP $PPID; exit 0", marker(m, sizeof m, 7), 2);
    printf("  wrapper stopped: timed_out %d, duration %lld ms\n", r->timed_out,
           (long long)r->duration_ms);
    if (has_wrapper())
        assert_true(r->timed_out);
    ph_execution_result_free(&r);
    assert_no_survivor(m);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Copies the static program at host_path into the workspace as name,
 * executable and owned by the workspace's owner. */
static void copy_probe(const char *host_path, const char *name)
{
    size_t len = 0;
    char *bin = ph_test_read_file(host_path, &len);
    assert_non_null(bin);
    char ws[1024], path[1100];
    esc_host_workspace(&g_fx, g_env, ws, sizeof ws);
    struct stat sb;
    assert_int_equal(stat(ws, &sb), 0);
    snprintf(path, sizeof path, "%s/%s", ws, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bin, len), (ssize_t)len);
    assert_int_equal(fchown(fd, sb.st_uid, sb.st_gid), 0);
    close(fd);
    free(bin);
}

/* The init runs as the command's uid: were it traceable, a command could
 * plant a thread in it (PTRACE_ATTACH, then clone(CLONE_VM|CLONE_THREAD))
 * that outlives every command. It is not dumpable, so the attach is
 * refused. The probe is a static program copied into the workspace. */
static void init_not_traceable(void **state)
{
    (void)state;
    if (!has_wrapper())
        skip();
    copy_probe(PH_PTRACE_PROBE, "ptrace-probe");
    ph_execution_result *r = run_sh("/workspace/ptrace-probe", 30);
    printf("  PTRACE_ATTACH on the init: %.*s", (int)r->out.len, (const char *)r->out.data);
    bool refused = r->exited && r->exit_code == 0 && r->out.len > 0 &&
                   memmem(r->out.data, r->out.len, "attach: EPERM", 13) != NULL;
    if (!refused)
        fail_msg("the init was traceable (or the probe failed): %.*s %.*s", (int)r->out.len,
                 (const char *)r->out.data, (int)r->err.len, (const char *)r->err.data);
    ph_execution_result_free(&r);
    remove_file("ptrace-probe");
}

/* A hash of a workspace file's bytes, read through the WorkspaceFiles port,
 * and its size. */
static uint64_t workspace_hash(const char *path, uint64_t *size)
{
    int fd = -1;
    ph_ws_stat st;
    ph_diag diag = {0};
    assert_int_equal(ph_workspace_open_read(g_ws, path, UINT64_MAX, &fd, &st, &diag), PH_OK);
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    static uint8_t buf[1 << 16];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    close(fd);
    *size = st.size;
    return h;
}

/* Asynchronous I/O a command leaves in flight ends with it: the probe
 * submits a 128 MiB io_submit read into a MAP_SHARED mapping of a
 * workspace file and exits without waiting. Whatever reached the file is in
 * that execute's files_changed, and nothing changes it afterwards: a later
 * command reports no change, and the file's bytes are the same after it.
 * (gVisor runs such a read in a goroutine of its kernel, not in the
 * command's process; the attempt is held there: the command's end waits
 * for the read, or cuts it when its memory goes, as a 400 MB one was at
 * 228 MB, and nothing reaches the file after execute returns.) */
static void async_io_ends_with_the_command(void **state)
{
    (void)state;
    copy_probe(PH_AIO_PROBE, "aio-probe");
    ph_execution_result *r =
        run_sh("/workspace/aio-probe /workspace/aio-src /workspace/aio-dst 134217728", 120);
    if (!r->exited || r->exit_code != 0 || !sbx_contains(r->out.data, r->out.len, "submitted: 1"))
        fail_msg("the probe failed: %.*s %.*s", (int)r->out.len, (const char *)r->out.data,
                 (int)r->err.len, (const char *)r->err.data);
    const ph_file_change *c = sbx_change(r, "aio-dst");
    assert_non_null(c);
    assert_int_equal(c->kind, PH_CHANGE_ADDED);
    uint64_t size_at_end = 0, size_later = 0;
    uint64_t at_end = workspace_hash("aio-dst", &size_at_end);
    ph_execution_result_free(&r);
    r = run_sh("true", 30);
    assert_true(r->exited && r->exit_code == 0);
    if (r->files_changed_count != 0)
        fail_msg("the next command saw %s change (%zu changes)", r->files_changed[0].path,
                 r->files_changed_count);
    ph_execution_result_free(&r);
    uint64_t later = workspace_hash("aio-dst", &size_later);
    printf("  in-flight read: %llu bytes at the end, hash %016llx then %016llx\n",
           (unsigned long long)size_at_end, (unsigned long long)at_end,
           (unsigned long long)later);
    assert_int_equal(size_at_end, size_later);
    assert_true(at_end == later);
    remove_file("aio-probe");
    remove_file("aio-src");
    remove_file("aio-dst");
}

/* A command runs once, whatever it prints. gvisor starts a command again in
 * a new sandbox when runsc exec failed because the sandbox had stopped; the
 * command writes to the same stderr as runsc, so printing runsc's failure
 * ("executing processes for container") and then filling the sandbox's
 * memory limit (which kills gVisor's kernel) made the service run it a
 * second time: twice the deadline, stdin replayed, the first run's output
 * dropped. Whether a command started is runsc's pid file on the host now.
 * Not on fake: it has no memory limit to fill. */
static void runs_once_whatever_it_prints(void **state)
{
    (void)state;
    if (g_mechanism == PH_MECHANISM_FAKE)
        skip();
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.limits.memory_bytes = 256ll * 1024 * 1024;
    ph_environment *env = sbx_create(&g_fx, &spec);
    const char *argv[] = {"sh", "-c",
                          "echo run >> /workspace/runs; "
                          "echo 'executing processes for container: sandbox stopped' >&2; "
                          "x=0123456789abcdef; while :; do x=$x$x; done",
                          NULL};
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = 30,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = NULL;
    ph_diag diag = {0};
    ph_status st = ph_environment_execute(env, &cmd, &r, &diag);
    ph_workspace *ws = NULL;
    assert_int_equal(ph_environment_workspace(env, &ws, &diag), PH_OK);
    uint8_t *runs = NULL;
    size_t len = 0;
    assert_int_equal(ph_workspace_read(ws, "runs", 4096, &runs, &len, &diag), PH_OK);
    printf("  status %s, runs recorded: %zu\n", ph_strerror(st), len / 4);
    if (len != 4)
        fail_msg("the command ran %zu times (status %s: %s)", len / 4, ph_strerror(st),
                 diag.message);
    assert_int_equal(st, PH_OK);
    assert_false(r->exited); /* the sandbox died with it */
    assert_true(r->duration_ms < 30000);
    free(runs);
    ph_execution_result_free(&r);
    ph_workspace_close(&ws);
    ph_environment_destroy(&env);
}

/* Kills gVisor's kernel of env (runsc-sandbox, its --root naming env's id)
 * from the host and waits until it has exited. Returns how many it killed. */
static int kill_sentry(ph_environment *env)
{
    int killed = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        char path[300], buf[4096];
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        int pfd = pidfd_open((pid_t)atoi(de->d_name), 0);
        int fd = pfd >= 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
        if (fd >= 0)
            close(fd);
        if (n > 0 && strncmp(buf, "runsc-sandbox", 13) == 0 &&
            sbx_contains(buf, (size_t)n, ph_environment_id(env)) &&
            pidfd_send_signal(pfd, SIGKILL, NULL, 0) == 0) {
            struct pollfd p = {.fd = pfd, .events = POLLIN};
            assert_int_equal(poll(&p, 1, 30000), 1);
            killed++;
        }
        if (pfd >= 0)
            close(pfd);
    }
    if (d != NULL)
        closedir(d);
    return killed;
}

/* The other side of runs_once_whatever_it_prints: a sandbox that stopped
 * between two commands (its kernel killed on the host) is started again,
 * and the next command runs in the new one, once. */
static void runs_after_the_sandbox_stopped(void **state)
{
    (void)state;
    if (g_mechanism != PH_MECHANISM_GVISOR)
        skip();
    ph_execution_result *r = run_sh("true", 30);
    assert_true(r->exited && r->exit_code == 0);
    ph_execution_result_free(&r);
    assert_int_equal(kill_sentry(g_env), 1);
    r = run_sh("echo run >> /workspace/runs-after-stop; exit 5", 30);
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 5);
    ph_execution_result_free(&r);
    uint8_t *runs = NULL;
    size_t len = 0;
    assert_int_equal(ph_workspace_read(g_ws, "runs-after-stop", 4096, &runs, &len, NULL), PH_OK);
    assert_int_equal(len, 4);
    free(runs);
    remove_file("runs-after-stop");
}

/* What the host-side check costs: the median wall time of execute for
 * `true` (printed; the figure docs/sandbox-gvisor.md quotes). */
static void execute_latency(void **state)
{
    (void)state;
    enum { RUNS = 15 };
    int64_t ms[RUNS];
    const char *argv[] = {"true", NULL};
    for (int i = 0; i < RUNS; i++) {
        int64_t t0 = ph_monotonic_ms();
        ph_execution_result *r = sbx_run(g_env, argv);
        ms[i] = ph_monotonic_ms() - t0;
        assert_true(r->exited && r->exit_code == 0);
        ph_execution_result_free(&r);
    }
    qsort(ms, RUNS, sizeof ms[0], cmp_i64);
    printf("  execute of `true`: median %lld ms, min %lld, max %lld (%d runs)\n",
           (long long)ms[RUNS / 2], (long long)ms[0], (long long)ms[RUNS - 1], RUNS);
}

int main(int argc, char **argv)
{
    int rc = esc_pick_mechanism(argc, argv, true, &g_mechanism);
    if (rc != 0)
        return rc;
    g_tag = (unsigned)getpid() % 100000;
    if (g_mechanism == PH_MECHANISM_FAKE && geteuid() != 0) {
        /* Without namespaces fake runs the command as a child of this very
         * process: kill $PPID would end the test. */
        printf("SKIP: fake keeps a command's processes in a PID namespace only as root\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(double_fork),
        cmocka_unit_test(new_session),
        cmocka_unit_test(ignores_sigterm),
        cmocka_unit_test(stopped_process),
        cmocka_unit_test(wrapper_killed),
        cmocka_unit_test(wrapper_killed_rest_ends),
        cmocka_unit_test(wrapper_stopped),
        cmocka_unit_test(init_not_traceable),
        cmocka_unit_test(async_io_ends_with_the_command),
        cmocka_unit_test(runs_once_whatever_it_prints),
        cmocka_unit_test(runs_after_the_sandbox_stopped),
        cmocka_unit_test(execute_latency),
    };
    char name[64];
    snprintf(name, sizeof name, "process lifetime (%s)", ph_sandbox_mechanism_name(g_mechanism));
    return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], group_setup,
                                   group_teardown);
}
