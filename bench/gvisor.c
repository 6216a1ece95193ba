/* gvisor.c - bench_gvisor: what real isolation costs.
 *
 *  1. lifecycle: create + execute `true` + destroy, median of N cycles, on
 *     gvisor and on fake (the baseline without isolation), with the split;
 *  2. warm execute: `true` through ph_environment_execute on a running gvisor
 *     environment, median and p90 of M runs (target <= 60 ms median), and
 *     the floor: a bare `runsc exec` of /bin/true in the same sandbox;
 *  3. egress: 100 MB read inside the sandbox (busybox nc, small reads)
 *     through pinhole-forwarder from a unix socket served on the host (the
 *     proxy's place), against reading the same socket directly on the host.
 *     The download through the real pinhole-proxy, with a reader that reads
 *     64 KiB at a time, is bench_gvisor_proxy (bench/gvisor_proxy.sh).
 * Prints figures and ratios measured in the same run; asserts nothing.
 *
 * Usage: bench_gvisor [--cycles N] [--runs M] [--megabytes K] [--help]
 * Exit codes: 0 done, 1 a mechanism failed, 2 usage, 77 gvisor unavailable.
 * Needs root, runsc and a root filesystem (see docs/sandbox-gvisor.md).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/sandbox.h"
#include "sandbox-int.h"

#include "bench_util.h"

static void die(const char *what, const ph_diag *d)
{
    fprintf(stderr, "bench_gvisor: %s: %s\n", what, d->message);
    exit(1);
}

static ph_execution_service *open_service(ph_sandbox_mechanism m, const char *state_dir)
{
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = m,
                             .hard_cap_ms = 60000,
                             .state_dir = state_dir};
    ph_execution_service *svc = NULL;
    ph_diag d = {0};
    if (ph_execution_service_open(&cfg, &svc, &d) != PH_OK)
        die("service", &d);
    return svc;
}

static ph_environment *create_env(ph_execution_service *svc, ph_sandbox_mechanism m,
                                  const char *socket_path)
{
    ph_environment_spec spec = {.tenant = "bench", .lease = "bench", .mechanism = m};
    ph_sandbox_limits_init(&spec.limits);
    if (socket_path != NULL) {
        spec.network.grant_token = "bench.grant";
        spec.network.proxy_socket_path = socket_path;
        spec.network.proxy_port = 3128;
    }
    ph_environment *env = NULL;
    ph_diag d = {0};
    if (ph_environment_create(svc, &spec, &env, &d) != PH_OK)
        die("create", &d);
    return env;
}

static ph_execution_result *run(ph_environment *env, const char *const *argv)
{
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = 60,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = NULL;
    ph_diag d = {0};
    if (ph_environment_execute(env, &cmd, &r, &d) != PH_OK)
        die("execute", &d);
    return r;
}

static void lifecycle(ph_sandbox_mechanism m, const char *state_dir, int cycles)
{
    ph_execution_service *svc = open_service(m, state_dir);
    double *total = calloc((size_t)cycles, sizeof *total);
    double *c = calloc((size_t)cycles, sizeof *c), *e = calloc((size_t)cycles, sizeof *e),
           *d = calloc((size_t)cycles, sizeof *d);
    const char *argv[] = {"true", NULL};
    for (int i = 0; i < cycles; i++) {
        double t0 = bench_now_ms();
        ph_environment *env = create_env(svc, m, NULL);
        double t1 = bench_now_ms();
        ph_execution_result *r = run(env, argv);
        double t2 = bench_now_ms();
        ph_environment_destroy(&env);
        double t3 = bench_now_ms();
        ph_execution_result_free(&r);
        c[i] = t1 - t0, e[i] = t2 - t1, d[i] = t3 - t2, total[i] = t3 - t0;
    }
    printf("lifecycle %-6s create+execute(true)+destroy median %8.1f ms  "
           "(create %.1f, execute %.1f, destroy %.1f; %d cycles)\n",
           ph_sandbox_mechanism_name(m), bench_quantile(total, cycles, 0.5), bench_quantile(c, cycles, 0.5),
           bench_quantile(e, cycles, 0.5), bench_quantile(d, cycles, 0.5), cycles);
    free(total), free(c), free(e), free(d);
    ph_execution_service_close(&svc);
}

/* The floor under execute: runsc exec of /bin/true with the same process
 * document shape, nothing of the service around it. */
