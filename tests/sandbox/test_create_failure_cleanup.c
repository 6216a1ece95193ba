/* test_create_failure_cleanup.c - every failure path of create, execute
 * and destroy cleans up what it made (gvisor, or docker with argv[1] =
 * "docker").
 *
 * A first run of the whole life (create with a network grant, the CLI's
 * spec save, two executes, destroy) records every fault point the library
 * passes (ph_sandbox_fault, sandbox-int.h), in order. Then, for each of
 * them, the same life is run again with that one call failing, and the host
 * is searched for what the environment could have left: its state
 * directory entries, runsc or docker processes naming it, mounts (the
 * workspace volume), loop devices backed by its image, cgroups
 * (/sys/fs/cgroup/.../pinhole-<id>), the docker container. Nothing may be
 * left. Exits 77 when the mechanism is not available. */
#include "escape_support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox-int.h"

#define MAX_CALLS 128
#define MAX_IDS 16

static ph_sandbox_mechanism g_mechanism;
static sbx_fixture g_fx;
static char g_socket[1024];
static int g_listener = -1;

/* The recording: each call's step name and its occurrence number. */
static struct {
    char step[48];
    int nth;
} g_calls[MAX_CALLS];
static int g_ncalls;
static bool g_recording;
/* The injection: fail the nth call of step. */
static const char *g_fail_step;
static int g_fail_nth, g_seen_nth;
static bool g_failed;
/* Every environment id that appeared in the state directory. */
static char g_ids[MAX_IDS][32];
static int g_nids;

static void note_ids(void)
{
    DIR *d = opendir(g_fx.state_dir);
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "env-", 4) != 0)
            continue;
        bool known = false;
        for (int i = 0; i < g_nids; i++)
            known |= strcmp(g_ids[i], de->d_name) == 0;
        if (!known && g_nids < MAX_IDS && strlen(de->d_name) < sizeof g_ids[0])
            memcpy(g_ids[g_nids++], de->d_name, strlen(de->d_name) + 1);
    }
    if (d != NULL)
        closedir(d);
}

static ph_status hook(const char *step)
{
    note_ids();
    if (g_recording && g_ncalls < MAX_CALLS) {
        int nth = 0;
        for (int i = 0; i < g_ncalls; i++)
            nth += strcmp(g_calls[i].step, step) == 0;
        snprintf(g_calls[g_ncalls].step, sizeof g_calls[0].step, "%s", step);
        g_calls[g_ncalls++].nth = nth;
    }
    if (g_fail_step != NULL && strcmp(step, g_fail_step) == 0 && g_seen_nth++ == g_fail_nth) {
        g_failed = true;
        return PH_E_IO;
    }
    return PH_OK;
}

