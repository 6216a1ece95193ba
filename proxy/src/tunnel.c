/* tunnel.c - one client connection: read the request head, ask libpinhole
 * for the decision of DESIGN section 4, dial, hand over to the relay, and
 * write one log line at the end.
 *
 *   head -> ph_decide_connect (guard, once: authority, grant, allowlist on
 *           one pinned policy version; the verdict carries its HTTP status)
 *        -> per-lease limit (the proxy's own resource)           429
 *        -> resolve (c-ares) -> every address (guard: ph_addr_classify)
 *        -> dial the checked addresses in order, never re-resolving
 *        -> 200, relay (until the earliest of max_lifetime_s and the
 *           grant's expiry; a reload decides open connections again)
 *
 * Before any of it, at accept: the overall, descriptor, per-peer and
 * request-head caps (503 proxy_overloaded, peer_limit_exceeded,
 * peer_head_limit_exceeded; answered without reading). A
 * connection whose first bytes cannot be a CONNECT goes to forward.c
 * (plain-HTTP forwarding), which serves it from then on (forward.h).
 *
 * This file decides nothing itself: every verdict, and the HTTP status of
 * every refusal (ph_reason_http_status of its reason), comes from
 * libpinhole; no status is chosen here.
 *
 * The head: the listener defers accept until the client's first bytes
 * arrived (TCP_DEFER_ACCEPT), so px_conn_accept reads the head at once,
 * with whatever tunnel bytes followed it, in one recv(2) into head_buf; only
 * a head that is not complete yet arms a read event. The client socket gets
 * a bufferevent only to answer a refusal (client_bev).
 *
 * Ownership: a px_conn is freed only by conn_free, and every callback that
 * can reach conn_free (bufferevent callbacks, the head's read event, the
 * timer, the DNS answer, the relay's done) returns without touching c
 * afterwards; so does px_conn_accept, which may reach it too. Callbacks that are
 * not the connection's own never run synchronously inside a call of this
 * file: the DNS answer comes from the loop (dns_async.c), bufferevent
 * callbacks are not run inside bufferevent_write/enable/connect (libevent
 * defers a connect that fails at once). The relay's done may run inside
 * px_relay_run / px_relay_stop, which are therefore the last thing their
 * callers do with c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "pinhole/clock.h"
#include "proxy_request.h"
#include "pinhole/url.h"
#include "proxy-int.h"
#include "forward.h"
#include "http1.h"

/* ST_FORWARD: not a CONNECT; forward.c serves the connection (fwd). */
typedef enum conn_state { ST_HEAD, ST_RESOLVE, ST_CONNECT, ST_RELAY, ST_REPLY, ST_FORWARD } conn_state;

typedef struct px_conn {
    px_worker *w;
    struct px_conn *prev, *next;
    uint64_t id;
    conn_state state;
    int fd;                     /* the client socket; -1 once client or the relay owns it */
    struct bufferevent *client, *upstream; /* client: only to answer a refusal */
    struct event *head_ev;      /* head reads after the first (NULL until needed) */
    uint8_t *head_buf;          /* HEAD_READ_MAX: the head and the bytes after it */
    size_t head_got, head_len;  /* bytes in head_buf; the head's own length once parsed */
    struct event *timer;        /* head timeout, then connect timeout */
    struct px_dns_query *query; /* live handle while resolving (dns_async.c rule) */
    px_relay *relay;
    struct px_fwd *fwd;         /* ST_FORWARD: owns the client from then on */
    int64_t started_ns;         /* ph_monotonic_ns() at accept */
    char peer[64];
    char peer_key[64];          /* the per-peer limit's key; "" = no slot held */
    bool in_head;               /* holds a request-head slot */
    char *token;                /* the Proxy-Authorization value, for rechecks */
    size_t token_len;
    char *checked;              /* the checked addresses, for the log */
    /* the decision, as far as it got */
    bool has_grant, lease_slot;
    ph_grant grant;
    ph_authority auth;
    bool has_auth;
    /* what the log needs of the guard's verdict (the verdict itself is big) */
    bool has_rule;
    uint32_t rule_line;
    char rule_file[PH_VERDICT_FILE_MAX + 1];
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    px_dns_answer *answer;      /* only while dialing */
    int next_addr, attempts, timeouts;
    char dialed[80];
    int status;
    ph_reason reason;
    char detail[PH_DIAG_MESSAGE_MAX + 64];
    const char *end;
    uint64_t up, down;
} px_conn;