static double bare_runsc_exec_ms(const char *state_dir, const char *env_id, int runs)
{
    char root[1024], json[1024], cmd[4096];
    snprintf(root, sizeof root, "%s/%s/gvisor/runsc", state_dir, env_id);
    snprintf(json, sizeof json, "%s/%s/gvisor/bundle/bench-true.json", state_dir, env_id);
    FILE *f = fopen(json, "w");
    if (f == NULL)
        return -1;
    fputs("{\"terminal\":false,\"user\":{\"uid\":1000,\"gid\":1000},\"args\":[\"/bin/true\"],"
          "\"env\":[\"PATH=/bin\",\"HOME=/workspace\"],\"cwd\":\"/workspace\"}",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "runsc --root '%s' --platform=ptrace --network=none exec --process '%s' %s",
             root, json, env_id);
    double *v = calloc((size_t)runs, sizeof *v);
    for (int i = 0; i < runs; i++) {
        double t0 = bench_now_ms();
        if (system(cmd) != 0) {
            free(v);
            return -1;
        }
        v[i] = bench_now_ms() - t0;
    }
    double med = bench_quantile(v, runs, 0.5);
    free(v);
    unlink(json);
    return med;
}

static void warm_execute(const char *state_dir, int runs)
{
    ph_execution_service *svc = open_service(PH_MECHANISM_GVISOR, state_dir);
    ph_environment *env = create_env(svc, PH_MECHANISM_GVISOR, NULL);
    const char *argv[] = {"true", NULL};
    double *v = calloc((size_t)runs, sizeof *v);
    ph_execution_result_free(&(ph_execution_result *){run(env, argv)}); /* warm up */
    for (int i = 0; i < runs; i++) {
        double t0 = bench_now_ms();
        ph_execution_result *r = run(env, argv);
        v[i] = bench_now_ms() - t0;
        ph_execution_result_free(&r);
    }
    double med = bench_quantile(v, runs, 0.5), p90 = bench_quantile(v, runs, 0.9);
    double floor_ms = bare_runsc_exec_ms(state_dir, ph_environment_id(env), runs);
    printf("warm execute gvisor true: median %.1f ms, p90 %.1f ms (target <= 60 ms median; "
           "%d runs)\n",
           med, p90, runs);
    if (floor_ms > 0)
        printf("  floor: bare runsc exec /bin/true median %.1f ms; the port adds %.1f ms "
               "(wrapper, snapshots, process document)\n",
               floor_ms, med - floor_ms);
    free(v);
    ph_environment_destroy(&env);
    ph_execution_service_close(&svc);
}

/* ---- egress through the forwarder ---- */

typedef struct source {
    int listener;
    size_t bytes;
    size_t sent_last; /* bytes the last connection took */
    int connections;
    pthread_t thread;
} source;

/* Serves `bytes` zero bytes to each of `connections` clients, then closes. */
static void *source_main(void *arg)
{
    source *s = arg;
    static char block[1 << 16];
    for (int k = 0; k < s->connections; k++) {
        int c = accept(s->listener, NULL, NULL);
        if (c < 0)
            return NULL;
        size_t left = s->bytes;
        while (left > 0) {
            ssize_t n = send(c, block, left < sizeof block ? left : sizeof block, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            left -= (size_t)n;
        }
        s->sent_last = s->bytes - left;
        close(c);
    }
    return NULL;
}

static double drain_direct_ms(const char *path, size_t bytes)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path)
        return -1;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    double t0 = bench_now_ms();
    if (connect(fd, (struct sockaddr *)&sun, sizeof sun) != 0) {
        close(fd);
        return -1;
    }
    static char buf[1 << 16];
    size_t got = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        got += (size_t)n;
    close(fd);
    return got == bytes ? bench_now_ms() - t0 : -1;
}

