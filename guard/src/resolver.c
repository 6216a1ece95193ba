/* resolver.c - the one resolver driver: a c-ares channel, a bounded cache
 * (its own or a guard's, dns_cache.c)
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
#include "dns_cache-int.h"
#include "pinhole/clock.h"
#include "pinhole/host.h"
#include "resolve-int.h"

typedef struct query_list {
    struct ph_resolve_query *head, *tail;
} query_list;

struct ph_resolver {
    ares_channel channel;
    ph_resolver_loop loop;
    unsigned timeout_ms, max_ttl_s, negative_ttl_s;
    ph_dns_cache *cache; /* a reference (own or shared); NULL: none */
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
    ph_pinned_addrs_set_port(&q->answer.addrs, q->port);
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
        ph_dns_cache_store(r->cache, l->host, &a, ttl);
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

    ph_resolve_answer a;
    if (ph_dns_cache_find(r->cache, q->name, port, &a)) {
        make_ready(q, &a);
        arm(r);
        return PH_OK;
    }
    lookup *l = calloc(1, sizeof *l);
    if (l == NULL) {
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
    return ph_resolver_new_shared(cfg, loop, NULL, out, diag);
}

ph_status ph_resolver_new_shared(const ph_resolver_config *cfg, const ph_resolver_loop *loop,
                                 ph_dns_cache *shared, ph_resolver **out, ph_diag *diag)
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
    if (shared != NULL) {
        r->cache = ph_dns_cache_ref(shared);
    } else {
        ph_status cst = ph_dns_cache_new(cfg->cache_entries, &r->cache, diag);
        if (cst != PH_OK) {
            free(r);
            return cst;
        }
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
        ph_dns_cache_free(&r->cache);
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
    ph_dns_cache_free(&r->cache);
    free(r);
    *rp = NULL;
}
