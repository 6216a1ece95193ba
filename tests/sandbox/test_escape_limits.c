/* test_escape_limits.c - harness case 26, exhaustion: a fork bomb, a memory
 * hog and a CPU spinner inside a sandbox are contained by its limits and
 * the wall clock, and the host stays responsive throughout.
 *
 * Usage: sandbox.test_escape_limits [gvisor|docker]   (default gvisor)
 * Exit 77 with "SKIP: ..." when the mechanism is not available here.
 *
 * Responsiveness is measured from outside while each attack runs: a host
 * thread sleeps 20 ms at a time and spawns /bin/true every 200 ms, and the
 * worst lateness of either must stay under a second.
 */
#include "test_support.h"

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "escape_support.h"
#include "sandbox-int.h"

#define LIMIT_MEMORY (256ll * 1024 * 1024)
#define LIMIT_PIDS 1024
#define LIMIT_CPU_MILLIS 500

extern char **environ;

static ph_sandbox_mechanism g_mechanism;
static sbx_fixture g_fx;
static ph_environment *g_env;

static int group_setup(void **state)
{
    (void)state;
    if (!sbx_open(&g_fx, g_mechanism, 20000))
        return -1;
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.limits.memory_bytes = LIMIT_MEMORY;
    spec.limits.pids = LIMIT_PIDS;
    spec.limits.cpu_millis = LIMIT_CPU_MILLIS;
    g_env = sbx_create(&g_fx, &spec);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ph_environment_destroy(&g_env);
    sbx_close(&g_fx);
    return 0;
}

/* ---- the host's pulse ---- */

typedef struct pulse {
    pthread_t thread;
    atomic_bool stop;
    int64_t worst_sleep_late_ms;
    int64_t worst_spawn_ms;
    int spawn_failures;
} pulse;

static void *pulse_main(void *arg)
{
    pulse *p = arg;
    int64_t last_spawn = 0;
    while (!atomic_load(&p->stop)) {
        int64_t t0 = ph_monotonic_ms();
        usleep(20 * 1000);
        int64_t late = ph_monotonic_ms() - t0 - 20;
        if (late > p->worst_sleep_late_ms)
            p->worst_sleep_late_ms = late;
        if (t0 - last_spawn >= 200) {
            last_spawn = t0;
            char *const argv[] = {"true", NULL};
            pid_t pid;
            int64_t s0 = ph_monotonic_ms();
            if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0) {
                p->spawn_failures++;
                continue;
            }
            int status;
            waitpid(pid, &status, 0);
            int64_t took = ph_monotonic_ms() - s0;
            if (took > p->worst_spawn_ms)
                p->worst_spawn_ms = took;
        }
    }
    return NULL;
}

static void pulse_start(pulse *p)
{
    memset(p, 0, sizeof *p);
    atomic_store(&p->stop, false);
    assert_int_equal(pthread_create(&p->thread, NULL, pulse_main, p), 0);
}

static void pulse_stop_and_check(pulse *p, const char *attack)
{
    atomic_store(&p->stop, true);
    pthread_join(p->thread, NULL);
    printf("# %s: host sleep late by at most %lld ms, /bin/true spawn at most %lld ms\n", attack,
           (long long)p->worst_sleep_late_ms, (long long)p->worst_spawn_ms);
    assert_int_equal(p->spawn_failures, 0);
    assert_true(p->worst_sleep_late_ms < 1000);
    assert_true(p->worst_spawn_ms < 1000);
}

static ph_execution_result *run_attack(const char *script, int64_t timeout_s)
{
    return esc_sh_timed(g_env, script, timeout_s);
}

/* After an attack the same environment still runs commands. */
static void assert_sandbox_recovers(void)
{
    ph_execution_result *r = esc_sh(g_env, "echo alive");
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 0);
    assert_true(sbx_contains(r->out.data, r->out.len, "alive"));
    ph_execution_result_free(&r);
}

/* ---- tests ---- */

/* The spec's limits reach the sandbox's cgroup (v1, v2 or hybrid): runsc's
 * pinhole-<id> for gvisor, the container's own for docker. */
static void limits_reach_the_cgroup(void **state)
{
    (void)state;
    const char *id = ph_environment_id(g_env);
    char value[128];
    assert_true(esc_cgroup_read(g_mechanism, id, "pids", "pids.max", value, sizeof value));
    assert_string_equal(value, "1024");
    if (esc_cgroup_read(g_mechanism, id, "memory", "memory.limit_in_bytes", value, sizeof value) ||
        esc_cgroup_read(g_mechanism, id, "memory", "memory.max", value, sizeof value))
        assert_int_equal(strtoll(value, NULL, 10), LIMIT_MEMORY);
    else
        fail_msg("no memory cgroup for %s", id);
    if (esc_cgroup_read(g_mechanism, id, "cpu", "cpu.cfs_quota_us", value, sizeof value))
        assert_string_equal(value, "50000");
    else if (esc_cgroup_read(g_mechanism, id, "cpu", "cpu.max", value, sizeof value))
        assert_string_equal(value, "50000 100000");
    else
        fail_msg("no cpu cgroup for %s", id);
}

