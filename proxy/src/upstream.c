/* upstream.c - from the guard's yes to a connected, checked upstream
 * (upstream.h): the lease slot, the resolution with the port, the dial in
 * answer order with a timer per address, the lifetime.
 *
 * One px_upstream per request (forward.c) or tunnel (tunnel.c), in two
 * forms behind one handle. While resolving and dialing it is one block:
 * the handle, the slot's key, and its live state (up_live: the query, the
 * checked answer and its text, the connection being tried as a plain
 * non-blocking socket, its connect event and timer assigned in place), so
 * a dial allocates nothing more; the block is its own allocation, or room
 * in the caller's (a CONNECT's head phase: px_upstream_start_in), so a
 * CONNECT's upstream allocates nothing until it stops. px_upstream_stop
 * compacts it to what the log and the slot need (the slot's key, the
 * dialed and checked strings, in one allocation), so an idle tunnel
 * carries some sixty bytes of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "config.h"
#include "event_slot.h"
#include "dns_async.h"
#include "proxy_limits.h"
#include "sockaddr.h"
#include "upstream.h"
#include "worker.h"

/* The checked addresses as text: PH_PINNED_MAX of them, space-separated. */
#define CHECKED_MAX (PH_PINNED_MAX * (INET6_ADDRSTRLEN + 1) + 1)

/* From px_upstream_start to px_upstream_stop, inside the px_upstream's own
 * block (after its strings). */
typedef struct up_live {
    px_worker *w;
    px_upstream_cb cb;
    void *arg;
    px_dns_query query;          /* live while resolving (dns_async.c rule) */
    bool resolving;
    struct event *timer;         /* the connect timeout of the address being tried (in ev_store) */
    struct event *conn_ev;       /* the connect's completion: writable (in ev_store) */
    int fd;                      /* the connection being tried, then the connected one; -1 */
    bool has_addrs;              /* from PX_UP_RESOLVED on: addrs and checked */
    ph_pinned_addrs addrs;       /* the checked answer */
    int64_t expires;             /* the grant's */
    int next, attempts, timeouts;
    char dialed[INET6_ADDRSTRLEN + 8];
    char checked[CHECKED_MAX];   /* the checked addresses, for the log */
    max_align_t ev_store[];      /* timer and conn_ev, PX_EVENT_SLOT bytes each */
} up_live;


struct px_upstream {
    up_live *live;               /* NULL once stopped; else inside this block */
    bool lease_slot;
    bool borrowed;               /* the block is the caller's memory (px_upstream_start_in) */
    uint8_t lease_off;           /* the lease's start in s (after the tenant's NUL) */
    uint8_t dialed_off;          /* stopped: the dialed string's start in s, 0 for none */
    uint16_t checked_off;        /* stopped: the checked string's start in s, 0 for none */
    char s[];                    /* the slot's tenant, NUL, lease, NUL; stopped: then the
                                  * dialed and checked strings, each NUL-terminated */
};

static void connect_event_cb(evutil_socket_t fd, short what, void *arg);
static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg);

/* The refusal, last: the callback may free u. */
static void refused(px_upstream *u, ph_reason reason, const char *detail)
{
    u->live->cb(u->live->arg, PX_UP_REFUSED, reason, detail);
}

/* "a1 a2 ..." (addresses only, in answer order) into out[CHECKED_MAX]:
 * what the guard checked and the dial may try. */
static void format_checked(const ph_pinned_addrs *a, char *out)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; i < a->count && i < PH_PINNED_MAX; i++) {
        char one[INET6_ADDRSTRLEN];
        if (ph_pinned_addr_string(a, i, one, sizeof one) != PH_OK)
            one[0] = '\0';
        n += (size_t)snprintf(out + n, CHECKED_MAX - n, "%s%s", i ? " " : "", one);
    }
}

static void resolved(const ph_resolve_answer *a, void *arg)
{
    px_upstream *u = arg;
    up_live *l = u->live;
    l->resolving = false;
    /* The guard checked every address; any denied one refused the answer
     * (a mixed answer is the DNS-rebinding case). */
    if (a->reason != PH_REASON_ALLOWED) {
        refused(u, a->reason, a->detail);
        return;
    }
    l->addrs = a->addrs;
    if (l->addrs.count > PH_PINNED_MAX)
        l->addrs.count = PH_PINNED_MAX;
    format_checked(&l->addrs, l->checked);
    l->has_addrs = true;
    l->cb(l->arg, PX_UP_RESOLVED, PH_REASON_ALLOWED, NULL);
}

/* Where the live state starts in a block holding a handle with strings
 * of n bytes. */
static size_t live_at(size_t n)
{
    return (sizeof(px_upstream) + n + sizeof(max_align_t) - 1) / sizeof(max_align_t) *
           sizeof(max_align_t);
}

