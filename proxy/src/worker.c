/* worker.c - one libevent loop per thread, with its own listeners (one
 * SO_REUSEPORT socket per TCP address), its own resolver (the guard's driver, with its DNS cache)
 * and its own connections. Workers share nothing but atomics. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "accept_proxied.h"
#include "config.h"
#include "conn.h"
#include "dns_async.h"
#include "listener.h"
#include "log_json.h"
#include "pinhole/diag.h"
#include "sockaddr.h"
#include "worker.h"

ph_status px_worker_init(px_worker *w, int id, const px_config *cfg, px_sockaddr *addrs,
                         int unix_fd, ph_diag *diag)
{
    memset(w, 0, sizeof *w);
    w->id = id;
    w->cfg = cfg;
    /* The epoll changelist folds the enable/disable pairs of a request's
     * life into one epoll_ctl per descriptor and loop iteration. */
    struct event_config *ec = event_config_new();
    if (ec)
        event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    w->base = ec ? event_base_new_with_config(ec) : NULL;
    if (ec)
        event_config_free(ec);
    if (w->base == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "event_base_new failed");
    ph_status st = px_dns_new(w->base, cfg, &w->dns, diag);
    if (st != PH_OK)
        return st;
    for (int i = 0; i < cfg->listen_count; i++) {
        /* Worker 0 binds first (and learns the port the kernel chose for
         * port 0); the others join that port's SO_REUSEPORT group. */
        int fd = px_listen_tcp(&addrs[i], id == 0, diag);
        if (fd < 0)
            return PH_E_IO;
        w->listeners[w->nlisteners] =
            px_listener_attach(w, fd, true, cfg->proxy_protocol_count > 0);
        if (w->listeners[w->nlisteners] == NULL) {
            close(fd);
            return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory (listener)");
        }
        w->nlisteners++;
    }
    /* The unix socket cannot be SO_REUSEPORT-bound per worker; every worker
     * accepts from the one socket (non-blocking: a lost race is EAGAIN). */
    if (unix_fd >= 0) {
        w->listeners[w->nlisteners] = px_listener_attach(w, unix_fd, false, false);
        if (w->listeners[w->nlisteners] == NULL)
            return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory (listener)");
        w->nlisteners++;
    }
    return PH_OK;
}

static void *worker_main(void *arg)
{
    px_worker *w = arg;
    /* The connection lines of a loop pass go out with one write(2)
     * (log_json.h); without memory for the event, each at once. The event
     * is this thread's, freed once its batch is written. */
    struct event *flush = event_new(w->base, -1, 0, px_log_flush_cb, NULL);
    px_log_batch(flush);
    event_base_dispatch(w->base);
    px_log_batch(NULL);
    if (flush != NULL)
        event_free(flush);
    atomic_store(&w->finished, true);
    return NULL;
}

bool px_worker_finished(px_worker *w)
{
    return atomic_load(&w->finished);
}

ph_status px_worker_start(px_worker *w)
{
    return pthread_create(&w->thread, NULL, worker_main, w) == 0 ? PH_OK : PH_E_IO;
}

static void stop_listeners(px_worker *w)
{
    for (int i = 0; i < w->nlisteners; i++)
        px_listener_free(&w->listeners[i]);
    w->nlisteners = 0;
}

static void finish_if_idle(px_worker *w)
{
    if (w->draining && w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

static void drain_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_worker *w = arg;
    px_conn_close_all(w);
    event_base_loopexit(w->base, NULL);
}

/* Runs on the worker's own thread. */
static void drain_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_worker *w = arg;
    if (w->draining)
        return;
    w->draining = true;
    stop_listeners(w);
    /* Requests still sending their head get no tunnel now; tunnels finish. */
    px_proxied_close_all(w);
    px_conn_close_idle_heads(w);
    struct timeval tv = { w->cfg->drain_timeout_s, 0 };
    w->drain_deadline = evtimer_new(w->base, drain_deadline_cb, w);
    if (w->drain_deadline)
        evtimer_add(w->drain_deadline, &tv);
    finish_if_idle(w);
}

void px_worker_request_drain(px_worker *w)
{
    event_base_once(w->base, -1, EV_TIMEOUT, drain_cb, w, NULL);
}

/* Runs on the worker's own thread. */
static void recheck_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_worker *w = arg;
    atomic_store(&w->recheck_pending, false); /* a reload from now on asks again */
    px_conn_recheck_all(w);
}

void px_worker_request_recheck(px_worker *w)
{
    /* Reloads in a burst cost one pass: the pass checks against the policy
     * in force when it runs, which is the latest. */
    if (!px_worker_finished(w) && !atomic_exchange(&w->recheck_pending, true))
        event_base_once(w->base, -1, EV_TIMEOUT, recheck_cb, w, NULL);
}

void px_worker_join_and_free(px_worker *w)
{
    if (w->thread)
        pthread_join(w->thread, NULL);
    px_proxied_close_all(w);
    px_conn_close_all(w);
    stop_listeners(w);
    if (w->drain_deadline)
        event_free(w->drain_deadline);
    px_dns_free(&w->dns);
    if (w->base)
        event_base_free(w->base);
    memset(w, 0, sizeof *w);
}
