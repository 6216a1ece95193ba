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
 * request-head caps (503 limit_exceeded, answered without reading).
 *
 * This file decides nothing itself: every verdict, and the HTTP status of
 * every refusal for a reason (ph_reason_http_status), comes from libpinhole.
 * The statuses written here are the request framing's (the parser's 4xx,
 * 408) and the proxy's own overload (503).
 *
 * Ownership: a px_conn is freed only by conn_free, and every callback that
 * can reach conn_free (bufferevent callbacks, the timer, the DNS answer, the
 * relay's done) returns without touching c afterwards. Callbacks that are
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

typedef enum conn_state { ST_HEAD, ST_RESOLVE, ST_CONNECT, ST_RELAY, ST_REPLY } conn_state;

typedef struct px_conn {
    px_worker *w;
    struct px_conn *prev, *next;
    uint64_t id;
    conn_state state;
    struct bufferevent *client, *upstream;
    struct event *timer;        /* head timeout, then connect timeout */
    struct px_dns_query *query; /* live handle while resolving (dns_async.c rule) */
    px_relay *relay;
    int64_t started_ns; /* ph_monotonic_ns() at accept */
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
static size_t format_refusal(char *buf, size_t cap, int status, ph_reason reason, const char *body)
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
    size_t n = format_refusal(resp, sizeof resp, status, reason, body);
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
    bufferevent_disable(c->client, EV_READ);
    bufferevent_setcb(c->client, NULL, reply_written_cb, reply_event_cb, c);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    struct timeval tv = { 5, 0 };
    bufferevent_set_timeouts(c->client, NULL, &tv);
    bufferevent_write(c->client, resp, n);
    bufferevent_enable(c->client, EV_WRITE);
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
    if (c->status == 0 && c->end == NULL)
        c->end = "client_closed"; /* closed before any answer */
    conn_log(c);
    if (c->query)
        px_dns_cancel(c->query);
    leave_head(c);
    if (c->peer_key[0])
        px_limits_peer_release(c->peer_key);
    free(c->answer);
    free(c->token);
    free(c->checked);
    if (c->timer)
        event_free(c->timer);
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
        if (c->state == ST_HEAD) {
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

static void set_nodelay(struct bufferevent *b)
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
    ssize_t sent = send(bufferevent_getfd(c->client), ok, sizeof ok - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0)
        sent = 0;
    evtimer_del(c->timer);
    free(c->answer);
    c->answer = NULL;
    set_nodelay(c->upstream);
    if (c->peer[0] != 'u') /* not a unix socket */
        set_nodelay(c->client);
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
    c->relay = px_relay_start(c->w->base, c->client, c->upstream, ok + sent,
                              sizeof ok - 1 - (size_t)sent, c->w->cfg, life, life_end,
                              &c->up, &c->down, relay_done, c);
    if (c->relay == NULL) {
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    c->client = c->upstream = NULL; /* the relay owns the sockets now */
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
static char *format_checked(const px_dns_answer *a)
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
    c->checked = format_checked(a);
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
        refuse(c, 503, PH_REASON_LIMIT_EXCEEDED, "out of memory");
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

static void head_read_cb(struct bufferevent *b, void *arg)
{
    px_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(b);
    size_t len = evbuffer_get_length(in);
    size_t n = len < PH_PREQ_HEAD_MAX ? len : PH_PREQ_HEAD_MAX;
    const uint8_t *head = evbuffer_pullup(in, (ev_ssize_t)n);
    ph_proxy_request req;
    switch (ph_proxy_request_parse(head, n, &req)) {
    case PH_PREQ_INCOMPLETE:
        return;
    case PH_PREQ_REFUSED:
        refuse(c, req.http_status, PH_REASON_PARSE_ERROR, req.message);
        return;
    case PH_PREQ_DONE:
        break;
    }
    evtimer_del(c->timer);
    bufferevent_disable(b, EV_READ);
    leave_head(c);
    decide(c, head, &req);
    /* Only now drop the head: the spans pointed into it. Bytes after it stay
     * queued for the upstream. */
    if (c->state != ST_REPLY)
        evbuffer_drain(in, req.head_len);
}

static void head_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    px_conn *c = arg;
    c->end = (what & BEV_EVENT_EOF) ? "client_closed" : "client_error";
    conn_free(c);
}

static void head_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    refuse(arg, 408, PH_REASON_PARSE_ERROR, "request head not complete in time");
}

/* Answers without allocating a connection (a limit at accept). */
static void refuse_raw(int fd, int status, ph_reason reason, const char *body)
{
    char resp[400];
    size_t n = format_refusal(resp, sizeof resp, status, reason, body);
    ssize_t wr = send(fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)wr;
    px_metrics_request(reason);
    close(fd);
}

static void refuse_at_accept(int fd, const char *peer, const char *why)
{
    char body[200];
    snprintf(body, sizeof body, "pinhole: limit_exceeded: %s", why);
    refuse_raw(fd, 503, PH_REASON_LIMIT_EXCEEDED, body);
    px_log_record r = { .peer = peer, .status = 503, .reason = PH_REASON_LIMIT_EXCEEDED,
                        .detail = why };
    px_log_connection(&r);
}

static void leave_head(px_conn *c)
{
    if (c->in_head) {
        c->in_head = false;
        px_limits_head_release();
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
        refuse_at_accept(fd, peer_log,
                         px_limits_conn_active() >= w->cfg->max_connections
                             ? "max_connections reached"
                             : "descriptor reserve reached (the descriptor limit caps connections)");
        return;
    }
    if (!px_limits_peer_acquire(peer_key, w->cfg->max_connections_per_peer)) {
        px_limits_conn_release();
        refuse_at_accept(fd, peer_log, "max_connections_per_peer reached for this peer");
        return;
    }
    if (!px_limits_head_acquire(w->cfg->max_head_connections)) {
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        refuse_at_accept(fd, peer_log, "max_head_connections reached");
        return;
    }
    px_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        px_limits_head_release();
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        close(fd);
        return;
    }
    c->w = w;
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
    c->client = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(w->base, head_timeout_cb, c);
    if (c->client == NULL || c->timer == NULL) {
        if (c->client == NULL)
            close(fd);
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    bufferevent_setcb(c->client, head_read_cb, NULL, head_event_cb, c);
    /* Never buffer more than a head: a longer one is 431 anyway. */
    bufferevent_setwatermark(c->client, EV_READ, 0, PH_PREQ_HEAD_MAX);
    bufferevent_enable(c->client, EV_READ);
    struct timeval tv = { w->cfg->header_timeout_ms / 1000,
                          (w->cfg->header_timeout_ms % 1000) * 1000 };
    evtimer_add(c->timer, &tv);
}
