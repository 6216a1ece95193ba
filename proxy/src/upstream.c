/* upstream.c - from the guard's yes to a connected, checked upstream
 * (upstream.h): the lease slot, the resolution with the port, the dial in
 * answer order with a timer per address, the lifetime.
 *
 * One px_upstream per request (forward.c) or tunnel (tunnel.c), in two
 * forms behind one handle: while resolving and dialing it holds its live
 * state (up_live: the query, the checked answer, the timer, the connection
 * being tried); px_upstream_stop frees that and compacts the handle to what
 * the log and the slot need (the slot's key, the dialed and checked
 * strings, in one allocation), so an idle tunnel carries some sixty bytes
 * of it.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "config.h"
#include "dns_async.h"
#include "proxy_limits.h"
#include "reply.h"
#include "sockaddr.h"
#include "upstream.h"
#include "worker.h"

/* From px_upstream_start to px_upstream_stop. */
typedef struct up_live {
    px_worker *w;
    px_upstream_cb cb;
    void *arg;
    struct px_dns_query *query;  /* live handle while resolving (dns_async.c rule) */
    struct event *timer;         /* the connect timeout of the address being tried */
    struct bufferevent *bev;     /* the connection being tried, then the connected one */
    ph_pinned_addrs *addrs;      /* the checked answer, from PX_UP_RESOLVED on */
    char *checked;               /* the checked addresses, for the log */
    int64_t expires;             /* the grant's */
    int next, attempts, timeouts;
    char dialed[INET6_ADDRSTRLEN + 8];
} up_live;

struct px_upstream {
    up_live *live;               /* NULL once stopped */
    bool lease_slot;
    uint8_t lease_off;           /* the lease's start in s (after the tenant's NUL) */
    uint8_t dialed_off;          /* stopped: the dialed string's start in s, 0 for none */
    uint16_t checked_off;        /* stopped: the checked string's start in s, 0 for none */
    char s[];                    /* the slot's tenant, NUL, lease, NUL; stopped: then the
                                  * dialed and checked strings, each NUL-terminated */
};

/* The refusal, last: the callback may free u. */
static void refused(px_upstream *u, ph_reason reason, const char *detail)
{
    u->live->cb(u->live->arg, PX_UP_REFUSED, reason, detail);
}

/* "a1 a2 ..." (addresses only, in answer order): what the guard checked and
 * the dial may try. NULL when out of memory. */
static char *format_checked(const ph_pinned_addrs *a)
{
    size_t cap = a->count * (INET6_ADDRSTRLEN + 1) + 1, n = 0;
    char *s = malloc(cap);
    if (s == NULL)
        return NULL;
    s[0] = '\0';
    for (size_t i = 0; i < a->count; i++) {
        char one[INET6_ADDRSTRLEN];
        if (ph_pinned_addr_string(a, i, one, sizeof one) != PH_OK)
            one[0] = '\0';
        n += (size_t)snprintf(s + n, cap - n, "%s%s", i ? " " : "", one);
    }
    return s;
}

static void resolved(const ph_resolve_answer *a, void *arg)
{
    px_upstream *u = arg;
    up_live *l = u->live;
    l->query = NULL;
    /* The guard checked every address; any denied one refused the answer
     * (a mixed answer is the DNS-rebinding case). */
    if (a->reason != PH_REASON_ALLOWED) {
        refused(u, a->reason, a->detail);
        return;
    }
    if ((l->addrs = malloc(sizeof *l->addrs)) == NULL) {
        refused(u, PH_REASON_UPSTREAM_UNREACHABLE, "out of memory");
        return;
    }
    *l->addrs = a->addrs;
    l->checked = format_checked(&a->addrs);
    l->cb(l->arg, PX_UP_RESOLVED, PH_REASON_ALLOWED, NULL);
}