static void egress(const char *state_dir, size_t megabytes)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/source.sock", state_dir);
    source s = {.bytes = megabytes << 20, .connections = 2};
    s.listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sun.sun_path) {
        fprintf(stderr, "bench_gvisor: socket path too long\n");
        exit(1);
    }
    memcpy(sun.sun_path, path, strlen(path) + 1);
    if (bind(s.listener, (struct sockaddr *)&sun, sizeof sun) != 0 || listen(s.listener, 4) != 0) {
        perror("bench_gvisor: source socket");
        exit(1);
    }
    chmod(path, 0777);
    pthread_create(&s.thread, NULL, source_main, &s);
    double direct = drain_direct_ms(path, s.bytes);

    ph_execution_service *svc = open_service(PH_MECHANISM_GVISOR, state_dir);
    ph_environment *env = create_env(svc, PH_MECHANISM_GVISOR, path);
    char script[256];
    /* Straight to /dev/null: busybox wc or dd would add thousands of small
     * reads, which under ptrace cost more than the relay itself. The source
     * counts what was delivered. */
    snprintf(script, sizeof script, "nc 127.0.0.1 3128 </dev/null >/dev/null");
    const char *argv[] = {"sh", "-c", script, NULL};
    double t0 = bench_now_ms();
    ph_execution_result *r = run(env, argv);
    double through = bench_now_ms() - t0;
    pthread_join(s.thread, NULL);
    size_t got = r->exited && r->exit_code == 0 ? s.sent_last : 0;
    close(s.listener);
    unlink(path);
    if (got != s.bytes || direct <= 0) {
        printf("egress: transfer incomplete (%zu of %zu bytes): %.200s %.200s\n", got, s.bytes,
               r->out.data ? (const char *)r->out.data : "", r->err.data ? (const char *)r->err.data : "");
    } else {
        double mb = (double)megabytes;
        printf("egress %zu MB: busybox nc through forwarder inside gvisor %.0f MB/s (%.0f ms, "
               "includes the command), host reading the socket directly %.0f MB/s; ratio %.2f\n",
               megabytes, mb / (through / 1e3), through, mb / (direct / 1e3),
               (mb / (through / 1e3)) / (mb / (direct / 1e3)));
    }
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
    ph_execution_service_close(&svc);
}

static void usage(FILE *out)
{
    fputs("usage: bench_gvisor [--cycles N] [--runs M] [--megabytes K]\n"
          "  --cycles N     create+execute+destroy cycles per mechanism (default 5)\n"
          "  --runs M       warm executes (default 30)\n"
          "  --megabytes K  egress transfer size (default 100)\n"
          "Exit codes: 0 done, 1 failure, 2 usage, 77 gvisor unavailable.\n",
          out);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"cycles", required_argument, NULL, 'c'},
                                         {"runs", required_argument, NULL, 'r'},
                                         {"megabytes", required_argument, NULL, 'm'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int cycles = 5, runs = 30, megabytes = 100, c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'c': cycles = atoi(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 'm': megabytes = atoi(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (cycles < 1 || runs < 1 || megabytes < 1 || optind != argc) {
        usage(stderr);
        return 2;
    }
    ph_diag d = {0};
    if (ph_sandbox_mechanism_available(PH_MECHANISM_GVISOR, &d) != PH_OK) {
        printf("SKIP: gvisor is not available here: %s\n", d.message);
        return 77;
    }
    char state_dir[] = "/tmp/pinhole-bench-gvisor-XXXXXX";
    if (mkdtemp(state_dir) == NULL) {
        perror("bench_gvisor: mkdtemp");
        return 1;
    }
    lifecycle(PH_MECHANISM_FAKE, state_dir, cycles);
    lifecycle(PH_MECHANISM_GVISOR, state_dir, cycles);
    warm_execute(state_dir, runs);
    egress(state_dir, (size_t)megabytes);
    rmdir(state_dir);
    return 0;
}
