/* main.c - pinhole-proxy: parse the settings, load the policy, bind, drop
 * privileges, start one worker per core, serve until SIGTERM/SIGINT. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/http.h>
#include <event2/thread.h>
#include <event2/event.h>

#include "admin.h"
#include "config.h"
#include "drain.h"
#include "listener.h"
#include "log_json.h"
#include "pinhole/addr.h"
#include "pinhole/diag.h"
#include "pinhole/file_atomic.h"
#include "pinhole/unix_listen.h"
#include "pinhole/version.h"
#include "privdrop.h"
#include "proxy_limits.h"
#include "reload.h"
#include "sockaddr.h"
#include "worker.h"

static void print_version(void)
{
    printf("pinhole-proxy %s\n", ph_version());
    if (ph_build_is_test_loopback())
        printf("build option: PINHOLE_TEST_LOOPBACK_UPSTREAM (TEST BUILD: loopback upstreams "
               "127.0.0.0/8 and ::1 are NOT denied; never deploy this binary)\n");
    else
        printf("build options: none (loopback upstreams denied)\n");
}

static int fail(int code, const char *what, const ph_diag *d)
{
    fprintf(stderr, "pinhole-proxy: %s%s%s\n", what, d->message[0] ? ": " : "", d->message);
    return code;
}

/* Descriptors kept beside the two per connection: per worker for its
 * resolver (c-ares' UDP and TCP sockets per server), and for the process
 * (reloads open the table and the key file, admin connections, the accept
 * of a connection refused at a limit, the ready file). */
#define FD_RESERVE_PER_WORKER 8
#define FD_RESERVE_FIXED 16

/* Raises the soft descriptor limit to the hard one. Returns the soft limit
 * now in force. */
static long raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    rlim_t before = rl.rlim_cur;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            rl.rlim_cur = before;
    }
    px_log_event("info", "limits", "descriptor limit: soft %llu -> %llu (hard %llu)",
                 (unsigned long long)before, (unsigned long long)rl.rlim_cur,
                 (unsigned long long)rl.rlim_max);
    return rl.rlim_cur > (rlim_t)LONG_MAX / 2 ? LONG_MAX / 2 : (long)rl.rlim_cur;
}

/* Descriptors open now (listeners, event bases, the policy's files). */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return 64; /* no procfs: assume a generous base */
    long n = 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", "..", and the directory's own descriptor */
}

/* Writes the bound addresses to path atomically (pinhole/file_atomic.h),
 * one per line: "listen ADDR:PORT", "unix PATH", "admin ADDR:PORT". */
static ph_status write_ready_file(const char *path, const px_sockaddr *addrs, int n,
                                  const char *unix_path, const px_sockaddr *admin, ph_diag *diag)
{
    char a[PX_ADDR_MAX], *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "%s: %s", path, strerror(errno));
    for (int i = 0; i < n; i++) {
        ph_sockaddr_text((const struct sockaddr *)&addrs[i].ss, a, sizeof a);
        fprintf(f, "listen %s\n", a);
    }
    if (unix_path[0])
        fprintf(f, "unix %s\n", unix_path);
    if (admin) {
        ph_sockaddr_text((const struct sockaddr *)&admin->ss, a, sizeof a);
        fprintf(f, "admin %s\n", a);
    }
    if (fclose(f) != 0) {
        free(text);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "%s: %s", path, strerror(errno));
    }
    ph_status st = ph_file_write_atomic(path, text, len, 0644, PH_WRITE_REPLACE, diag);
    free(text);
    return st;
}

typedef struct worker_set {
    px_worker *w;
    int n;
} worker_set;

/* The policy-change hook: every worker rechecks its open connections. */
static void recheck_workers(void *arg)
{
    worker_set *set = arg;
    for (int i = 0; i < set->n; i++)
        px_worker_request_recheck(&set->w[i]);
}

