/* dns_async.c - the guard's resolver driver (pinhole/resolve.h) driven from
 * a worker's libevent loop: one event per descriptor the resolver asks to
 * watch, one timer it arms. The rules, the cache, the deadlines and the
 * ownership of queries are the guard's; this file only moves readiness in
 * and answers out (see the ownership rule at struct px_dns_query).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "dns_async.h"
#include "metrics.h"
#include "pinhole/diag.h"

typedef struct sock_watch {
    int fd;
    struct event *ev;
} sock_watch;

struct px_dns {
    struct event_base *base;
    ph_resolver *resolver;
    struct event *timer;
    sock_watch *socks;
    size_t nsocks, capsocks;
};

/*
 * Ownership: a px_dns_query is the caller's storage (the upstream's live
 * state) for one guard query, live from px_dns_resolve until either
 * resolved_cb, which reads it before the caller's callback runs and never
 * after, or px_dns_cancel (which cancels the guard query, so resolved_cb
 * never runs for it). resolved_cb runs only from ph_resolver_process called
 * by this file's events (the guard's rule at struct ph_resolve_query):
 * never inside px_dns_resolve, inside c-ares or inside px_dns_cancel.
 * Queries still live at px_dns_free belong to connections that are gone
 * with the worker; the guard frees its side, px_dns_free does not run their
 * callbacks.
 */

/* ---- loop integration ---------------------------------------------------- */

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct px_dns *d = arg;
    ph_resolver_process(d->resolver, -1, 0);
}

static void sock_cb(evutil_socket_t fd, short what, void *arg)
{
    struct px_dns *d = arg;
    ph_resolver_process(d->resolver, fd,
                        ((what & EV_READ) ? PH_RESOLVER_READ : 0u) |
                            ((what & EV_WRITE) ? PH_RESOLVER_WRITE : 0u));
}

static void loop_timer(void *arg, long ms)
{
    struct px_dns *d = arg;
    if (ms < 0) {
        evtimer_del(d->timer);
        return;
    }
    if (ms == 0) {
        /* Answers are ready (a cache hit): run them in this loop pass
         * rather than after another epoll_wait, as a zero timer would. */
        evtimer_del(d->timer);
        event_active(d->timer, EV_TIMEOUT, 1);
        return;
    }
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    evtimer_add(d->timer, &tv);
}

static void loop_watch(void *arg, int fd, unsigned events)
{
    struct px_dns *d = arg;
    size_t i;
    for (i = 0; i < d->nsocks && d->socks[i].fd != fd; i++)
        ;
    short flags = (short)(((events & PH_RESOLVER_READ) ? EV_READ : 0) |
                          ((events & PH_RESOLVER_WRITE) ? EV_WRITE : 0));
    if (i < d->nsocks) {
        /* Freeing the event whose callback (sock_cb) is running is safe:
         * libevent touches it no more once the callback was entered. */
        if (d->socks[i].ev)
            event_free(d->socks[i].ev);
        if (flags == 0) {
            d->socks[i] = d->socks[--d->nsocks];
            return;
        }
    } else {
        if (flags == 0)
            return;
        if (d->nsocks == d->capsocks) {
            size_t cap = d->capsocks ? d->capsocks * 2 : 8;
            sock_watch *n = realloc(d->socks, cap * sizeof *n);
            if (n == NULL)
                return; /* the query then times out: fail closed */
            d->socks = n;
            d->capsocks = cap;
        }
        i = d->nsocks++;
        d->socks[i].fd = fd;
    }
    d->socks[i].ev = event_new(d->base, fd, (short)(flags | EV_PERSIST), sock_cb, d);
    if (d->socks[i].ev)
        event_add(d->socks[i].ev, NULL);
}

/* ---- queries ------------------------------------------------------------- */

static void resolved_cb(void *arg, const ph_resolve_answer *ans)
{
    px_dns_query *pq = arg;
    if (!ans->from_cache)
        px_metrics_dns_latency((double)ans->elapsed_us / 1e6);
    pq->cb(ans, pq->arg); /* may free pq */
}

bool px_dns_resolve(struct px_dns *d, px_dns_query *pq, const char *host, uint16_t port,
                    px_dns_cb cb, void *arg)
{
    pq->cb = cb;
    pq->arg = arg;
    pq->q = NULL;
    return ph_resolver_start(d->resolver, host, port, resolved_cb, pq, &pq->q, NULL) == PH_OK;
}

void px_dns_cancel(px_dns_query *pq)
{
    ph_resolver_cancel(pq->q);
}

ph_status px_dns_new(struct event_base *base, const px_config *cfg, struct px_dns **out,
                     ph_diag *diag)
{
    struct px_dns *d = calloc(1, sizeof *d);
    if (d == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    d->base = base;
    if ((d->timer = evtimer_new(base, timer_cb, d)) == NULL) {
        free(d);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    ph_resolver_config rc = {
        .servers = cfg->dns_servers,
        .timeout_ms = (unsigned)cfg->dns_timeout_ms,
        .cache_entries = (unsigned)cfg->dns_cache_entries,
        .cache_max_ttl_s = (unsigned)cfg->dns_cache_max_ttl_s,
        .negative_ttl_s = (unsigned)cfg->dns_negative_ttl_s,
    };
    ph_resolver_loop loop = { loop_watch, loop_timer, d };
    ph_status st = ph_resolver_new(&rc, &loop, &d->resolver, diag);
    if (st != PH_OK) {
        event_free(d->timer);
        free(d->socks);
        free(d);
        return st;
    }
    *out = d;
    return PH_OK;
}

void px_dns_free(struct px_dns **dp)
{
    struct px_dns *d = *dp;
    if (d == NULL)
        return;
    /* Frees the guard's queries and closes its sockets (which asks
     * loop_watch to drop their events). */
    ph_resolver_free(&d->resolver);
    for (size_t i = 0; i < d->nsocks; i++)
        if (d->socks[i].ev)
            event_free(d->socks[i].ev);
    free(d->socks);
    event_free(d->timer);
    free(d);
    *dp = NULL;
}