/* A fork bomb ends (limit or deadline) and the host never stalls. */
static void exhaust_with_fork_bomb(void **state)
{
    (void)state;
    pulse p;
    pulse_start(&p);
    ph_execution_result *r = run_attack("b() { b | b & }; b; sleep 30", 4);
    pulse_stop_and_check(&p, "fork bomb");
    assert_false(r->exited && r->exit_code == 0);
    assert_true(r->duration_ms < 4000 + 3000);
    ph_execution_result_free(&r);
    assert_sandbox_recovers();
}

/* A memory hog is stopped by the memory limit (or the deadline), not by
 * the host running out. */
static void exhaust_with_memory_hog(void **state)
{
    (void)state;
    pulse p;
    pulse_start(&p);
    ph_execution_result *r = run_attack("awk 'BEGIN { s = \"x\"; while (1) s = s s }'", 8);
    pulse_stop_and_check(&p, "memory hog");
    assert_false(r->exited && r->exit_code == 0);
    ph_execution_result_free(&r);
    assert_sandbox_recovers();
}

/* A CPU spinner is ended by the wall clock, enforced from outside (gVisor
 * does not enforce RLIMIT_CPU), within the deadline plus a small margin. */
static void exhaust_with_cpu_spinner(void **state)
{
    (void)state;
    pulse p;
    pulse_start(&p);
    ph_execution_result *r = run_attack("while :; do :; done", 2);
    pulse_stop_and_check(&p, "cpu spinner");
    assert_true(r->timed_out);
    assert_false(r->exited);
    assert_true(r->duration_ms >= 2000 - 50);
    assert_true(r->duration_ms < 2000 + 2000);
    ph_execution_result_free(&r);
    assert_sandbox_recovers();
}

/* Prints "left: N", N the processes whose command line holds
 * "deadline-tree" (their $0: dash execs a last simple command, so a comment
 * in the script would not survive; the pattern "deadline-tre[e]" does not match the
 * grep's own), after listing them. */
#define COUNT_TREE                                                                     \
    "list() { for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <\"$f\"; echo; done; }; " \
    "list | grep 'deadline-tre[e]'; echo \"left: $(list | grep -c 'deadline-tre[e]')\""

/* At the deadline the whole tree is gone, not just the command: children
 * in their own session, one ignoring SIGTERM and a spinning grandchild are
 * all ended from outside when the wall clock runs out. Checked at once by
 * the next execute; the positive control shows the check sees a live one. */
static void deadline_ends_the_whole_process_tree(void **state)
{
    (void)state;
    ph_execution_result *r =
        esc_sh(g_env, "t=deadline-tre; sh -c 'while :; do sleep 1; done' ${t}e-0 & sleep 0.3; "
                      COUNT_TREE);
    if (!sbx_contains(r->out.data, r->out.len, "left: 1"))
        fail_msg("the check does not see a live process: %.*s %.*s", (int)r->out.len,
                 (const char *)r->out.data, (int)r->err.len, (const char *)r->err.data);
    ph_execution_result_free(&r);
    r = run_attack(
        "setsid sh -c 'while :; do :; done' deadline-tree-1 >/dev/null 2>&1 & "
        "sh -c 'trap \"\" TERM HUP INT; while :; do sleep 1; done' deadline-tree-2 >/dev/null 2>&1 & "
        "sh -c 'sh -c \"while :; do :; done\" deadline-tree-3 & wait' >/dev/null 2>&1 & "
        "sleep 30",
        2);
    assert_true(r->timed_out);
    assert_true(r->duration_ms < 2000 + 2000);
    ph_execution_result_free(&r);
    r = esc_sh(g_env, COUNT_TREE);
    assert_true(r->exited);
    if (!sbx_contains(r->out.data, r->out.len, "left: 0"))
        fail_msg("processes survived the deadline: %.*s", (int)r->out.len, (const char *)r->out.data);
    ph_execution_result_free(&r);
}

int main(int argc, char **argv)
{
    int rc = esc_pick_mechanism(argc, argv, false, &g_mechanism);
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limits_reach_the_cgroup),
        cmocka_unit_test(exhaust_with_fork_bomb),
        cmocka_unit_test(exhaust_with_memory_hog),
        cmocka_unit_test(exhaust_with_cpu_spinner),
        cmocka_unit_test(deadline_ends_the_whole_process_tree),
    };
    char name[64];
    snprintf(name, sizeof name, "escape test, exhaustion (%s)",
             ph_sandbox_mechanism_name(g_mechanism));
    return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], group_setup,
                                   group_teardown);
}