static void conn_free(px_conn *c);
static void dial_next(px_conn *c);
static void leave_head(px_conn *c);

/* The most one head read takes: a whole head and the tunnel bytes a client
 * sent right behind it (a TLS ClientHello fits). */
#define HEAD_READ_MAX (PH_PREQ_HEAD_MAX + 4096)

/* The client socket as a bufferevent, made on first use (a refusal is
 * written through it) with the bytes read so far in its input; the socket
 * is then the bufferevent's. NULL when out of memory. */
static struct bufferevent *client_bev(px_conn *c)
{
    if (c->client != NULL)
        return c->client;
    struct bufferevent *b = bufferevent_socket_new(c->w->base, c->fd, BEV_OPT_CLOSE_ON_FREE);
    if (b == NULL)
        return NULL;
    /* A socket bufferevent's input is frozen at its end for everyone but
     * its own reads: thawed for the bytes read before it existed. */
    struct evbuffer *in = bufferevent_get_input(b);
    int added = 0;
    if (c->head_got > 0) {
        evbuffer_unfreeze(in, 0);
        added = evbuffer_add(in, c->head_buf, c->head_got);
        evbuffer_freeze(in, 0);
    }
    if (added != 0) {
        bufferevent_setfd(b, -1);
        bufferevent_free(b);
        return NULL;
    }
    if (c->head_ev != NULL) {
        event_free(c->head_ev);
        c->head_ev = NULL;
    }
    c->client = b;
    c->fd = -1;
    return b;
}

/* ---- replies ------------------------------------------------------------- */

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "Connection Established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
    }
}

/* Formats a refusal: status line, Pinhole-Reason, a one-line body. */
size_t px_format_refusal(char *buf, size_t cap, int status, ph_reason reason, const char *body)
{
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\n"
                     "Pinhole-Reason: %s\r\n"
                     "%s"
                     "Content-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s\n",
                     status, status_text(status), ph_reason_code(reason),
                     status == 407 ? "Proxy-Authenticate: Basic realm=\"pinhole\"\r\n" : "",
                     strlen(body) + 1, body);
    return n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : cap - 1);
}

static void reply_written_cb(struct bufferevent *b, void *arg)
{
    (void)b;
    conn_free(arg);
}

static void reply_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    (void)what;
    conn_free(arg);
}

static void reply_unbuffered_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_free(arg);
}

/* Answers a refusal and closes once it is written (bounded by a timeout so
 * a client that does not read cannot hold the connection). */
static void refuse(px_conn *c, int status, ph_reason reason, const char *detail)
{
    char body[PH_DIAG_MESSAGE_MAX + 128], resp[PH_DIAG_MESSAGE_MAX + 512];
    c->status = status;
    c->reason = reason;
    if (detail && detail != c->detail)
        snprintf(c->detail, sizeof c->detail, "%s", detail);
    snprintf(body, sizeof body, "pinhole: %s%s%s", ph_reason_code(reason),
             c->detail[0] ? ": " : "", c->detail);
    size_t n = px_format_refusal(resp, sizeof resp, status, reason, body);
    px_metrics_request(reason);
    leave_head(c);
    c->state = ST_REPLY;
    if (c->timer)
        evtimer_del(c->timer);
    if (c->query) {
        px_dns_cancel(c->query);
        c->query = NULL;
    }
    if (c->upstream) {
        bufferevent_free(c->upstream);
        c->upstream = NULL;
    }
    struct bufferevent *b = client_bev(c);
    if (b == NULL) {
        /* Out of memory: what the socket takes now, then the end, from the
         * loop (the callers still use c after this returns). */
        ssize_t wr = send(c->fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)wr;
        struct timeval now = { 0, 0 };
        evtimer_assign(c->timer, c->w->base, reply_unbuffered_cb, c);
        evtimer_add(c->timer, &now);
        return;
    }
    bufferevent_disable(b, EV_READ);
    bufferevent_setcb(b, NULL, reply_written_cb, reply_event_cb, c);
    bufferevent_setwatermark(b, EV_WRITE, 0, 0);
    struct timeval tv = { 5, 0 };
    bufferevent_set_timeouts(b, NULL, &tv);
    bufferevent_write(b, resp, n);
    bufferevent_enable(b, EV_WRITE);
}

