/* main.c - pinhole-proxy: parse the settings, load the policy, bind, drop
 * privileges, start one worker per core, serve until SIGTERM/SIGINT. */
#include <ares.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/http.h>
#include <event2/thread.h>

#include "pinhole/addr.h"
#include "proxy-int.h"

#ifndef PINHOLE_VERSION
#define PINHOLE_VERSION "0.0.0"
#endif

static void print_version(void)
{
    printf("pinhole-proxy %s\n", PINHOLE_VERSION);
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
    if (ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS || evthread_use_pthreads() != 0) {
        fprintf(stderr, "pinhole-proxy: cannot initialise c-ares or libevent threads\n");
        return PX_EXIT_INTERNAL;
    }
    if (px_policy_init(&cfg, &diag) != PH_OK)
        return fail(PX_EXIT_STARTUP, "loading the policy", &diag);
    if (action == 'c') {
        printf("configuration ok\n");
        px_policy_shutdown();
        return PX_EXIT_OK;
    }
    if (ph_build_is_test_loopback())
        px_log_event("warning", "test_build",
                     "PINHOLE_TEST_LOOPBACK_UPSTREAM build: loopback upstreams are allowed; "
                     "for tests only, never deploy");

    int nworkers = (int)cfg.workers;
    if (nworkers <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        nworkers = n > 0 ? (int)n : 1;
    }
    struct event_base *main_base = event_base_new();
    px_worker *workers = calloc((size_t)nworkers, sizeof *workers);
    if (main_base == NULL || workers == NULL) {
        fprintf(stderr, "pinhole-proxy: out of memory\n");
        return PX_EXIT_INTERNAL;
    }
    int unix_fd = -1;
    if (cfg.unix_socket[0] &&
        (unix_fd = px_listen_unix(cfg.unix_socket, cfg.unix_socket_mode, &diag)) < 0)
        return fail(PX_EXIT_STARTUP, "unix listener", &diag);
    struct evhttp *admin = NULL;
    if (cfg.admin_listen[0] && (admin = px_admin_start(main_base, cfg.admin_listen, &diag)) == NULL)
        return fail(PX_EXIT_STARTUP, "admin listener", &diag);
    for (int i = 0; i < nworkers; i++)
        if (px_worker_init(&workers[i], i, &cfg, unix_fd, &diag) != PH_OK)
            return fail(PX_EXIT_STARTUP, "starting workers", &diag);
    if (px_drop_privileges(cfg.user, &diag) != PH_OK)
        return fail(PX_EXIT_STARTUP, "dropping privileges", &diag);
    for (int i = 0; i < nworkers; i++)
        if (px_worker_start(&workers[i]) != PH_OK)
            return fail(PX_EXIT_INTERNAL, "starting worker threads", &diag);

    char id[PH_TABLE_ID_HEX_LEN + 1];
    px_policy_id(id);
    px_log_event("info", "start", "listening on %s%s%s with %d workers, admin %s, policy %s",
                 cfg.listen[0], cfg.unix_socket[0] ? " and " : "", cfg.unix_socket, nworkers,
                 cfg.admin_listen[0] ? cfg.admin_listen : "off", id);

    int rc = px_run_main_loop(main_base, workers, nworkers, &cfg);
    for (int i = 0; i < nworkers; i++)
        px_worker_join_and_free(&workers[i]);
    px_log_event("info", "stopped", "drained");
    free(workers);
    if (admin)
        evhttp_free(admin);
    event_base_free(main_base);
    if (unix_fd >= 0) {
        close(unix_fd);
        unlink(cfg.unix_socket);
    }
    px_policy_shutdown();
    ares_library_cleanup();
    return rc == 0 ? PX_EXIT_OK : PX_EXIT_INTERNAL;
}
