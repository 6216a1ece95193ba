/* upstream.c - from the guard's yes to a connected, checked upstream
 * (upstream.h): the lease slot, the resolution with the port, the dial in
 * answer order with a timer per address, the lifetime.
 *
 * One px_upstream per request (forward.c) or tunnel (tunnel.c). While
 * resolving and dialing it holds the query, the checked answer, the timer
 * and the connection being tried; px_upstream_stop frees those and keeps
 * only what the log and the slot need (the dialed and checked strings, the
 * slot's key), so an idle tunnel carries about a hundred bytes of it.
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

struct px_upstream {
    px_worker *w;
    px_upstream_cb cb;
    void *arg;
    struct px_dns_query *query;  /* live handle while resolving (dns_async.c rule) */
    struct event *timer;         /* the connect timeout of the address being tried */
    struct bufferevent *bev;     /* the connection being tried, then the connected one */
    ph_pinned_addrs *addrs;      /* the checked answer, from PX_UP_RESOLVED until freed */
    char *checked;               /* the checked addresses, for the log */
    int64_t expires;             /* the grant's */
    int next, attempts, timeouts;
    bool lease_slot;
    uint8_t lease_off;           /* the lease's start in key (after the tenant's NUL) */
    char dialed[INET6_ADDRSTRLEN + 8];
    char key[];                  /* the slot's tenant, NUL, lease, NUL */
};

/* The refusal, last: the callback may free u. */
static void refused(px_upstream *u, ph_reason reason, const char *detail)
{
    u->cb(u->arg, PX_UP_REFUSED, reason, detail);
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
    u->query = NULL;
    /* The guard checked every address; any denied one refused the answer
     * (a mixed answer is the DNS-rebinding case). */
    if (a->reason != PH_REASON_ALLOWED) {
        refused(u, a->reason, a->detail);
        return;
    }
    if ((u->addrs = malloc(sizeof *u->addrs)) == NULL) {
        refused(u, PH_REASON_UPSTREAM_UNREACHABLE, "out of memory");
        return;
    }
    *u->addrs = a->addrs;
    u->checked = format_checked(&a->addrs);
    u->cb(u->arg, PX_UP_RESOLVED, PH_REASON_ALLOWED, NULL);
}