/* A refusal for a reason, answered with the guard's status for it. */
static void refuse_for(px_conn *c, ph_reason reason, const char *detail)
{
    refuse(c, ph_reason_http_status(reason), reason, detail);
}

/* ---- lifecycle ----------------------------------------------------------- */

static double elapsed(const px_conn *c)
{
    return (double)(ph_monotonic_ns() - c->started_ns) / 1e9;
}

static void conn_log(const px_conn *c)
{
    px_log_record r = {
        .conn_id = c->id,
        .peer = c->peer,
        .tenant = c->has_grant ? c->grant.tenant : NULL,
        .lease = c->has_grant ? c->grant.lease : NULL,
        .list = c->has_grant ? c->grant.list : NULL,
        .host = c->has_auth ? c->auth.host : NULL,
        .port = c->has_auth ? c->auth.port : 0,
        .dialed = c->dialed[0] ? c->dialed : NULL,
        .checked = c->checked,
        .status = c->status,
        .reason = c->reason,
        .detail = c->detail[0] ? c->detail : NULL,
        .rule_file = c->has_rule ? c->rule_file : NULL,
        .rule_line = c->has_rule ? c->rule_line : 0,
        .policy_id = c->policy_id[0] ? c->policy_id : NULL,
        .bytes_up = c->up,
        .bytes_down = c->down,
        .duration_s = elapsed(c),
        .end = c->end,
    };
    px_log_connection(&r);
}

static void conn_free(px_conn *c)
{
    px_worker *w = c->w;
    if (c->fwd != NULL) {
        /* A forwarding connection logs each request, not itself. */
        px_forward_free(&c->fwd, c->end != NULL ? c->end : "closed");
    } else {
        if (c->status == 0 && c->end == NULL)
            c->end = "client_closed"; /* closed before any answer */
        conn_log(c);
    }
    if (c->query)
        px_dns_cancel(c->query);
    leave_head(c);
    if (c->peer_key[0])
        px_limits_peer_release(c->peer_key);
    free(c->answer);
    free(c->token);
    free(c->checked);
    free(c->head_buf);
    if (c->timer)
        event_free(c->timer);
    if (c->head_ev)
        event_free(c->head_ev);
    if (c->fd >= 0)
        close(c->fd);
    if (c->relay) {
        px_relay_free(&c->relay); /* closes both sockets */
        px_metrics_tunnel_close();
        px_metrics_bytes(c->up, c->down);
    } else {
        if (c->upstream)
            bufferevent_free(c->upstream);
        if (c->client)
            bufferevent_free(c->client);
    }
    if (c->lease_slot)
        px_limits_lease_release(c->grant.tenant, c->grant.lease);
    px_limits_conn_release();
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->nconns--;
    free(c);
    px_worker_conn_gone(w);
}

void px_conn_close_all(px_worker *w)
{
    while (w->conns) {
        px_conn *c = w->conns;
        if (c->end == NULL)
            c->end = "shutdown";
        conn_free(c);
    }
}

void px_conn_close_idle_heads(px_worker *w)
{
    px_conn *c = w->conns, *next;
    for (; c; c = next) {
        next = c->next;
        if (c->state == ST_HEAD || (c->state == ST_FORWARD && px_forward_idle(c->fwd))) {
            c->end = "shutdown";
            conn_free(c);
        }
    }
}

