/* resolver.c - the one resolver driver: a c-ares channel, a bounded cache
 * and the queries, driven from any event loop by descriptor readiness and
 * one timer (pinhole/resolve.h).
 *
 * c-ares 1.18 has no ares_process_fds and no loop integration of its own:
 * ARES_OPT_SOCK_STATE_CB says which sockets to watch (forwarded to the
 * loop's watch callback), readiness comes back through ares_process_fd, and
 * the timer is re-armed after every call from the soonest of c-ares'
 * retransmission, the oldest query's deadline and "an answer is ready".
 *
 * Every query carries its own deadline (the resolver's timeout_ms) so a
 * silent server costs the caller exactly that long, whatever c-ares' retry
 * schedule. A lookup that outlives its query still fills the cache.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/diag.h"
#include "pinhole/clock.h"
#include "pinhole/host.h"
#include "resolve-int.h"

#define CACHE_PROBE 8

/* One cached outcome; addresses without port (the query's is set on load). */
typedef struct cache_entry {
    char host[PH_HOST_MAX + 1];
    int64_t expires_ms; /* monotonic; 0 = empty */
    ph_status st;
    ph_reason reason;
    char detail[PH_DIAG_MESSAGE_MAX];
    unsigned naddrs;
    struct {
        sa_family_t family;
        uint8_t bytes[16];
    } addrs[PH_PINNED_MAX];
} cache_entry;

typedef struct query_list {
    struct ph_resolve_query *head, *tail;
} query_list;

struct ph_resolver {
    ares_channel channel;
    ph_resolver_loop loop;
    unsigned timeout_ms, max_ttl_s, negative_ttl_s;
    cache_entry *cache;
    size_t ncache;
    query_list pending; /* waiting for DNS, in deadline order (one timeout for all) */
    query_list ready;   /* answered, waiting for ph_resolver_process to deliver */
    uint64_t seq;       /* numbers ready queries, so one delivery pass is bounded */
};

/*
 * Ownership (the one rule every completion path follows):
 *
 * - A ph_resolve_query belongs to its resolver from ph_resolver_start until
 *   it is freed, which happens in exactly three places: in deliver, just
 *   before its callback runs (the callback gets a copy of the answer); in
 *   ph_resolver_cancel; in ph_resolver_free (callback never run). The
 *   caller's handle is valid until one of them; nothing else frees a query.
 * - The callback runs only from deliver, called by ph_resolver_process (the
 *   loop's own later event): never inside ph_resolver_start (cache hit,
 *   synchronous c-ares completion such as .onion or EMFILE, out of memory),
 *   never inside c-ares (ares_process_fd, ares_getaddrinfo, ares_destroy),
 *   never inside ph_resolver_cancel. A query answered anywhere else is only
 *   moved to the ready list (make_ready) and the timer armed for 0 ms. So no
 *   path can free a query, or the caller's object, while someone up the
 *   stack still holds it.
 * - c-ares owns a lookup, not the query: it is the argument of
 *   ares_getaddrinfo and is freed in addrinfo_cb, which c-ares calls exactly
 *   once per lookup (answer, error, ARES_EDESTRUCTION), possibly before
 *   ares_getaddrinfo returns. addrinfo_cb only caches the outcome and, if a
 *   query is still attached (lookup->q, cleared when the query goes first:
 *   cancel, deadline, free), makes that query ready.
 */
typedef struct lookup {
    ph_resolver *r;
    struct ph_resolve_query *q; /* NULL once the query no longer waits for it */
    char host[PH_HOST_MAX + 1];
} lookup;

struct ph_resolve_query {
    ph_resolver *r;
    ph_resolve_cb cb;
    void *arg;
    lookup *lookup;     /* while c-ares works for it, else NULL */
    bool ready;         /* in r->ready (answer set), else in r->pending */
    uint64_t ready_seq;
    uint16_t port;
    int64_t started_us;
    int64_t deadline_ms;
    ph_resolve_answer answer;
    char name[PH_HOST_MAX + 1];
    struct ph_resolve_query *prev, *next;
};

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_init_rc = ARES_SUCCESS;

static void init_ares_library(void) { ares_init_rc = ares_library_init(ARES_LIB_INIT_ALL); }

/* ---- lists ----------------------------------------------------------------- */

static void list_push(query_list *l, ph_resolve_query *q)
{
    q->next = NULL;
    q->prev = l->tail;
    if (l->tail)
        l->tail->next = q;
    else
        l->head = q;
    l->tail = q;
}

static void list_unlink(query_list *l, ph_resolve_query *q)
{
    if (q->prev)
        q->prev->next = q->next;
    else
        l->head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        l->tail = q->prev;
    q->prev = q->next = NULL;
}

