/* dns_async.c - c-ares driven from a worker's libevent loop, with a bounded
 * per-worker cache.
 *
 * c-ares 1.18 has no ares_process_fds and no event-loop integration of its
 * own: ARES_OPT_SOCK_STATE_CB tells us which sockets to watch, readiness is
 * handed back with ares_process_fd, and one timer, re-armed from
 * ares_timeout after every call into c-ares, drives retransmissions.
 *
 * The rules are the guard's (pinhole/resolve.h): the channel is created with
 * ph_resolver_channel_options and every answer goes through
 * ph_resolve_check_answer, exactly as the worker's blocking resolver does.
 *
 * Every query carries its own deadline (dns_timeout_ms) so a silent server
 * costs the client exactly that long, whatever c-ares' retry schedule.
 * Answers are always delivered from the loop, never synchronously: see the
 * ownership rule at struct px_dns_query.
 * Checked answers are cached by name with their TTL capped; failures
 * (NXDOMAIN, no data, a denied answer) are cached briefly; timeouts are not.
 */
#include <ares.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "diag-int.h"
#include "pinhole/host.h"
#include "pinhole/resolve.h"
#include "proxy-int.h"

#define CACHE_PROBE 8

typedef struct cache_entry {
    char host[PH_HOST_MAX + 1];
    double expires; /* monotonic seconds; 0 = empty */
    ph_reason reason;
    char detail[PH_DIAG_MESSAGE_MAX];
    int naddrs;
    struct {
        sa_family_t family;
        uint8_t bytes[16];
    } addrs[PX_DNS_ADDRS_MAX];
} cache_entry;

typedef struct sock_watch {
    ares_socket_t fd;
    struct event *ev;
    int flags; /* EV_READ | EV_WRITE wanted */
} sock_watch;

struct px_dns {
    struct event_base *base;
    ares_channel channel;
    struct event *timer;
    sock_watch *socks;
    size_t nsocks, capsocks;
    cache_entry *cache;
    size_t ncache;
    const px_config *cfg;
    struct px_dns_query *live; /* queries whose callback has not run */
};

/*
 * Ownership (the one rule every completion path follows):
 *
 * - A px_dns_query belongs to this file from px_dns_resolve until it is
 *   freed, which happens in exactly two places: just before its callback
 *   runs (the callback gets a copy of the answer) and in px_dns_cancel.
 *   The caller's handle is valid until either; nothing else frees a query.
 * - The callback runs only from the query's own event (q->ev), dispatched by
 *   the worker's loop: never inside px_dns_resolve (cache hit, synchronous
 *   c-ares completion, out of memory), never inside c-ares (ares_process_fd,
 *   ares_getaddrinfo, ares_destroy), never inside px_dns_cancel. So no path
 *   can free a query, or the caller's object, while someone up the stack
 *   still holds it.
 * - c-ares owns a px_dns_lookup, not the query: it is the argument of
 *   ares_getaddrinfo and is freed in addrinfo_cb, which c-ares calls exactly
 *   once per lookup (answer, error, ARES_EDESTRUCTION), possibly before
 *   ares_getaddrinfo returns. addrinfo_cb only caches the answer, copies it
 *   into the query if one is still attached (lookup->q, cleared when the
 *   query goes first: cancel, deadline) and activates the query's event.
 */
typedef struct px_dns_lookup {
    struct px_dns *dns;
    struct px_dns_query *q; /* NULL once the query no longer waits for it */
    char host[PH_HOST_MAX + 1];
} px_dns_lookup;

struct px_dns_query {
    struct px_dns *dns;
    px_dns_cb cb;
    void *arg;
    struct event *ev;        /* the deadline, and the delivery of the answer */
    px_dns_lookup *lookup;   /* while c-ares works on it, else NULL */
    bool answered;           /* answer is set; ev is active, not a timer */
    bool miss;               /* went to DNS: counts in the latency metric */
    double started;
    px_dns_answer answer;
    struct px_dns_query *prev, *next;
};

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- loop integration ---------------------------------------------------- */