/* Decides an open connection again against the policy now in force. */
static void recheck(px_conn *c)
{
    char authority[PH_HOST_MAX + 8];
    int n = snprintf(authority, sizeof authority, "%s:%u", c->auth.host, c->auth.port);
    ph_connect_request r = {
        .authority = authority,
        .authority_len = (size_t)n,
        .proxy_authorization = c->token,
        .proxy_authorization_len = c->token_len,
        .now = (int64_t)time(NULL),
    };
    ph_decision d;
    if (ph_decide_connect(px_policy(), &r, &d) == PH_OK)
        return;
    const char *end;
    if (!d.has_grant)
        end = d.reason == PH_REASON_GRANT_EXPIRED ? "grant_expired" : "key_revoked";
    else if (!c->w->cfg->keep_tunnels_on_reload)
        end = "policy_revoked";
    else
        return;
    snprintf(c->detail, sizeof c->detail, "after reload: %s", d.log_detail);
    if (c->state == ST_RELAY) {
        px_relay_stop(c->relay, end); /* frees c */
        return;
    }
    c->end = end;
    refuse(c, d.http_status, d.reason, c->detail);
}

void px_conn_recheck_all(px_worker *w)
{
    px_conn *c = w->conns, *next;
    for (; c; c = next) {
        next = c->next; /* recheck frees at most c */
        if (c->token != NULL && c->state != ST_HEAD && c->state != ST_REPLY)
            recheck(c);
    }
}

/* ---- relay --------------------------------------------------------------- */

static void relay_done(void *arg, const char *why)
{
    px_conn *c = arg;
    c->end = why;
    conn_free(c);
}