px_upstream *px_upstream_start(px_worker *w, const ph_decision *d, px_upstream_cb cb, void *arg,
                               ph_reason *reason, const char **detail)
{
    const ph_grant *g = &d->grant;
    size_t tl = strlen(g->tenant), ll = strlen(g->lease);
    px_upstream *u = calloc(1, sizeof *u + tl + 1 + ll + 1);
    if (u == NULL) {
        *reason = PH_REASON_PROXY_OVERLOADED;
        *detail = "out of memory";
        return NULL;
    }
    u->w = w;
    u->cb = cb;
    u->arg = arg;
    u->expires = g->expires;
    memcpy(u->key, g->tenant, tl + 1);
    u->lease_off = (uint8_t)(tl + 1); /* tl <= PH_GRANT_FIELD_MAX */
    memcpy(u->key + u->lease_off, g->lease, ll + 1);
    /* The per-lease limit (from the grant): the proxy's own resource. */
    if (!px_limits_lease_acquire(u->key, u->key + u->lease_off,
                                 w->cfg->max_connections_per_lease)) {
        free(u);
        *reason = PH_REASON_LIMIT_EXCEEDED;
        *detail = "too many connections for this lease";
        return NULL;
    }
    u->lease_slot = true;
    /* What the decision said comes next (d->next == PH_NEXT_RESOLVE):
     * exactly this name, for this port (the answer comes from the loop). */
    u->query = px_dns_resolve(w->dns, d->verdict.host, d->verdict.port, resolved, u);
    if (u->query == NULL) {
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
    evtimer_del(u->timer);
    /* Both front ends carry interactive traffic (TLS handshakes, request
     * and response): no Nagle delay on top of the peer's own. */
    px_set_nodelay(u->bev);
    u->cb(u->arg, PX_UP_CONNECTED, PH_REASON_ALLOWED, NULL);
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
    bufferevent_free(u->bev);
    u->bev = NULL;
    dial_next(u);
}

static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_upstream *u = arg;
    u->timeouts++;
    bufferevent_free(u->bev);
    u->bev = NULL;
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
    const px_config *cfg = u->w->cfg;
    while (u->addrs != NULL && (size_t)u->next < u->addrs->count) {
        int i = u->next++;
        const struct sockaddr *sa = (const struct sockaddr *)&u->addrs->addr[i];
        px_sockaddr_format(sa, u->dialed, sizeof u->dialed);
        u->attempts++;
        u->bev = bufferevent_socket_new(u->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (u->bev == NULL)
            break;
        bufferevent_setcb(u->bev, NULL, NULL, connect_event_cb, u);
        struct timeval tv = { cfg->connect_timeout_ms / 1000,
                              (cfg->connect_timeout_ms % 1000) * 1000 };
        /* The previous address's timer may still be pending (its connect
         * failed before the timer fired): re-adding replaces it. */
        evtimer_add(u->timer, &tv);
        /* The address was checked; connect to exactly it, no name lookup. */
        if (bufferevent_socket_connect(u->bev, sa, (int)u->addrs->addr_len[i]) == 0) {
            if (connected_at_once(bufferevent_getfd(u->bev)))
                connected(u); /* may free u */
            return;
        }
        evtimer_del(u->timer);
        bufferevent_free(u->bev);
        u->bev = NULL;
    }
    u->dialed[0] = '\0';
    char detail[PH_DIAG_MESSAGE_MAX];
    if (u->attempts > 0 && u->timeouts == u->attempts) {
        snprintf(detail, sizeof detail, "%d address(es) did not answer within %ld ms",
                 u->attempts, cfg->connect_timeout_ms);
        refused(u, PH_REASON_UPSTREAM_TIMEOUT, detail);
    } else {
        snprintf(detail, sizeof detail, "%d address(es) refused or failed", u->attempts);
        refused(u, PH_REASON_UPSTREAM_UNREACHABLE, detail);
    }
}

void px_upstream_dial(px_upstream *u)
{
    if (u->bev != NULL) {
        bufferevent_free(u->bev);
        u->bev = NULL;
    }
    u->next = u->attempts = u->timeouts = 0;
    if (u->timer == NULL &&
        (u->timer = evtimer_new(u->w->base, connect_timeout_cb, u)) == NULL) {
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
    for (size_t i = 0; u->addrs != NULL && i < u->addrs->count; i++)
        if (same_addr(&u->addrs->addr[i], addr))
            return true;
    return false;
}

struct bufferevent *px_upstream_take(px_upstream *u, struct sockaddr_storage *addr)
{
    struct bufferevent *b = u->bev;
    u->bev = NULL;
    if (addr != NULL)
        *addr = u->addrs->addr[u->next - 1];
    bufferevent_setcb(b, NULL, NULL, NULL, NULL);
    return b;
}

void px_upstream_stop(px_upstream *u)
{
    if (u->query != NULL) {
        px_dns_cancel(u->query);
        u->query = NULL;
    }
    if (u->timer != NULL) {
        event_free(u->timer);
        u->timer = NULL;
    }
    if (u->bev != NULL) {
        bufferevent_free(u->bev);
        u->bev = NULL;
    }
    free(u->addrs);
    u->addrs = NULL;
}

void px_upstream_free(px_upstream **up)
{
    px_upstream *u = *up;
    if (u == NULL)
        return;
    px_upstream_stop(u);
    if (u->lease_slot)
        px_limits_lease_release(u->key, u->key + u->lease_off);
    free(u->checked);
    free(u);
    *up = NULL;
}

const char *px_upstream_dialed(const px_upstream *u)
{
    return u->dialed[0] ? u->dialed : NULL;
}

const char *px_upstream_checked(const px_upstream *u)
{
    return u->checked;
}

void px_upstream_set_dialed(px_upstream *u, const struct sockaddr *addr)
{
    px_sockaddr_format(addr, u->dialed, sizeof u->dialed);
}

long px_upstream_lifetime(const px_upstream *u, const char **end)
{
    long life = u->w->cfg->max_lifetime_s;
    *end = "max_lifetime";
    int64_t left = u->expires - (int64_t)time(NULL);
    if (left < life) {
        life = left > 0 ? (long)left : 0;
        *end = "grant_expired";
    }
    return life;
}