px_upstream *px_upstream_start(px_worker *w, const ph_decision *d, px_upstream_cb cb, void *arg,
                               ph_reason *reason, const char **detail)
{
    /* Fail closed: only an allowed decision, made on a grant (whose lease
     * the slot is counted against), leads to an upstream. */
    if (!d->allowed || d->next != PH_NEXT_RESOLVE || !d->has_grant) {
        *reason = !d->allowed ? d->reason : PH_REASON_NO_GRANT;
        *detail = "no upstream without an allowed decision on a grant";
        return NULL;
    }
    const ph_grant *g = &d->grant;
    size_t tl = strlen(g->tenant), ll = strlen(g->lease);
    px_upstream *u = calloc(1, sizeof *u + tl + 1 + ll + 1);
    up_live *l = u != NULL ? calloc(1, sizeof *l) : NULL;
    if (l == NULL) {
        free(u);
        *reason = PH_REASON_PROXY_OVERLOADED;
        *detail = "out of memory";
        return NULL;
    }
    u->live = l;
    l->w = w;
    l->cb = cb;
    l->arg = arg;
    l->expires = g->expires;
    memcpy(u->s, g->tenant, tl + 1);
    u->lease_off = (uint8_t)(tl + 1); /* tl <= PH_GRANT_FIELD_MAX */
    memcpy(u->s + u->lease_off, g->lease, ll + 1);
    /* The per-lease limit (from the grant): the proxy's own resource. */
    if (!px_limits_lease_acquire(u->s, u->s + u->lease_off, w->cfg->max_connections_per_lease)) {
        free(l);
        free(u);
        *reason = PH_REASON_LIMIT_EXCEEDED;
        *detail = "too many connections for this lease";
        return NULL;
    }
    u->lease_slot = true;
    /* What the decision said comes next (d->next == PH_NEXT_RESOLVE):
     * exactly this name, for this port (the answer comes from the loop). */
    l->query = px_dns_resolve(w->dns, d->verdict.host, d->verdict.port, resolved, u);
    if (l->query == NULL) {
        px_upstream_free(&u);
        *reason = PH_REASON_DNS_FAILURE;
        *detail = "out of memory";
        return NULL;
    }
    return u;
}

/* ---- dial ---------------------------------------------------------------- */

static void connected(px_upstream *u)
{
    up_live *l = u->live;
    evtimer_del(l->timer);
    px_set_nodelay(l->bev);
    l->cb(l->arg, PX_UP_CONNECTED, PH_REASON_ALLOWED, NULL);
}

static void dial_next(px_upstream *u);

static void connect_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    px_upstream *u = arg;
    if (what & BEV_EVENT_CONNECTED) {
        connected(u);
        return;
    }
    bufferevent_free(u->live->bev);
    u->live->bev = NULL;
    dial_next(u);
}

static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_upstream *u = arg;
    u->live->timeouts++;
    bufferevent_free(u->live->bev);
    u->live->bev = NULL;
    dial_next(u);
}

/* True when a non-blocking connect already completed: on a near upstream
 * (loopback, same host) the handshake finishes inside connect(2), and one
 * poll(2) saves waiting a loop iteration for the connect event. A pending
 * socket error shows as POLLERR, so writable without it is connected. */
static bool connected_at_once(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP)) == POLLOUT;
}

static void dial_next(px_upstream *u)
{
    up_live *l = u->live;
    const px_config *cfg = l->w->cfg;
    while (l->addrs != NULL && (size_t)l->next < l->addrs->count) {
        int i = l->next++;
        const struct sockaddr *sa = (const struct sockaddr *)&l->addrs->addr[i];
        ph_sockaddr_text(sa, l->dialed, sizeof l->dialed);
        l->attempts++;
        l->bev = bufferevent_socket_new(l->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (l->bev == NULL)
            break;
        bufferevent_setcb(l->bev, NULL, NULL, connect_event_cb, u);
        struct timeval tv = { cfg->connect_timeout_ms / 1000,
                              (cfg->connect_timeout_ms % 1000) * 1000 };
        /* The previous address's timer may still be pending (its connect
         * failed before the timer fired): re-adding replaces it. */
        evtimer_add(l->timer, &tv);
        /* The address was checked; connect to exactly it, no name lookup. */
        if (bufferevent_socket_connect(l->bev, sa, (int)l->addrs->addr_len[i]) == 0) {
            if (connected_at_once(bufferevent_getfd(l->bev)))
                connected(u); /* may free u */
            return;
        }
        evtimer_del(l->timer);
        bufferevent_free(l->bev);
        l->bev = NULL;
    }
    l->dialed[0] = '\0';
    char detail[PH_DIAG_MESSAGE_MAX];
    if (l->attempts > 0 && l->timeouts == l->attempts) {
        snprintf(detail, sizeof detail, "%d address(es) did not answer within %ld ms",
                 l->attempts, cfg->connect_timeout_ms);
        refused(u, PH_REASON_UPSTREAM_TIMEOUT, detail);
    } else {
        snprintf(detail, sizeof detail, "%d address(es) refused or failed", l->attempts);
        refused(u, PH_REASON_UPSTREAM_UNREACHABLE, detail);
    }
}

void px_upstream_dial(px_upstream *u)
{
    up_live *l = u->live;
    if (l->bev != NULL) {
        bufferevent_free(l->bev);
        l->bev = NULL;
    }
    l->next = l->attempts = l->timeouts = 0;
    if (l->timer == NULL &&
        (l->timer = evtimer_new(l->w->base, connect_timeout_cb, u)) == NULL) {
        refused(u, PH_REASON_UPSTREAM_UNREACHABLE, "out of memory");
        return;
    }
    dial_next(u);
}

/* ---- the rest ------------------------------------------------------------ */

static bool same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, sizeof(struct in_addr)) == 0;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