void px_set_nodelay(struct bufferevent *b)
{
    /* Tunnels carry interactive protocols (TLS handshakes): no Nagle delay
     * on top of the peer's own. */
    int one = 1;
    setsockopt(bufferevent_getfd(b), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void start_relay(px_conn *c)
{
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    /* The 200 goes out first, so the client's wake-up overlaps the set-up
     * below. Nothing can precede it: the client has been sent nothing, and
     * the upstream's first bytes are read only by the relay. What the
     * socket does not take now (never, in practice), the relay sends; an
     * error, the relay meets again and ends the tunnel with. */
    ssize_t sent = send(c->fd, ok, sizeof ok - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0)
        sent = 0;
    /* The relay keeps the tunnel's deadlines: the connection's timer (head,
     * then connect timeout) is done with. */
    event_free(c->timer);
    c->timer = NULL;
    free(c->answer);
    c->answer = NULL;
    /* The client socket inherited TCP_NODELAY from its listener. */
    px_set_nodelay(c->upstream);
    c->status = 200;
    c->reason = PH_REASON_ALLOWED;
    c->detail[0] = '\0';
    px_metrics_request(PH_REASON_ALLOWED);
    /* The tunnel lives until the earliest of max_lifetime_s and the grant's
     * expiry (by this clock; the verifier's skew tolerance admits a request,
     * it does not lengthen a tunnel). */
    long life = c->w->cfg->max_lifetime_s;
    const char *life_end = "max_lifetime";
    int64_t left = c->grant.expires - (int64_t)time(NULL);
    if (left < life) {
        life = left > 0 ? (long)left : 0;
        life_end = "grant_expired";
    }
    int ufd = bufferevent_getfd(c->upstream);
    c->relay = px_relay_start(c->w->base, c->fd, ufd, c->head_buf + c->head_len,
                              c->head_got - c->head_len, ok + sent, sizeof ok - 1 - (size_t)sent,
                              c->w->cfg, life, life_end, &c->up, &c->down, relay_done, c);
    if (c->relay == NULL) {
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    /* The relay owns the sockets now: the upstream's leaves its bufferevent
     * (whose connect event is deleted before the loop applies it). */
    bufferevent_disable(c->upstream, EV_READ | EV_WRITE);
    bufferevent_setfd(c->upstream, -1);
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    c->fd = -1;
    free(c->head_buf);
    c->head_buf = NULL;
    c->head_got = c->head_len = 0;
    c->state = ST_RELAY;
    px_metrics_tunnel_open();
    px_relay_run(c->relay); /* may end the tunnel (and free c) at once */
}

/* ---- dial ---------------------------------------------------------------- */

static void connect_event_cb(struct bufferevent *b, short what, void *arg)
{
    px_conn *c = arg;
    (void)b;
    if (what & BEV_EVENT_CONNECTED) {
        start_relay(c);
        return;
    }
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    dial_next(c);
}

static void connect_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_conn *c = arg;
    c->timeouts++;
    bufferevent_free(c->upstream);
    c->upstream = NULL;
    dial_next(c);
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

static void dial_next(px_conn *c)
{
    while (c->next_addr < c->answer->naddrs) {
        struct sockaddr_storage ss = c->answer->addrs[c->next_addr++];
        socklen_t len;
        if (ss.ss_family == AF_INET) {
            ((struct sockaddr_in *)&ss)->sin_port = htons(c->auth.port);
            len = sizeof(struct sockaddr_in);
        } else {
            ((struct sockaddr_in6 *)&ss)->sin6_port = htons(c->auth.port);
            len = sizeof(struct sockaddr_in6);
        }
        px_sockaddr_format((struct sockaddr *)&ss, c->dialed, sizeof c->dialed);
        c->attempts++;
        c->upstream = bufferevent_socket_new(c->w->base, -1, BEV_OPT_CLOSE_ON_FREE);
        if (c->upstream == NULL)
            break;
        bufferevent_setcb(c->upstream, NULL, NULL, connect_event_cb, c);
        struct timeval tv = { c->w->cfg->connect_timeout_ms / 1000,
                              (c->w->cfg->connect_timeout_ms % 1000) * 1000 };
        /* The previous address's connect timer may still be pending (its
         * connect failed before the timer fired): assigning a pending event
         * corrupts the loop's timer heap, so it is deleted first. */
        evtimer_del(c->timer);
        evtimer_assign(c->timer, c->w->base, connect_timeout_cb, c);
        evtimer_add(c->timer, &tv);
        /* The address was checked; connect to exactly it, no name lookup. */
        if (bufferevent_socket_connect(c->upstream, (struct sockaddr *)&ss, (int)len) == 0) {
            /* dial_next runs only from callbacks (the DNS answer, the
             * upstream's events, the connect timer), after the head was
             * consumed, and returns at once: the relay may start here. */
            if (connected_at_once(bufferevent_getfd(c->upstream)))
                start_relay(c); /* may free c */
            return;
        }
        evtimer_del(c->timer);
        bufferevent_free(c->upstream);
        c->upstream = NULL;
    }
    c->dialed[0] = '\0';
    if (c->attempts > 0 && c->timeouts == c->attempts) {
        snprintf(c->detail, sizeof c->detail, "%d address(es) did not answer within %ld ms",
                 c->attempts, c->w->cfg->connect_timeout_ms);
        refuse_for(c, PH_REASON_UPSTREAM_TIMEOUT, c->detail);
    } else {
        snprintf(c->detail, sizeof c->detail, "%d address(es) refused or failed", c->attempts);
        refuse_for(c, PH_REASON_UPSTREAM_UNREACHABLE, c->detail);
    }
}

/* ---- resolve and check --------------------------------------------------- */

/* "a1 a2 ..." (addresses only, in answer order): what the guard checked and
 * dial_next may dial, for the log. NULL when out of memory. */
char *px_format_checked(const px_dns_answer *a)
{
    size_t cap = (size_t)a->naddrs * (INET6_ADDRSTRLEN + 1) + 1, n = 0;
    char *s = malloc(cap);
    if (s == NULL)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < a->naddrs; i++) {
        char one[INET6_ADDRSTRLEN];
        px_addr_format((const struct sockaddr *)&a->addrs[i], one, sizeof one);
        n += (size_t)snprintf(s + n, cap - n, "%s%s", i ? " " : "", one);
    }
    return s;
}

static void resolved(const px_dns_answer *a, void *arg)
{
    px_conn *c = arg;
    c->query = NULL;
    /* The guard checked every address; any denied one refused the answer
     * (a mixed answer is the DNS-rebinding case). */
    if (a->reason != PH_REASON_ALLOWED) {
        refuse_for(c, a->reason, a->detail);
        return;
    }
    c->answer = malloc(sizeof *c->answer);
    if (c->answer == NULL) {
        refuse_for(c, PH_REASON_UPSTREAM_UNREACHABLE, "out of memory");
        return;
    }
    *c->answer = *a;
    c->checked = px_format_checked(a);
    c->state = ST_CONNECT;
    c->next_addr = 0;
    dial_next(c);
}

/* ---- the head and the decision ------------------------------------------- */

static void decide(px_conn *c, const uint8_t *head, const ph_proxy_request *req)
{
    /* The guard decides (authority, grant, list) on one policy version. */
    const char *value = req->has_authorization ? (const char *)head + req->authorization.off : NULL;
    size_t vlen = req->has_authorization ? req->authorization.len : 0;
    ph_connect_request r = {
        .authority = (const char *)head + req->target.off,
        .authority_len = req->target.len,
        .proxy_authorization = value,
        .proxy_authorization_len = vlen,
        .now = (int64_t)time(NULL),
    };
    ph_decision d;
    ph_decide_connect(px_policy(), &r, &d);
    if (d.has_authority) {
        c->has_auth = true;
        c->auth.port = d.verdict.port;
        c->auth.host_len = strlen(d.verdict.host);
        memcpy(c->auth.host, d.verdict.host, c->auth.host_len + 1);
    }
    if (d.has_grant) {
        c->has_grant = true;
        c->grant = d.grant;
        snprintf(c->policy_id, sizeof c->policy_id, "%s", d.verdict.policy_id);
    }
    if (!d.allowed) {
        /* The client learns the code and the client-safe detail; the log
         * gets the full line. */
        refuse(c, d.http_status, d.reason, d.client_detail);
        snprintf(c->detail, sizeof c->detail, "%s", d.log_detail);
        return;
    }
    c->has_rule = d.verdict.has_rule;
    c->rule_line = d.verdict.rule_line;
    snprintf(c->rule_file, sizeof c->rule_file, "%s", d.verdict.rule_file);

    /* The per-lease limit (from the grant): the proxy's own resource. */
    if (!px_limits_lease_acquire(c->grant.tenant, c->grant.lease,
                                 c->w->cfg->max_connections_per_lease)) {
        refuse_for(c, PH_REASON_LIMIT_EXCEEDED, "too many connections for this lease");
        return;
    }
    c->lease_slot = true;

    /* Kept for rechecks after a reload (px_conn_recheck_all). */
    if ((c->token = malloc(vlen + 1)) == NULL) {
        refuse_for(c, PH_REASON_PROXY_OVERLOADED, "out of memory");
        return;
    }
    memcpy(c->token, value != NULL ? value : "", vlen);
    c->token[vlen] = '\0';
    c->token_len = vlen;

    /* What comes next (d.next == PH_NEXT_RESOLVE): resolve exactly this
     * name (the answer comes from the loop). */
    c->state = ST_RESOLVE;
    c->query = px_dns_resolve(c->w->dns, c->auth.host, resolved, c);
    if (c->query == NULL)
        refuse_for(c, PH_REASON_DNS_FAILURE, "out of memory");
}

static void head_read(px_conn *c);
static void head_parse(px_conn *c, const uint8_t *in, size_t n);

/* Not a CONNECT: forward.c serves the connection from here on, starting
 * with the bytes read so far (client_bev puts them in its input). */
static void forward_handoff(px_conn *c)
{
    evtimer_del(c->timer);
    struct bufferevent *b = client_bev(c);
    struct px_fwd *f = b ? px_forward_start(c, c->w, b, c->id, c->peer) : NULL;
    if (f == NULL) {
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    c->client = NULL;
    c->fwd = f;
    c->state = ST_FORWARD;
    px_forward_run(f); /* never frees c within the call (forward.h) */
}

void px_conn_forward_head_done(px_conn *c)
{
    leave_head(c);
}

void px_conn_forward_end(px_conn *c, const char *end)
{
    c->end = end;
    conn_free(c);
}

static void head_ev_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    head_read(arg);
}

/* The first read's bytes, per worker thread: most connections send their
 * whole head at once and keep only a copy of its size. */
static _Thread_local uint8_t head_scratch[HEAD_READ_MAX];

/* Parses the head read so far (in[0..n): head_buf, or the first read in
 * head_scratch, which is then kept in head_buf: of its own size when the
 * head is complete, HEAD_READ_MAX when the rest is still to come): decides
 * a complete head, refuses a bad one, waits for more of an incomplete one. */
static void head_parse(px_conn *c, const uint8_t *in, size_t n)
{
    /* A head arriving in pieces is parsed only when ph_h1_head_scan says a
     * line worth deciding ended, or at the cap; the scan resumes where it
     * stopped (head_len holds its mark until the head is parsed), so a
     * head sent a byte at a time costs time linear in its size. */
    ph_proxy_request req;
    ph_preq_result st = PH_PREQ_INCOMPLETE;
    size_t mark = c->head_len;
    bool parse = ph_h1_head_scan(in, n, &mark) || n >= PH_PREQ_HEAD_MAX;
    c->head_len = mark;
    if (parse) {
        px_metrics_head_parse();
        st = ph_proxy_request_parse(in, n, &req);
    }
    if (c->head_buf == NULL && n > 0) {
        if ((c->head_buf = malloc(st == PH_PREQ_INCOMPLETE ? HEAD_READ_MAX : n)) == NULL) {
            c->end = "out_of_memory";
            conn_free(c);
            return;
        }
        memcpy(c->head_buf, in, n);
        c->head_got = n;
    }
    const uint8_t *head = c->head_buf;
    if (px_forward_wants(head, c->head_got)) {
        forward_handoff(c);
        return;
    }
    switch (st) {
    case PH_PREQ_INCOMPLETE:
        if (c->head_ev == NULL) {
            c->head_ev = event_new(c->w->base, c->fd, EV_READ | EV_PERSIST, head_ev_cb, c);
            if (c->head_ev == NULL || event_add(c->head_ev, NULL) != 0) {
                c->end = "out_of_memory";
                conn_free(c);
            }
        }
        return;
    case PH_PREQ_REFUSED:
        refuse_for(c, req.reason, req.message);
        return;
    case PH_PREQ_DONE:
        break;
    }
    evtimer_del(c->timer);
    if (c->head_ev != NULL) {
        event_free(c->head_ev);
        c->head_ev = NULL;
    }
    leave_head(c);
    /* The spans point into head_buf; bytes after the head stay there for
     * the upstream (the relay's early bytes). */
    c->head_len = req.head_len;
    decide(c, head, &req);
}

/* Reads what the client sent (right after accept: TCP_DEFER_ACCEPT means
 * the head is normally there already) and parses it. */
static void head_read(px_conn *c)
{
    uint8_t *to = c->head_buf != NULL ? c->head_buf + c->head_got : head_scratch;
    ssize_t r = recv(c->fd, to, HEAD_READ_MAX - c->head_got, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (c->head_got == 0)
            head_parse(c, head_scratch, 0); /* nothing yet: arms the read event */
        return;
    }
    if (r <= 0) {
        c->end = r == 0 ? "client_closed" : "client_error";
        conn_free(c);
        return;
    }
    if (c->head_buf == NULL) {
        head_parse(c, head_scratch, (size_t)r);
        return;
    }
    c->head_got += (size_t)r;
    head_parse(c, c->head_buf, c->head_got);
}

static void head_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    refuse_for(arg, PH_REASON_HTTP_HEAD_TIMEOUT, "request head not complete in time");
}

/* Answers without allocating a connection (a limit at accept). */
static void refuse_raw(int fd, int status, ph_reason reason, const char *body)
{
    char resp[400];
    size_t n = px_format_refusal(resp, sizeof resp, status, reason, body);
    ssize_t wr = send(fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)wr;
    px_metrics_request(reason);
    close(fd);
}

static void refuse_at_accept(int fd, const char *peer, ph_reason reason, const char *why)
{
    char body[200];
    int status = ph_reason_http_status(reason);
    snprintf(body, sizeof body, "pinhole: %s: %s", ph_reason_code(reason), why);
    refuse_raw(fd, status, reason, body);
    px_log_record r = { .peer = peer, .status = status, .reason = reason, .detail = why };
    px_log_connection(&r);
}

/* The head slots (overall and the peer's) are held together, from accept
 * until the head was parsed or the connection ends. */
static void leave_head(px_conn *c)
{
    if (c->in_head) {
        c->in_head = false;
        px_limits_head_release();
        px_limits_peer_head_release(c->peer_key);
    }
}

/* Who connected, for the log and for the per-peer limit. TCP: the source
 * address (without the port). Unix socket: the connecting process
 * (SO_PEERCRED): every process of a gVisor sandbox reaches the socket
 * through the sandbox's one host process (runsc's sandbox process, with
 * --host-uds=open), while every sandbox may run as the same uid; so the pid
 * tells one sandbox from another and the uid does not. (Under docker, the
 * development fallback, each process of a container is a peer of its own.) */
static void peer_identity(int fd, const struct sockaddr *peer, char *log, size_t log_cap,
                          char key[64])
{
    if (peer->sa_family == AF_INET || peer->sa_family == AF_INET6) {
        char a[INET6_ADDRSTRLEN];
        px_sockaddr_format(peer, log, log_cap);
        px_addr_format(peer, a, sizeof a);
        snprintf(key, 64, "ip %s", a);
        return;
    }
    struct ucred cred = { 0 };
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
        snprintf(log, log_cap, "unix pid=%d uid=%u", (int)cred.pid, (unsigned)cred.uid);
        snprintf(key, 64, "pid %d", (int)cred.pid);
    } else {
        snprintf(log, log_cap, "unix");
        snprintf(key, 64, "unix");
    }
}