static void rearm_timer(struct px_dns *d)
{
    struct timeval tv, *t = ares_timeout(d->channel, NULL, &tv);
    if (t)
        evtimer_add(d->timer, t);
    else
        evtimer_del(d->timer);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct px_dns *d = arg;
    ares_process_fd(d->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    rearm_timer(d);
}

static void sock_cb(evutil_socket_t fd, short what, void *arg)
{
    struct px_dns *d = arg;
    ares_process_fd(d->channel, (what & EV_READ) ? fd : ARES_SOCKET_BAD,
                    (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
    rearm_timer(d);
}

static void sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
    struct px_dns *d = data;
    size_t i;
    for (i = 0; i < d->nsocks && d->socks[i].fd != fd; i++)
        ;
    int flags = (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0);
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
    d->socks[i].flags = flags;
    d->socks[i].ev = event_new(d->base, fd, (short)(flags | EV_PERSIST), sock_cb, d);
    if (d->socks[i].ev)
        event_add(d->socks[i].ev, NULL);
}

/* ---- cache --------------------------------------------------------------- */

static uint64_t hash_host(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a: names are canonical, no secret */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static cache_entry *cache_find(struct px_dns *d, const char *host, double now)
{
    if (d->ncache == 0)
        return NULL;
    uint64_t h = hash_host(host);
    for (size_t k = 0; k < CACHE_PROBE; k++) {
        cache_entry *e = &d->cache[(h + k) % d->ncache];
        if (e->expires > now && strcmp(e->host, host) == 0)
            return e;
    }
    return NULL;
}

/* The slot for host: its own, an empty or expired one, else the one that
 * expires soonest in the probe window (bounded: never grows). */
static cache_entry *cache_slot(struct px_dns *d, const char *host, double now)
{
    uint64_t h = hash_host(host);
    cache_entry *victim = NULL;
    for (size_t k = 0; k < CACHE_PROBE; k++) {
        cache_entry *e = &d->cache[(h + k) % d->ncache];
        if (strcmp(e->host, host) == 0 || e->expires <= now)
            return e;
        if (victim == NULL || e->expires < victim->expires)
            victim = e;
    }
    return victim;
}

static void cache_store(struct px_dns *d, const px_dns_answer *a, const char *host, double ttl)
{
    if (d->ncache == 0 || ttl <= 0)
        return;
    double now = now_mono();
    cache_entry *e = cache_slot(d, host, now);
    memset(e, 0, sizeof *e);
    snprintf(e->host, sizeof e->host, "%s", host);
    e->expires = now + ttl;
    e->reason = a->reason;
    snprintf(e->detail, sizeof e->detail, "%s", a->detail);
    e->naddrs = a->naddrs;
    for (int i = 0; i < a->naddrs; i++) {
        const struct sockaddr *sa = (const struct sockaddr *)&a->addrs[i];
        e->addrs[i].family = sa->sa_family;
        if (sa->sa_family == AF_INET)
            memcpy(e->addrs[i].bytes, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        else
            memcpy(e->addrs[i].bytes, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                   16);
    }
}

static void cache_load(const cache_entry *e, px_dns_answer *a)
{
    memset(a, 0, sizeof *a);
    a->reason = e->reason;
    a->naddrs = e->naddrs;
    a->from_cache = true;
    snprintf(a->detail, sizeof a->detail, "%s", e->detail);
    for (int i = 0; i < e->naddrs; i++) {
        if (e->addrs[i].family == AF_INET) {
            struct sockaddr_in *s = (struct sockaddr_in *)&a->addrs[i];
            s->sin_family = AF_INET;
            memcpy(&s->sin_addr, e->addrs[i].bytes, 4);
        } else {
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a->addrs[i];
            s->sin6_family = AF_INET6;
            memcpy(&s->sin6_addr, e->addrs[i].bytes, 16);
        }
    }
}

/* ---- queries ------------------------------------------------------------- */

static void unlink_query(struct px_dns_query *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        q->dns->live = q->next;
    if (q->next)
        q->next->prev = q->prev;
    q->prev = q->next = NULL;
}

/* Frees the query; a lookup still running forgets it. */
static void query_free(struct px_dns_query *q)
{
    if (q->lookup)
        q->lookup->q = NULL;
    unlink_query(q);
    event_free(q->ev);
    free(q);
}

/* Sets the answer and schedules its delivery (never delivers here). */
static void query_answer(struct px_dns_query *q, const px_dns_answer *a)
{
    q->answer = *a;
    q->answered = true;
    evtimer_del(q->ev);
    event_active(q->ev, EV_TIMEOUT, 1);
}

/* The query's event: its answer is ready, or its deadline passed. The only
 * place a callback runs. */
static void query_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct px_dns_query *q = arg;
    if (!q->answered) {
        memset(&q->answer, 0, sizeof q->answer);
        q->answer.reason = PH_REASON_DNS_TIMEOUT;
        snprintf(q->answer.detail, sizeof q->answer.detail, "no answer within %ld ms",
                 q->dns->cfg->dns_timeout_ms);
    }
    if (q->miss)
        px_metrics_dns_latency(now_mono() - q->started);
    px_dns_answer a = q->answer;
    px_dns_cb cb = q->cb;
    void *cb_arg = q->arg;
    query_free(q);
    cb(&a, cb_arg);
}

static void addrinfo_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
    (void)timeouts;
    px_dns_lookup *l = arg;
    struct px_dns *d = l->dns;
    px_dns_answer a;
    memset(&a, 0, sizeof a);
    double ttl = (double)d->cfg->dns_cache_max_ttl_s;

    if (status == ARES_SUCCESS || status == ARES_ENODATA) {
        /* The guard checks every address (and refuses an empty answer). */
        ph_pinned_addrs pinned;
        ph_diag diag = { 0 };
        ph_reason reason = PH_REASON_DNS_FAILURE;
        if (ph_resolve_check_answer(status == ARES_SUCCESS ? res : NULL, 0, &pinned, &reason,
                                    &diag) == PH_OK) {
            a.reason = PH_REASON_ALLOWED;
            for (size_t i = 0; i < pinned.count; i++)
                memcpy(&a.addrs[a.naddrs++], &pinned.addr[i], pinned.addr_len[i]);
            for (struct ares_addrinfo_node *n = res ? res->nodes : NULL; n; n = n->ai_next)
                if (n->ai_ttl >= 0 && (double)n->ai_ttl < ttl)
                    ttl = n->ai_ttl;
        } else {
            a.reason = reason;
            snprintf(a.detail, sizeof a.detail, "%s", diag.message);
            ttl = (double)d->cfg->dns_negative_ttl_s;
        }
    } else if (status == ARES_ETIMEOUT) {
        a.reason = PH_REASON_DNS_TIMEOUT;
        snprintf(a.detail, sizeof a.detail, "%s", ares_strerror(status));
        ttl = 0;
    } else {
        a.reason = PH_REASON_DNS_FAILURE;
        snprintf(a.detail, sizeof a.detail, "%s", ares_strerror(status));
        /* Only an authoritative "no such name" is worth remembering. */
        ttl = status == ARES_ENOTFOUND ? (double)d->cfg->dns_negative_ttl_s : 0;
    }
    if (res)
        ares_freeaddrinfo(res);
    if (status != ARES_EDESTRUCTION && status != ARES_ECANCELLED) {
        cache_store(d, &a, l->host, ttl);
        if (l->q) {
            l->q->lookup = NULL;
            query_answer(l->q, &a);
        }
    } else if (l->q) {
        l->q->lookup = NULL; /* the channel is going away: the deadline answers */
    }
    free(l);
}

struct px_dns_query *px_dns_resolve(struct px_dns *d, const char *host, px_dns_cb cb, void *arg)
{
    double now = now_mono();
    struct px_dns_query *q = calloc(1, sizeof *q);
    if (q == NULL)
        return NULL;
    if ((q->ev = evtimer_new(d->base, query_event_cb, q)) == NULL) {
        free(q);
        return NULL;
    }
    q->dns = d;
    q->cb = cb;
    q->arg = arg;
    q->started = now;
    q->next = d->live;
    if (d->live)
        d->live->prev = q;
    d->live = q;

    cache_entry *e = cache_find(d, host, now);
    if (e) {
        px_dns_answer a;
        cache_load(e, &a);
        query_answer(q, &a);
        return q;
    }
    q->miss = true;
    struct timeval tv = { d->cfg->dns_timeout_ms / 1000, (d->cfg->dns_timeout_ms % 1000) * 1000 };
    evtimer_add(q->ev, &tv);
    px_dns_lookup *l = calloc(1, sizeof *l);
    if (l == NULL) {
        px_dns_answer a = { .reason = PH_REASON_DNS_FAILURE };
        snprintf(a.detail, sizeof a.detail, "out of memory");
        query_answer(q, &a);
        return q;
    }
    l->dns = d;
    l->q = q;
    snprintf(l->host, sizeof l->host, "%s", host);
    q->lookup = l;
    /* Exactly this name, A and AAAA, no sorting (the RFC 6724 sort of 1.18
     * opens a UDP socket per address), no search domains (channel options).
     * addrinfo_cb may run (and free l) before this returns: l is not
     * touched after the call. */
    struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT };
    ares_getaddrinfo(d->channel, host, NULL, &hints, addrinfo_cb, l);
    rearm_timer(d);
    return q;
}

void px_dns_cancel(struct px_dns_query *q)
{
    if (q != NULL)
        query_free(q);
}

ph_status px_dns_new(struct event_base *base, const px_config *cfg, struct px_dns **out,
                     ph_diag *diag)
{
    struct px_dns *d = calloc(1, sizeof *d);
    if (d == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    d->base = base;
    d->cfg = cfg;
    d->ncache = (size_t)cfg->dns_cache_entries;
    if (d->ncache && (d->cache = calloc(d->ncache, sizeof *d->cache)) == NULL) {
        free(d);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory for the DNS cache");
    }
    d->timer = evtimer_new(base, timer_cb, d);
    struct ares_options o;
    int mask = 0;
    memset(&o, 0, sizeof o);
    ph_resolver_channel_options(&o, &mask, (unsigned)cfg->dns_timeout_ms);
    o.sock_state_cb = sock_state_cb;
    o.sock_state_cb_data = d;
    mask |= ARES_OPT_SOCK_STATE_CB;
    int rc = ares_init_options(&d->channel, &o, mask);
    bool have_channel = rc == ARES_SUCCESS;
    ph_status st = PH_OK;
    if (rc != ARES_SUCCESS)
        st = ph_diag_set(diag, PH_E_INVAL, 0, "c-ares: %s", ares_strerror(rc));
    else if (cfg->dns_servers[0])
        st = ph_resolver_set_servers(d->channel, cfg->dns_servers, diag);
    if (st != PH_OK || d->timer == NULL) {
        if (st == PH_OK)
            st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        if (have_channel)
            ares_destroy(d->channel);
        if (d->timer)
            event_free(d->timer);
        free(d->cache);
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
    /* Queries nobody cancelled (their owners are gone with the worker) go
     * first, so the ARES_EDESTRUCTION callbacks below find no query. */
    while (d->live)
        query_free(d->live);
    /* Calls addrinfo_cb for every lookup still running: frees them. */
    ares_destroy(d->channel);
    for (size_t i = 0; i < d->nsocks; i++)
        if (d->socks[i].ev)
            event_free(d->socks[i].ev);
    free(d->socks);
    event_free(d->timer);
    free(d->cache);
    free(d);
    *dp = NULL;
}
