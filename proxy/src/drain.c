/* drain.c - the main thread's loop: SIGHUP reloads, SIGTERM/SIGINT drain
 * (stop accepting, let tunnels finish up to drain_timeout_s, close the rest)
 * and return so main can exit 0. */
#include <signal.h>
#include <string.h>

#include <event2/event.h>

#include "admin.h"
#include "config.h"
#include "drain.h"
#include "log_json.h"
#include "reload.h"
#include "worker.h"

typedef struct main_ctx {
    struct event_base *base;
    px_worker *workers;
    int nworkers;
    bool draining;
    struct event *poll; /* while draining: have all workers ended? */
} main_ctx;

/* How often the main loop looks whether the workers finished draining. */
#define DRAIN_POLL_MS 50

static void hup_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    (void)arg;
    ph_diag diag = { 0 };
    px_policy_reload(&diag); /* logs and counts a failure itself */
}

static void drain_poll_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    main_ctx *m = arg;
    for (int i = 0; i < m->nworkers; i++)
        if (!px_worker_finished(&m->workers[i]))
            return;
    event_base_loopexit(m->base, NULL);
}

static void term_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    main_ctx *m = arg;
    if (m->draining)
        return;
    m->draining = true;
    px_log_event("info", "drain", "signal %d: no new connections, draining open tunnels",
                 (int)sig);
    px_admin_set_draining();
    for (int i = 0; i < m->nworkers; i++)
        px_worker_request_drain(&m->workers[i]);
    /* The main loop (signals, admin) runs on until every worker ended,
     * when its tunnels are done or at the drain deadline; main then joins
     * them. */
    struct timeval tv = { 0, DRAIN_POLL_MS * 1000 };
    m->poll = event_new(m->base, -1, EV_PERSIST, drain_poll_cb, m);
    if (m->poll == NULL || event_add(m->poll, &tv) != 0)
        event_base_loopexit(m->base, NULL);
}

int px_run_main_loop(struct event_base *base, px_worker *workers, int nworkers,
                     const px_config *cfg)
{
    (void)cfg;
    main_ctx m = { base, workers, nworkers, false, NULL };
    struct event *hup = evsignal_new(base, SIGHUP, hup_cb, &m);
    struct event *term = evsignal_new(base, SIGTERM, term_cb, &m);
    struct event *intr = evsignal_new(base, SIGINT, term_cb, &m);
    if (hup == NULL || term == NULL || intr == NULL)
        return -1;
    evsignal_add(hup, NULL);
    evsignal_add(term, NULL);
    evsignal_add(intr, NULL);
    event_base_dispatch(base);
    event_free(hup);
    /* Freeing the event restored SIGHUP's default action (terminate): the
     * workers are done, but the exit (log, unix socket) is still ahead. */
    signal(SIGHUP, SIG_IGN);
    event_free(term);
    event_free(intr);
    if (m.poll)
        event_free(m.poll);
    return 0;
}