void px_conn_accept(px_worker *w, int fd, const struct sockaddr *peer, int peerlen)
{
    (void)peerlen;
    if (w->draining) {
        close(fd);
        return;
    }
    char peer_log[64], peer_key[64];
    peer_identity(fd, peer, peer_log, sizeof peer_log, peer_key);
    if (!px_limits_conn_acquire(w->cfg->max_connections)) {
        refuse_at_accept(fd, peer_log, PH_REASON_PROXY_OVERLOADED,
                         px_limits_conn_active() >= w->cfg->max_connections
                             ? "max_connections reached"
                             : "descriptor reserve reached (the descriptor limit caps connections)");
        return;
    }
    if (!px_limits_peer_acquire(peer_key, w->cfg->max_connections_per_peer)) {
        px_limits_conn_release();
        refuse_at_accept(fd, peer_log, PH_REASON_PEER_LIMIT_EXCEEDED,
                         "max_connections_per_peer reached for this peer");
        return;
    }
    if (!px_limits_peer_head_acquire(peer_key, w->cfg->max_head_connections_per_peer)) {
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        refuse_at_accept(fd, peer_log, PH_REASON_PEER_HEAD_LIMIT_EXCEEDED,
                         "max_head_connections_per_peer reached for this peer");
        return;
    }
    if (!px_limits_head_acquire(w->cfg->max_head_connections)) {
        px_limits_peer_head_release(peer_key);
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        refuse_at_accept(fd, peer_log, PH_REASON_PROXY_OVERLOADED, "max_head_connections reached");
        return;
    }
    px_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        px_limits_head_release();
        px_limits_peer_head_release(peer_key);
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        close(fd);
        return;
    }
    c->w = w;
    c->fd = fd;
    c->id = ((uint64_t)w->id << 48) | ++w->next_conn_seq;
    c->started_ns = ph_monotonic_ns();
    snprintf(c->peer, sizeof c->peer, "%s", peer_log);
    snprintf(c->peer_key, sizeof c->peer_key, "%s", peer_key);
    c->in_head = true;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    /* fd is non-blocking already: evconnlistener accepts with SOCK_NONBLOCK. */
    c->timer = evtimer_new(w->base, head_timeout_cb, c);
    if (c->timer == NULL) {
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    struct timeval tv = { w->cfg->header_timeout_ms / 1000,
                          (w->cfg->header_timeout_ms % 1000) * 1000 };
    evtimer_add(c->timer, &tv);
    head_read(c); /* may free c */
}