size_t px_upstream_room(void)
{
    return live_at(2 * (PH_GRANT_FIELD_MAX + 1)) + sizeof(up_live) + 2 * PX_EVENT_SLOT;
}

px_upstream *px_upstream_start(px_worker *w, const ph_decision *d, px_upstream_cb cb, void *arg,
                               ph_reason *reason, const char **detail)
{
    return px_upstream_start_in(NULL, w, d, cb, arg, reason, detail);
}

px_upstream *px_upstream_start_in(void *room, px_worker *w, const ph_decision *d,
                                  px_upstream_cb cb, void *arg, ph_reason *reason,
                                  const char **detail)
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
    /* One block: the handle and its strings, then the live state (the
     * grant's fields are at most PH_GRANT_FIELD_MAX: px_upstream_room). */
    size_t at = live_at(tl + 1 + ll + 1);
    px_upstream *u = room != NULL ? room : malloc(at + sizeof(up_live) + 2 * PX_EVENT_SLOT);
    if (u == NULL) {
        *reason = PH_REASON_PROXY_OVERLOADED;
        *detail = "out of memory";
        return NULL;
    }
    memset(u, 0, sizeof *u);
    u->borrowed = room != NULL;
    up_live *l = (up_live *)((unsigned char *)u + at);
    memset(l, 0, sizeof *l);
    l->timer = (struct event *)(unsigned char *)l->ev_store;
    l->conn_ev = (struct event *)((unsigned char *)l->ev_store + PX_EVENT_SLOT);
    l->fd = -1;
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
        if (!u->borrowed)
            free(u);
        *reason = PH_REASON_LIMIT_EXCEEDED;
        *detail = "too many connections for this lease";
        return NULL;
    }
    u->lease_slot = true;
    evtimer_assign(l->timer, w->base, connect_timeout_cb, u);
    event_assign(l->conn_ev, w->base, -1, 0, connect_event_cb, u);
    /* What the decision said comes next (d->next == PH_NEXT_RESOLVE):
     * exactly this name, for this port (the answer comes from the loop). */
    l->resolving = px_dns_resolve(w->dns, &l->query, d->verdict.host, d->verdict.port, resolved, u);
    if (!l->resolving) {
        px_upstream_free(&u);
        *reason = PH_REASON_DNS_FAILURE;
        *detail = "the resolver could not start the query";
        return NULL;
    }
    return u;
}

/* ---- dial ---------------------------------------------------------------- */

/* Closes the connection being tried (its event deleted first). */
static void drop_attempt(up_live *l)
{
    event_del(l->conn_ev);
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

static void connected(px_upstream *u)
{
    up_live *l = u->live;
    evtimer_del(l->timer);
    event_del(l->conn_ev);
    /* Tunnels and forwarded requests carry interactive protocols (TLS
     * handshakes, request and response): no Nagle delay on top of the
     * peer's own. */
    int one = 1;
    (void)setsockopt(l->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    l->cb(l->arg, PX_UP_CONNECTED, PH_REASON_ALLOWED, NULL);
}

static void dial_next(px_upstream *u);

/* The connect in progress ended: writable once connected, or with the
 * error in SO_ERROR. */
static void connect_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    px_upstream *u = arg;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        connected(u);
        return;
    }
    drop_attempt(u->live);
    dial_next(u);
}

static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_upstream *u = arg;
    u->live->timeouts++;
    drop_attempt(u->live);
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

/* A non-blocking connect to sa started (or done): the socket, or -1. */
static int connect_start(const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, sa, len) != 0 && errno != EINPROGRESS && errno != EINTR) {
        close(fd);
        return -1;
    }
    return fd;
}

static void dial_next(px_upstream *u)
{
    up_live *l = u->live;
    const px_config *cfg = l->w->cfg;
    while (l->has_addrs && (size_t)l->next < l->addrs.count) {
        int i = l->next++;
        const struct sockaddr *sa = (const struct sockaddr *)&l->addrs.addr[i];
        ph_sockaddr_text(sa, l->dialed, sizeof l->dialed);
        l->attempts++;
        /* The address was checked; connect to exactly it, no name lookup. */
        if ((l->fd = connect_start(sa, l->addrs.addr_len[i])) < 0)
            continue;
        struct timeval tv = { cfg->connect_timeout_ms / 1000,
                              (cfg->connect_timeout_ms % 1000) * 1000 };
        /* The previous address's timer may still be pending (its connect
         * failed before the timer fired): re-adding replaces it. */
        evtimer_add(l->timer, &tv);
        if (connected_at_once(l->fd)) {
            connected(u); /* may free u */
            return;
        }
        event_assign(l->conn_ev, l->w->base, l->fd, EV_WRITE, connect_event_cb, u);
        if (event_add(l->conn_ev, NULL) == 0)
            return;
        drop_attempt(l);
    }
    /* No address left: nothing may fire for this dial any more. */
    evtimer_del(l->timer);
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
    evtimer_del(l->timer);
    drop_attempt(l);
    l->next = l->attempts = l->timeouts = 0;
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
    for (size_t i = 0; l != NULL && l->has_addrs && i < l->addrs.count; i++)
        if (same_addr(&l->addrs.addr[i], addr))
            return true;
    return false;
}