static int group_setup(void **state)
{
    (void)state;
    esc_use_build_tmpdir();
    if (!sbx_open(&g_fx, g_mechanism, 60000))
        return -1;
    /* A grant needs a proxy socket: a listener nobody serves is enough. */
    /* Beside the state directory, in the test's TMPDIR (a path the sandbox
     * accepts: no "..", directories only root controls). */
    const char *tmp = getenv("TMPDIR");
    snprintf(g_socket, sizeof g_socket, "%s/proxy-%d.sock", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    g_listener = esc_unix_listener(g_socket);
    ph_sandbox_fault = hook;
    return g_listener >= 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    ph_sandbox_fault = NULL;
    if (g_listener >= 0)
        close(g_listener);
    unlink(g_socket);
    sbx_close(&g_fx);
    return 0;
}

/* One life of an environment; failures are expected, not asserted. */
static void life(void)
{
    ph_environment_spec s = sbx_spec(&g_fx);
    s.network.grant_token = "grant-for-the-test";
    s.network.proxy_socket_path = g_socket;
    s.limits.workspace_bytes = 32ll << 20;
    ph_environment *env = NULL;
    ph_diag diag = {0};
    if (ph_environment_create(g_fx.svc, &s, &env, &diag) != PH_OK)
        return;
    (void)ph_environment_persist_spec(env, &diag);
    const char *argv[] = {"sh", "-c", "echo x > /workspace/f", NULL};
    for (int i = 0; i < 2; i++) {
        ph_execution_command cmd = {.argv = argv,
                                    .timeout_seconds = PH_SANDBOX_UNSET,
                                    .run_budget_ms = PH_SANDBOX_UNSET};
        ph_execution_result *r = NULL;
        (void)ph_environment_execute(env, &cmd, &r, &diag);
        ph_execution_result_free(&r);
    }
    ph_environment_destroy(&env);
}

static bool docker_container_exists(const char *id)
{
    if (g_mechanism != PH_MECHANISM_DOCKER)
        return false;
    char cmd[256], out[256] = "";
    snprintf(cmd, sizeof cmd, "docker ps -a -q --filter name=^/pinhole-%s$ 2>/dev/null", id);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return false;
    size_t n = fread(out, 1, sizeof out - 1, p);
    pclose(p);
    out[n] = '\0';
    return n > 0;
}

/* Everything the environments of this life could have left. */
static void assert_nothing_left(const char *what)
{
    DIR *d = opendir(g_fx.state_dir);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            fail_msg("%s: the state directory still holds %s", what, de->d_name);
    closedir(d);
    for (int i = 0; i < g_nids; i++) {
        esc_traces t;
        esc_host_traces(&g_fx, g_ids[i], &t);
        if (t.processes || t.mounts || t.cgroups || t.state_dir)
            fail_msg("%s: %s left %d processes, %d mounts, %d cgroups, state %d", what, g_ids[i],
                     t.processes, t.mounts, t.cgroups, (int)t.state_dir);
        if (docker_container_exists(g_ids[i]))
            fail_msg("%s: the container of %s is left", what, g_ids[i]);
    }
    if (sbx_loop_devices_of(g_fx.state_dir) != 0)
        fail_msg("%s: a loop device backed by a workspace image is left", what);
}

static void test_every_failure_cleans_up(void **state)
{
    (void)state;
    g_recording = true;
    life();
    g_recording = false;
    assert_nothing_left("a life without failure");
    printf("# %d fault points in one life:", g_ncalls);
    for (int i = 0; i < g_ncalls; i++)
        printf(" %s#%d", g_calls[i].step, g_calls[i].nth);
    printf("\n");
    /* The steps that must be among them (a renamed one would silently
     * shrink the test). */
    static const char *const expected[] = {"env_dir", "id_claim", "workspace_dir", "proxy_pin",
                                           "volume_image", "volume_reserve",
                                           "volume_loop", "volume_discard", "volume_mkfs", "volume_mount",
                                           "volume_ready", "mechanism_create", "spec_write",
                                           "exec_snapshot", "exec_mechanism"};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        bool found = false;
        for (int j = 0; j < g_ncalls; j++)
            found |= strcmp(g_calls[j].step, expected[i]) == 0;
        if (!found)
            fail_msg("fault point %s was never reached", expected[i]);
    }
    int injected = 0;
    for (int i = 0; i < g_ncalls; i++) {
        g_nids = 0;
        g_fail_step = g_calls[i].step;
        g_fail_nth = g_calls[i].nth;
        g_seen_nth = 0;
        g_failed = false;
        life();
        g_fail_step = NULL;
        char what[128];
        snprintf(what, sizeof what, "failing %.47s#%d", g_calls[i].step, g_calls[i].nth);
        assert_true(g_failed);
        assert_nothing_left(what);
        injected++;
    }
    printf("# %d injected failures, nothing left after any\n", injected);
}

int main(int argc, char **argv)
{
    int rc = esc_pick_mechanism(argc, argv, false, &g_mechanism);
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_failure_cleans_up),
    };
    char name[64];
    snprintf(name, sizeof name, "failure cleanup (%s)", ph_sandbox_mechanism_name(g_mechanism));
    return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], group_setup,
                                   group_teardown);
}