int main(int argc, char **argv)
{
    px_config cfg;
    ph_diag diag = { 0 };
    int action = 0;
    px_config_defaults(&cfg);
    if (px_config_from_args(argc, argv, &cfg, &action, &diag) != PH_OK)
        return fail(PX_EXIT_USAGE, "configuration", &diag);
    if (action == 'h') {
        px_config_usage(argv[0]);
        return PX_EXIT_OK;
    }
    if (action == 'v') {
        print_version();
        return PX_EXIT_OK;
    }

    signal(SIGPIPE, SIG_IGN);
    px_log_route_libevent();
    /* The guard's resolver initialises its DNS library itself. */
    if (evthread_use_pthreads() != 0) {
        fprintf(stderr, "pinhole-proxy: cannot initialise libevent threads\n");
        return PX_EXIT_INTERNAL;
    }
    if (px_policy_init(&cfg, &diag) != PH_OK)
        return fail(PX_EXIT_STARTUP, "loading the policy", &diag);
    if (action == 'c') {
        printf("configuration ok\n");
        px_policy_shutdown();
        return PX_EXIT_OK;
    }
    long nofile = raise_nofile();
    if (ph_build_is_test_loopback())
        px_log_event("warning", "test_build",
                     "PINHOLE_TEST_LOOPBACK_UPSTREAM build: loopback upstreams are allowed; "
                     "for tests only, never deploy");

    int nworkers = (int)cfg.workers;
    if (nworkers <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nworkers = n > 0 ? (int)n : 1;
    }
    /* Every failure below goes through the cleanup at the end: a start-up
     * that fails (a held address, say) exits with nothing left allocated. */
    int code = PX_EXIT_OK, started = 0;
    struct px_admin *admin = NULL;
    px_sockaddr admin_addr, addrs[PX_LISTEN_MAX];
    ph_unix_listener unix_l = {.fd = -1};
    int unix_fd = -1;
    struct event_base *main_base = event_base_new();
    px_worker *workers = calloc((size_t)nworkers, sizeof *workers);
    if (main_base == NULL || workers == NULL) {
        fprintf(stderr, "pinhole-proxy: out of memory\n");
        code = PX_EXIT_INTERNAL;
        goto out;
    }
    for (int i = 0; i < cfg.listen_count; i++)
        if (px_sockaddr_parse(cfg.listen[i], &addrs[i], &diag) != PH_OK) {
            code = fail(PX_EXIT_USAGE, "configuration", &diag);
            goto out;
        }
    if (cfg.unix_socket[0] &&
        (unix_fd = px_listen_unix(cfg.unix_socket, cfg.unix_socket_mode, &unix_l, &diag)) < 0) {
        code = fail(PX_EXIT_STARTUP, "unix listener", &diag);
        goto out;
    }
    if (cfg.admin_listen[0] &&
        (admin = px_admin_start(main_base, cfg.admin_listen, cfg.max_admin_connections,
                                &admin_addr, &diag)) == NULL) {
        code = fail(PX_EXIT_STARTUP, "admin listener", &diag);
        goto out;
    }
    for (int i = 0; i < nworkers; i++)
        if (px_worker_init(&workers[i], i, &cfg, addrs, unix_fd, &diag) != PH_OK) {
            code = fail(PX_EXIT_STARTUP, "starting workers", &diag);
            goto out;
        }

    /* Every connection needs two descriptors (client, upstream); what the
     * limit leaves beside the reserve caps connections, so the resolver and
     * the dial always find one and a flood is answered 503, not EMFILE. */
    long reserve = open_fds() + FD_RESERVE_FIXED + FD_RESERVE_PER_WORKER * (long)nworkers;
    long fd_cap = nofile > reserve + 2 ? (nofile - reserve) / 2 : 1;
    px_limits_set_fd_cap(fd_cap);
    px_log_event(fd_cap < cfg.max_connections ? "warning" : "info", "limits",
                 "%ld descriptors: %ld reserved, room for %ld connections (max_connections %ld)",
                 nofile, reserve, fd_cap, cfg.max_connections);
    if (cfg.ready_file[0] &&
        write_ready_file(cfg.ready_file, addrs, cfg.listen_count, cfg.unix_socket,
                         admin ? &admin_addr : NULL, &diag) != PH_OK) {
        code = fail(PX_EXIT_STARTUP, "ready file", &diag);
        goto out;
    }
    if (px_drop_privileges(cfg.user, &diag) != PH_OK) {
        code = fail(PX_EXIT_STARTUP, "dropping privileges", &diag);
        goto out;
    }
    for (; started < nworkers; started++)
        if (px_worker_start(&workers[started]) != PH_OK) {
            code = fail(PX_EXIT_INTERNAL, "starting worker threads", &diag);
            for (int i = 0; i < started; i++)
                px_worker_request_drain(&workers[i]);
            goto out;
        }

    worker_set set = { workers, nworkers };
    px_policy_on_change(recheck_workers, &set);

    char id[PH_TABLE_ID_HEX_LEN + 1], listening[PX_LISTEN_MAX * PX_ADDR_MAX] = "";
    char admin_text[PX_ADDR_MAX];
    size_t used = 0;
    for (int i = 0; i < cfg.listen_count; i++) {
        char a[PX_ADDR_MAX];
        ph_sockaddr_text((const struct sockaddr *)&addrs[i].ss, a, sizeof a);
        used += (size_t)snprintf(listening + used, sizeof listening - used, "%s%s", i ? " " : "", a);
    }
    if (admin)
        ph_sockaddr_text((const struct sockaddr *)&admin_addr.ss, admin_text, sizeof admin_text);
    else
        snprintf(admin_text, sizeof admin_text, "off");
    px_policy_id(id);
    px_log_event("info", "start", "listening on %s%s%s with %d workers, admin %s, policy %s",
                 listening, cfg.unix_socket[0] ? " and " : "", cfg.unix_socket, nworkers,
                 admin_text, id);

    if (px_run_main_loop(main_base, workers, nworkers, &cfg) != 0)
        code = PX_EXIT_INTERNAL;
    px_policy_on_change(NULL, NULL);
out:
    for (int i = 0; workers && i < nworkers; i++)
        px_worker_join_and_free(&workers[i]);
    if (started == nworkers && code != PX_EXIT_STARTUP)
        px_log_event("info", "stopped", "drained");
    free(workers);
    px_admin_free(&admin);
    if (main_base)
        event_base_free(main_base);
    if (unix_fd >= 0) {
        close(unix_fd);
        (void)ph_unix_listen_unlink(&unix_l); /* only while it is still ours */
    }
    px_policy_shutdown();
    return code;
}