int px_upstream_take_fd(px_upstream *u, struct sockaddr_storage *addr)
{
    up_live *l = u->live;
    int fd = l->fd;
    l->fd = -1;
    if (addr != NULL)
        *addr = l->addrs.addr[l->next - 1];
    return fd;
}

struct bufferevent *px_upstream_take(px_upstream *u, struct sockaddr_storage *addr)
{
    up_live *l = u->live;
    struct bufferevent *b = bufferevent_socket_new(l->w->base, l->fd, BEV_OPT_CLOSE_ON_FREE);
    if (b == NULL)
        return NULL; /* the socket stays the px_upstream's */
    (void)px_upstream_take_fd(u, addr);
    return b;
}

/* Ends the live state (the callback does not run afterwards); l itself is
 * part of its px_upstream's block. */
static void live_end(up_live *l)
{
    if (l->resolving)
        px_dns_cancel(&l->query);
    l->resolving = false;
    evtimer_del(l->timer);
    drop_attempt(l);
    event_debug_unassign(l->timer);
    event_debug_unassign(l->conn_ev);
}

/* The compact form's parts: the slot's key, then the log's strings (the
 * dialed and checked addresses), each NUL-terminated, from the live state
 * or from a compact form. */
typedef struct compact_parts {
    size_t key, dl, cl;
    const char *dialed, *checked;
} compact_parts;

static compact_parts parts_of(const px_upstream *u)
{
    const up_live *l = u->live;
    compact_parts p = { u->lease_off + strlen(u->s + u->lease_off) + 1, 0, 0, NULL, NULL };
    p.dialed = l != NULL ? (l->dialed[0] ? l->dialed : NULL)
                         : (u->dialed_off ? u->s + u->dialed_off : NULL);
    p.checked = l != NULL ? (l->has_addrs ? l->checked : NULL)
                          : (u->checked_off ? u->s + u->checked_off : NULL);
    p.dl = p.dialed != NULL ? strlen(p.dialed) + 1 : 0;
    p.cl = p.checked != NULL ? strlen(p.checked) + 1 : 0;
    return p;
}

size_t px_upstream_compact_size(const px_upstream *u)
{
    compact_parts p = parts_of(u);
    size_t n = sizeof(px_upstream) + p.key + p.dl + p.cl;
    return (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
}

/* u's compact form written at c (px_upstream_compact_size(u) bytes, not
 * overlapping u); u's live state, if any, ended first. The key's and the
 * strings' lengths fit the offsets: at most 2 * (PH_GRANT_FIELD_MAX + 1)
 * bytes of key, then CHECKED_MAX. */
static void compact_into(px_upstream *u, px_upstream *c, bool borrowed)
{
    if (u->live != NULL)
        live_end(u->live);
    compact_parts p = parts_of(u);
    *c = *u;
    c->live = NULL;
    c->borrowed = borrowed;
    memcpy(c->s, u->s, p.key);
    c->dialed_off = p.dl ? (uint8_t)p.key : 0;
    if (p.dl)
        memcpy(c->s + p.key, p.dialed, p.dl);
    c->checked_off = p.cl ? (uint16_t)(p.key + p.dl) : 0;
    if (p.cl)
        memcpy(c->s + p.key + p.dl, p.checked, p.cl);
    if (!u->borrowed)
        free(u); /* its live state with it */
}

bool px_upstream_stop(px_upstream **up)
{
    px_upstream *u = *up;
    if (u->live == NULL)
        return true;
    px_upstream *c = malloc(px_upstream_compact_size(u));
    if (c == NULL) {
        /* The old form, stopped, without the log's strings. */
        live_end(u->live);
        u->live = NULL;
        return false;
    }
    compact_into(u, c, false);
    *up = c;
    return true;
}

void px_upstream_stop_in(px_upstream **up, void *room)
{
    compact_into(*up, room, true);
    *up = room;
}

void px_upstream_free(px_upstream **up)
{
    px_upstream *u = *up;
    if (u == NULL)
        return;
    if (u->live != NULL)
        live_end(u->live);
    if (u->lease_slot)
        px_limits_lease_release(u->s, u->s + u->lease_off);
    if (!u->borrowed)
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
        return u->live->has_addrs ? u->live->checked : NULL;
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