bool px_upstream_is_checked(const px_upstream *u, const struct sockaddr_storage *addr)
{
    const up_live *l = u->live;
    for (size_t i = 0; l != NULL && l->addrs != NULL && i < l->addrs->count; i++)
        if (same_addr(&l->addrs->addr[i], addr))
            return true;
    return false;
}

struct bufferevent *px_upstream_take(px_upstream *u, struct sockaddr_storage *addr)
{
    up_live *l = u->live;
    struct bufferevent *b = l->bev;
    l->bev = NULL;
    if (addr != NULL)
        *addr = l->addrs->addr[l->next - 1];
    bufferevent_setcb(b, NULL, NULL, NULL, NULL);
    return b;
}

/* Frees the live state (the callback does not run afterwards). */
static void live_free(up_live **lp)
{
    up_live *l = *lp;
    if (l == NULL)
        return;
    if (l->query != NULL)
        px_dns_cancel(l->query);
    if (l->timer != NULL)
        event_free(l->timer);
    if (l->bev != NULL)
        bufferevent_free(l->bev);
    free(l->addrs);
    free(l->checked);
    free(l);
    *lp = NULL;
}

void px_upstream_stop(px_upstream **up)
{
    px_upstream *u = *up;
    up_live *l = u->live;
    if (l == NULL)
        return;
    /* The compact form: the key, then the log's strings. Out of memory:
     * the old form without them (the log line goes without). */
    size_t key = u->lease_off + strlen(u->s + u->lease_off) + 1;
    size_t dl = l->dialed[0] ? strlen(l->dialed) + 1 : 0;
    size_t cl = l->checked != NULL ? strlen(l->checked) + 1 : 0;
    px_upstream *c = key + dl + cl <= UINT16_MAX ? malloc(sizeof *c + key + dl + cl) : NULL;
    if (c != NULL) {
        *c = *u;
        memcpy(c->s, u->s, key);
        c->dialed_off = dl && key <= UINT8_MAX ? (uint8_t)key : 0;
        if (c->dialed_off)
            memcpy(c->s + key, l->dialed, dl);
        c->checked_off = cl ? (uint16_t)(key + dl) : 0;
        if (cl)
            memcpy(c->s + key + dl, l->checked, cl);
        free(u);
        *up = u = c;
    }
    u->live = NULL;
    live_free(&l);
}

void px_upstream_free(px_upstream **up)
{
    px_upstream *u = *up;
    if (u == NULL)
        return;
    live_free(&u->live);
    if (u->lease_slot)
        px_limits_lease_release(u->s, u->s + u->lease_off);
    free(u);
    *up = NULL;
}

const char *px_upstream_dialed(const px_upstream *u)
{
    if (u->live != NULL)
        return u->live->dialed[0] ? u->live->dialed : NULL;
    return u->dialed_off ? u->s + u->dialed_off : NULL;
}

const char *px_upstream_checked(const px_upstream *u)
{
    if (u->live != NULL)
        return u->live->checked;
    return u->checked_off ? u->s + u->checked_off : NULL;
}

void px_upstream_set_dialed(px_upstream *u, const struct sockaddr *addr)
{
    ph_sockaddr_text(addr, u->live->dialed, sizeof u->live->dialed);
}

long px_upstream_lifetime(const px_upstream *u, const char **end)
{
    const up_live *l = u->live;
    long life = l->w->cfg->max_lifetime_s;
    *end = "max_lifetime";
    int64_t left = l->expires - (int64_t)time(NULL);
    if (left < life) {
        life = left > 0 ? (long)left : 0;
        *end = "grant_expired";
    }
    return life;
}