static query_list *list_of(ph_resolve_query *q) { return q->ready ? &q->r->ready : &q->r->pending; }

/* ---- cache ----------------------------------------------------------------- */

static uint64_t hash_host(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a: names are canonical, no secret */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static cache_entry *cache_find(ph_resolver *r, const char *host, int64_t now)
{
    if (r->ncache == 0)
        return NULL;
    uint64_t h = hash_host(host);
    for (size_t k = 0; k < CACHE_PROBE; k++) {
        cache_entry *e = &r->cache[(h + k) % r->ncache];
        if (e->expires_ms > now && strcmp(e->host, host) == 0)
            return e;
    }
    return NULL;
}

/* The slot for host: its own, an empty or expired one, else the one that
 * expires soonest in the probe window (bounded: never grows). */
static cache_entry *cache_slot(ph_resolver *r, const char *host, int64_t now)
{
    uint64_t h = hash_host(host);
    cache_entry *victim = NULL;
    for (size_t k = 0; k < CACHE_PROBE; k++) {
        cache_entry *e = &r->cache[(h + k) % r->ncache];
        if (strcmp(e->host, host) == 0 || e->expires_ms <= now)
            return e;
        if (victim == NULL || e->expires_ms < victim->expires_ms)
            victim = e;
    }
    return victim;
}

static void cache_store(ph_resolver *r, const char *host, const ph_resolve_answer *a,
                        unsigned ttl_s)
{
    if (r->ncache == 0 || ttl_s == 0)
        return;
    int64_t now = ph_monotonic_ms();
    cache_entry *e = cache_slot(r, host, now);
    memset(e, 0, sizeof *e);
    snprintf(e->host, sizeof e->host, "%s", host);
    e->expires_ms = now + (int64_t)ttl_s * 1000;
    e->st = a->st;
    e->reason = a->reason;
    snprintf(e->detail, sizeof e->detail, "%s", a->detail);
    e->naddrs = (unsigned)a->addrs.count;
    for (size_t i = 0; i < a->addrs.count; i++) {
        const struct sockaddr *sa = (const struct sockaddr *)&a->addrs.addr[i];
        e->addrs[i].family = sa->sa_family;
        if (sa->sa_family == AF_INET)
            memcpy(e->addrs[i].bytes, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        else
            memcpy(e->addrs[i].bytes,
                   &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
}

static void set_port(ph_pinned_addrs *a, uint16_t port)
{
    for (size_t i = 0; i < a->count; i++) {
        if (a->addr[i].ss_family == AF_INET)
            ((struct sockaddr_in *)(void *)&a->addr[i])->sin_port = htons(port);
        else
            ((struct sockaddr_in6 *)(void *)&a->addr[i])->sin6_port = htons(port);
    }
}

static void cache_load(const cache_entry *e, ph_resolve_answer *a)
{
    memset(a, 0, sizeof *a);
    a->st = e->st;
    a->reason = e->reason;
    a->from_cache = true;
    snprintf(a->detail, sizeof a->detail, "%s", e->detail);
    a->addrs.count = e->naddrs;
    for (unsigned i = 0; i < e->naddrs; i++) {
        if (e->addrs[i].family == AF_INET) {
            struct sockaddr_in *s = (struct sockaddr_in *)(void *)&a->addrs.addr[i];
            s->sin_family = AF_INET;
            memcpy(&s->sin_addr, e->addrs[i].bytes, 4);
            a->addrs.addr_len[i] = sizeof *s;
        } else {
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)(void *)&a->addrs.addr[i];
            s->sin6_family = AF_INET6;
            memcpy(&s->sin6_addr, e->addrs[i].bytes, 16);
            a->addrs.addr_len[i] = sizeof *s;
        }
    }
}

/* ---- loop integration ------------------------------------------------------ */

static void sock_state_cb(void *data, ares_socket_t fd, int readable, int writable)
{
    ph_resolver *r = data;
    r->loop.watch(r->loop.arg, fd,
                  (readable ? PH_RESOLVER_READ : 0u) | (writable ? PH_RESOLVER_WRITE : 0u));
}

long ph_resolver_timeout_ms(ph_resolver *r)
{
    if (r->ready.head != NULL)
        return 0;
    long ms = -1;
    struct timeval tv, *t = ares_timeout(r->channel, NULL, &tv);
    if (t != NULL)
        ms = (long)t->tv_sec * 1000 + (t->tv_usec + 999) / 1000;
    if (r->pending.head != NULL) {
        int64_t left = r->pending.head->deadline_ms - ph_monotonic_ms();
        if (left < 0)
            left = 0;
        if (ms < 0 || left < ms)
            ms = (long)left;
    }
    return ms;
}

static void arm(ph_resolver *r)
{
    if (r->loop.timer != NULL)
        r->loop.timer(r->loop.arg, ph_resolver_timeout_ms(r));
}

size_t ph_resolver_fds(ph_resolver *r, ph_resolver_fd *fds, size_t cap)
{
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    /* Not ARES_GETSOCK_WRITABLE: for the 16th socket it computes 1 << 31
     * on an int (undefined behaviour); the same bits, unsigned. */
    unsigned bits = (unsigned)ares_getsock(r->channel, socks, ARES_GETSOCK_MAXNUM);
    size_t n = 0;
    for (unsigned i = 0; i < ARES_GETSOCK_MAXNUM && n < cap; i++) {
        unsigned ev = 0;
        if (bits & (1u << i))
            ev |= PH_RESOLVER_READ;
        if (bits & (1u << (i + ARES_GETSOCK_MAXNUM)))
            ev |= PH_RESOLVER_WRITE;
        if (ev == 0)
            continue;
        fds[n].fd = socks[i];
        fds[n].events = ev;
        n++;
    }
    return n;
}

/* ---- queries --------------------------------------------------------------- */

/* Sets q's answer and queues its delivery (never delivers here). */
static void make_ready(ph_resolve_query *q, const ph_resolve_answer *a)
{
    ph_resolver *r = q->r;
    if (q->lookup != NULL) {
        q->lookup->q = NULL;
        q->lookup = NULL;
    }
    q->answer = *a;
    set_port(&q->answer.addrs, q->port);
    int64_t el = ph_monotonic_us() - q->started_us;
    q->answer.elapsed_us = el > 0 ? (uint64_t)el : 0;
    list_unlink(&r->pending, q);
    q->ready = true;
    q->ready_seq = ++r->seq;
    list_push(&r->ready, q);
}

static void query_free(ph_resolve_query *q)
{
    if (q->lookup != NULL)
        q->lookup->q = NULL;
    list_unlink(list_of(q), q);
    free(q);
}

static void addrinfo_cb(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
    (void)timeouts;
    lookup *l = arg;
    ph_resolver *r = l->r;
    if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED) {
        /* The channel is going away; a query still attached is answered by
         * its deadline. Nothing is cached. */
        if (l->q != NULL)
            l->q->lookup = NULL;
    } else {
        ph_resolve_answer a;
        memset(&a, 0, sizeof a);
        unsigned ttl = ph_resolve_outcome(status, res, l->host, 0, r->max_ttl_s,
                                          r->negative_ttl_s, &a);
        cache_store(r, l->host, &a, ttl);
        if (l->q != NULL)
            make_ready(l->q, &a);
    }
    if (res != NULL)
        ares_freeaddrinfo(res);
    free(l);
}

/* Queries whose deadline passed are answered dns_timeout. */
static void expire(ph_resolver *r)
{
    int64_t now = ph_monotonic_ms();
    while (r->pending.head != NULL && r->pending.head->deadline_ms <= now) {
        ph_resolve_query *q = r->pending.head;
        ph_resolve_answer a;
        memset(&a, 0, sizeof a);
        a.st = PH_E_DENIED;
        a.reason = PH_REASON_DNS_TIMEOUT;
        snprintf(a.detail, sizeof a.detail, "no DNS answer for %.200s within %u ms", q->name,
                 r->timeout_ms);
        make_ready(q, &a);
    }
}

/* The only place a callback runs: every query ready before this pass. */
static void deliver(ph_resolver *r)
{
    uint64_t limit = r->seq;
    ph_resolve_query *q;
    while ((q = r->ready.head) != NULL && q->ready_seq <= limit) {
        ph_resolve_answer a = q->answer;
        ph_resolve_cb cb = q->cb;
        void *cb_arg = q->arg;
        query_free(q);
        cb(cb_arg, &a);
    }
}

void ph_resolver_process(ph_resolver *r, int fd, unsigned events)
{
    if (fd >= 0)
        ares_process_fd(r->channel, (events & PH_RESOLVER_READ) ? fd : ARES_SOCKET_BAD,
                        (events & PH_RESOLVER_WRITE) ? fd : ARES_SOCKET_BAD);
    else
        ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timers */
    expire(r);
    deliver(r);
    arm(r);
}

ph_status ph_resolver_start(ph_resolver *r, const char *name, uint16_t port, ph_resolve_cb cb,
                            void *arg, ph_resolve_query **out, ph_diag *diag)
{
    if (out != NULL)
        *out = NULL;
    if (r == NULL || name == NULL || cb == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolve: missing argument");
    size_t len = strnlen(name, PH_HOST_MAX + 1);
    size_t where = 0;
    /* The c-ares 1.18 trap: a literal would be looked up in DNS too. */
    ph_host_error he = ph_host_check(name, len, &where);
    if (he != PH_HOST_OK)
        return ph_diag_set(diag, PH_E_INVAL, where, "refusing to resolve \"%.*s\": %s",
                           (int)(len > PH_HOST_MAX ? PH_HOST_MAX : len), name,
                           ph_host_error_string(he));
    ph_resolve_query *q = calloc(1, sizeof *q);
    if (q == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    q->r = r;
    q->cb = cb;
    q->arg = arg;
    q->port = port;
    q->started_us = ph_monotonic_us();
    q->deadline_ms = ph_monotonic_ms() + r->timeout_ms;
    memcpy(q->name, name, len + 1);
    list_push(&r->pending, q);
    *out = q;

    cache_entry *e = cache_find(r, q->name, ph_monotonic_ms());
    if (e != NULL) {
        ph_resolve_answer a;
        cache_load(e, &a);
        make_ready(q, &a);
        arm(r);
        return PH_OK;
    }
    lookup *l = calloc(1, sizeof *l);
    if (l == NULL) {
        ph_resolve_answer a;
        memset(&a, 0, sizeof a);
        a.st = PH_E_DENIED;
        a.reason = PH_REASON_DNS_FAILURE;
        snprintf(a.detail, sizeof a.detail, "out of memory");
        make_ready(q, &a);
        arm(r);
        return PH_OK;
    }
    l->r = r;
    l->q = q;
    memcpy(l->host, q->name, len + 1);
    q->lookup = l;
    /* Exactly this name, A and AAAA, no sorting, no search domains (channel
     * options). addrinfo_cb may run (and free l) before this returns: l is
     * not touched after the call. */
    struct ares_addrinfo_hints hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_flags = ARES_AI_NOSORT;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    ares_getaddrinfo(r->channel, l->host, NULL, &hints, addrinfo_cb, l);
    arm(r);
    return PH_OK;
}

void ph_resolver_cancel(ph_resolve_query *q)
{
    if (q == NULL)
        return;
    ph_resolver *r = q->r;
    query_free(q);
    arm(r);
}

ph_status ph_resolver_new(const ph_resolver_config *cfg, const ph_resolver_loop *loop,
                          ph_resolver **out, ph_diag *diag)
{
    static const ph_resolver_config defaults = {0};
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolver: missing argument");
    *out = NULL;
    if (cfg == NULL)
        cfg = &defaults;
    pthread_once(&ares_once, init_ares_library);
    if (ares_init_rc != ARES_SUCCESS)
        return ph_diag_set(diag, PH_E_IO, 0, "c-ares: %s", ares_strerror(ares_init_rc));
    ph_resolver *r = calloc(1, sizeof *r);
    if (r == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    if (loop != NULL)
        r->loop = *loop;
    r->timeout_ms = cfg->timeout_ms != 0 ? cfg->timeout_ms : PH_RESOLVE_TIMEOUT_MS_DEFAULT;
    r->max_ttl_s = cfg->cache_max_ttl_s;
    r->negative_ttl_s = cfg->negative_ttl_s;
    r->ncache = cfg->cache_entries;
    if (r->ncache != 0 && (r->cache = calloc(r->ncache, sizeof *r->cache)) == NULL) {
        free(r);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory for the DNS cache");
    }
    struct ares_options o;
    int mask = 0;
    ph_resolver_channel_options(&o, &mask, r->timeout_ms);
    if (r->loop.watch != NULL) {
        o.sock_state_cb = sock_state_cb;
        o.sock_state_cb_data = r;
        mask |= ARES_OPT_SOCK_STATE_CB;
    }
    int rc = ares_init_options(&r->channel, &o, mask);
    if (rc != ARES_SUCCESS) {
        free(r->cache);
        free(r);
        return ph_diag_set(diag, rc == ARES_ENOMEM ? PH_E_NOMEM : PH_E_IO, 0,
                           "c-ares cannot start: %s", ares_strerror(rc));
    }
    ph_status st = ph_resolver_set_servers(r->channel, cfg->servers, diag);
    if (st != PH_OK) {
        ph_resolver_free(&r);
        return st;
    }
    *out = r;
    return PH_OK;
}

void ph_resolver_free(ph_resolver **rp)
{
    if (rp == NULL || *rp == NULL)
        return;
    ph_resolver *r = *rp;
    /* Queries nobody cancelled go first, so the ARES_EDESTRUCTION callbacks
     * below find no query. */
    while (r->pending.head != NULL)
        query_free(r->pending.head);
    while (r->ready.head != NULL)
        query_free(r->ready.head);
    /* Calls addrinfo_cb for every lookup still running: frees them. */
    ares_destroy(r->channel);
    free(r->cache);
    free(r);
    *rp = NULL;
}
