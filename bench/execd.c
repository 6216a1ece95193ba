/* execd.c - bench_execd: what pinhole-execd adds to the port, measured in
 * one run against the in-process library on the fake mechanism.
 *
 *  1. create + execute `true` + destroy, median of N, in-process vs through
 *     the daemon;
 *  2. warm execute of `true` in an existing environment, median of N, both
 *     ways, and the difference (target: the daemon adds <= 2 ms);
 *  3. 16 concurrent leases (one connection and thread each) running 20
 *     commands each: throughput, p50/p99 per command, and that every one of
 *     the 320 came back with exit 0.
 * The daemon is started here on a private socket. Prints figures; asserts
 * nothing about time (exit 1 only when a command is lost or fails). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinhole/execd_client.h"
#include "pinhole/sandbox.h"
#include "pinhole/sandbox_lease.h"

#include "bench_util.h"

#define N_COLD 30
#define N_WARM 200
#define LEASES 16
#define PER_LEASE 20

static const char *g_sock;
static double g_lat[LEASES * PER_LEASE];
static int g_ok[LEASES];

static const char *const g_true[] = {"true", NULL};

static ph_environment_spec spec_for(const char *lease)
{
    ph_environment_spec s = {.tenant = "bench", .lease = lease, .mechanism = PH_MECHANISM_FAKE};
    ph_sandbox_limits_init(&s.limits);
    return s;
}

static const ph_execution_command g_cmd = {.argv = g_true, .timeout_seconds = PH_SANDBOX_UNSET,
                                           .run_budget_ms = PH_SANDBOX_UNSET};

static ph_service_config config(void)
{
    ph_service_config c = {.mode = PH_SERVICE_MODE_DEVELOPMENT, .mechanism = PH_MECHANISM_FAKE,
                           .hard_cap_ms = 10000};
    return c;
}

static void *lease_worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    ph_service_config cfg = config();
    ph_execd_service *svc = NULL;
    if (ph_execd_service_open(g_sock, &cfg, &svc, NULL) != PH_OK)
        return NULL;
    char name[32];
    snprintf(name, sizeof name, "lease-%d", i);
    ph_environment_spec spec = spec_for(name);
    ph_execd_lease *lease = NULL;
    ph_execd_environment *env = NULL;
    if (ph_execd_lease_open(svc, &spec, 600, &lease, NULL) == PH_OK &&
        ph_execd_lease_environment(lease, &env, NULL) == PH_OK) {
        for (int k = 0; k < PER_LEASE; k++) {
            ph_execution_result *r = NULL;
            double s = bench_now_ms();
            ph_diag d = {0};
            ph_status st = ph_execd_environment_execute(env, &g_cmd, &r, &d);
            g_lat[i * PER_LEASE + k] = bench_now_ms() - s;
            if (st == PH_OK && r->exited && r->exit_code == 0)
                g_ok[i]++;
            else
                fprintf(stderr, "lease %d command %d: %s (exited %d, exit %d, signal %d)\n", i, k,
                        st == PH_OK ? "completed" : d.message, r ? r->exited : -1,
                        r ? r->exit_code : -1, r ? r->term_signal : -1);
            ph_execution_result_free(&r);
        }
    }
    ph_execd_lease_end(&lease);
    ph_execd_service_close(&svc);
    return NULL;
}

static pid_t start_daemon(const char *dir, char *sock, size_t cap)
{
    snprintf(sock, cap, "%s/execd.sock", dir);
    char a_sock[700], a_state[700];
    snprintf(a_sock, sizeof a_sock, "--socket=%s", sock);
    snprintf(a_state, sizeof a_state, "--state-dir=%s/state", dir);
    pid_t pid = fork();
    if (pid == 0) {
        char *argv[] = {(char *)PH_EXECD_BINARY, a_sock, a_state, (char *)"--allow-uid=0",
                        (char *)"--mechanism=fake", (char *)"--mode=development",
                        (char *)"--max-executions=4", (char *)"--queue=32",
                        /* one worker: every thread and queue slot is its share */
                        (char *)"--max-requests-per-identity=36", NULL};
        char *envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        if (freopen("/dev/null", "w", stderr) == NULL)
            _exit(127);
        execve(PH_EXECD_BINARY, argv, envp);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        struct stat st;
        if (stat(sock, &st) == 0)
            return pid;
        usleep(25000);
    }
    return -1;
}

int main(void)
{
    char dir[] = "/tmp/pinhole-bench-execd-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    char sock[600], state[600];
    pid_t daemon = start_daemon(dir, sock, sizeof sock);
    if (daemon < 0) {
        fprintf(stderr, "bench_execd: pinhole-execd did not start\n");
        return 1;
    }
    g_sock = sock;
    snprintf(state, sizeof state, "%s/inproc", dir);
    ph_service_config cfg = config();
    cfg.state_dir = state;
    ph_execution_service *local = NULL;
    ph_execd_service *remote = NULL;
    ph_diag d = {0};
    if (ph_execution_service_open(&cfg, &local, &d) != PH_OK ||
        ph_execd_service_open(sock, &cfg, &remote, &d) != PH_OK) {
        fprintf(stderr, "bench_execd: %s\n", d.message);
        return 1;
    }
    ph_environment_spec spec = spec_for("lease-1");
    static double t[N_WARM];

    for (int i = 0; i < N_COLD; i++) {
        double s = bench_now_ms();
        ph_environment *env = NULL;
        ph_execution_result *r = NULL;
        ph_environment_create(local, &spec, &env, NULL);
        ph_environment_execute(env, &g_cmd, &r, NULL);
        ph_execution_result_free(&r);
        ph_environment_destroy(&env);
        t[i] = bench_now_ms() - s;
    }
    double cold_local = bench_quantile(t, N_COLD, 0.5);
    for (int i = 0; i < N_COLD; i++) {
        double s = bench_now_ms();
        ph_execd_environment *env = NULL;
        ph_execution_result *r = NULL;
        ph_execd_environment_create(remote, &spec, &env, NULL);
        ph_execd_environment_execute(env, &g_cmd, &r, NULL);
        ph_execution_result_free(&r);
        ph_execd_environment_destroy(&env);
        t[i] = bench_now_ms() - s;
    }
    double cold_remote = bench_quantile(t, N_COLD, 0.5);

    ph_environment *lenv = NULL;
    ph_execd_environment *renv = NULL;
    ph_environment_create(local, &spec, &lenv, NULL);
    ph_execd_environment_create(remote, &spec, &renv, NULL);
    for (int i = 0; i < N_WARM; i++) {
        ph_execution_result *r = NULL;
        double s = bench_now_ms();
        ph_environment_execute(lenv, &g_cmd, &r, NULL);
        t[i] = bench_now_ms() - s;
        ph_execution_result_free(&r);
    }
    double warm_local = bench_quantile(t, N_WARM, 0.5);
    for (int i = 0; i < N_WARM; i++) {
        ph_execution_result *r = NULL;
        double s = bench_now_ms();
        ph_execd_environment_execute(renv, &g_cmd, &r, NULL);
        t[i] = bench_now_ms() - s;
        ph_execution_result_free(&r);
    }
    double warm_remote = bench_quantile(t, N_WARM, 0.5);
    ph_environment_destroy(&lenv);
    ph_execd_environment_destroy(&renv);

    pthread_t th[LEASES];
    double s = bench_now_s();
    for (int i = 0; i < LEASES; i++)
        pthread_create(&th[i], NULL, lease_worker, (void *)(intptr_t)i);
    for (int i = 0; i < LEASES; i++)
        pthread_join(th[i], NULL);
    double wall = bench_now_s() - s;
    int ok = 0;
    for (int i = 0; i < LEASES; i++)
        ok += g_ok[i];

    printf("bench_execd (fake mechanism, this machine)\n");
    printf("  create+execute(true)+destroy  in-process %7.2f ms   through execd %7.2f ms  "
           "(median of %d)\n", cold_local, cold_remote, N_COLD);
    printf("  warm execute(true)            in-process %7.2f ms   through execd %7.2f ms  "
           "added %+.2f ms (median of %d; target <= 2 ms)\n", warm_local, warm_remote,
           warm_remote - warm_local, N_WARM);
    printf("  %d leases x %d commands (4 daemon threads): %d/%d ok, %.1f commands/s, "
           "p50 %.2f ms, p99 %.2f ms\n", LEASES, PER_LEASE, ok, LEASES * PER_LEASE,
           LEASES * PER_LEASE / wall, bench_quantile(g_lat, LEASES * PER_LEASE, 0.5),
           bench_quantile(g_lat, LEASES * PER_LEASE, 0.99));

    ph_execd_service_close(&remote);
    ph_execution_service_close(&local);
    kill(daemon, SIGTERM);
    waitpid(daemon, NULL, 0);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)!system(cmd);
    return ok == LEASES * PER_LEASE ? 0 : 1;
}
