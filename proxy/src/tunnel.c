/* tunnel.c - one client connection: read the request head, ask libpinhole
 * for the decision of DESIGN section 4, dial, hand over to the relay, and
 * write one log line at the end.
 *
 *   head -> ph_decide_connect (guard, once: authority, grant, allowlist on
 *           one pinned policy version; the verdict carries its HTTP status)
 *        -> upstream.c: per-lease limit (the proxy's own resource, 429),
 *           resolve exactly the name for the port (every address checked
 *           by the guard), dial the checked addresses in order, never
 *           re-resolving
 *        -> 200, relay (until the earliest of max_lifetime_s and the
 *           grant's expiry; after a reload ph_decide_again decides open
 *           connections again and says why one ends)
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
 * Memory: a connection is a small long-lived px_conn and, until it is a
 * tunnel (or forward.c's), its head phase (conn_head: the head's bytes, the
 * decision, the refusal's buffers), freed once the tunnel is established;
 * a tunnel keeps only what its log line and its rechecks need, packed in
 * one conn_tunnel, and its px_upstream once stopped (the lease slot, the
 * dialed and checked addresses). An idle tunnel is then its px_conn, its
 * conn_tunnel, its px_upstream and its relay (bench_proxy --idle-only
 * measures the bytes per tunnel).
 *
 * Ownership: a px_conn is freed only by conn_free, and every callback that
 * can reach conn_free (bufferevent callbacks, the head's read event, the
 * timer, the upstream's events, the relay's done) returns without touching
 * c afterwards; so does px_conn_accept, which may reach it too. Callbacks
 * that are not the connection's own never run synchronously inside a call
 * of this file, except where a call says so and is the last thing its
 * caller does with c: the upstream's (upstream.h) inside px_upstream_dial,
 * the relay's done inside px_relay_run / px_relay_stop. Bufferevent
 * callbacks are not run inside bufferevent_write/enable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
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
#include "reply.h"
#include "upstream.h"

/* ST_FORWARD: not a CONNECT; forward.c serves the connection (fwd). */
typedef enum conn_state { ST_HEAD, ST_RESOLVE, ST_CONNECT, ST_RELAY, ST_REPLY, ST_FORWARD } conn_state;

/* The strings of a connection's log line (and of a recheck: host, token),
 * by index; each may be absent (NULL). */
enum { CS_TENANT, CS_LEASE, CS_LIST, CS_HOST, CS_RULE_FILE, CS_POLICY_ID, CS_TOKEN, CS_DETAIL,
       CS_COUNT };

/* The head phase: from accept until the connection is a tunnel
 * (start_relay) or forward.c's (forward_handoff), or ends. Owned by its
 * px_conn (c->h) and freed with it (conn_free) or at that hand-over
 * (head_free). Every libevent object here (the bufferevent, head_ev,
 * timer) has the px_conn as its callback argument, never h, and is freed
 * (or handed over) by head_free: no callback of h's can run once h is
 * gone. */
typedef struct conn_head {
    struct bufferevent *client; /* only to answer a refusal */
    struct event *head_ev;      /* head reads after the first (NULL until needed) */
    struct event *timer;        /* head timeout */
    uint8_t *head_buf;          /* HEAD_READ_MAX: the head and the bytes after it */
    size_t head_got, head_len;  /* bytes in head_buf; the head's own length once parsed */
    char *token;                /* the Proxy-Authorization value, for rechecks */
    size_t token_len;
    /* the decision, as far as it got */
    bool has_grant, has_auth, has_rule;
    ph_grant grant;
    char host[PH_HOST_MAX + 1]; /* canonical (has_auth) */
    /* what the log needs of the guard's verdict (the verdict itself is big) */
    char rule_file[PH_VERDICT_FILE_MAX + 1];
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    char detail[PH_DIAG_MESSAGE_MAX + 64];
} conn_head;

/* What an established tunnel keeps of its decision, for its log line, its
 * rechecks and its lease slot: the strings (conn_strings' values then,
 * each NUL-terminated) packed in one allocation (tunnel_pack), owned by
 * the px_conn (c->t). */
#define CS_ABSENT UINT16_MAX
typedef struct conn_tunnel {
    uint16_t off[CS_COUNT];     /* each string's start in s, CS_ABSENT when absent */
    uint16_t token_len;
    char s[];
} conn_tunnel;

/* One client connection: the worker's list entry, from accept to the log
 * line. Small: an idle tunnel is this, its conn_tunnel and its relay. */
typedef struct px_conn {
    px_worker *w;
    struct px_conn *prev, *next;
    uint64_t id;
    int64_t started_ns;         /* ph_monotonic_ns() at accept */
    conn_head *h;               /* the head phase; NULL once a tunnel or forward.c's */
    conn_tunnel *t;             /* ST_RELAY: what the tunnel keeps */
    px_upstream *up;            /* from the decision on: the lease slot, the dial, the log's addresses */
    px_relay *relay;            /* ST_RELAY: owns both sockets */
    struct px_fwd *fwd;         /* ST_FORWARD: owns the client from then on */
    const char *end;
    uint64_t bytes_up, bytes_down;
    int fd;                     /* the client socket; -1 once h->client or the relay owns it */
    int status;
    ph_reason reason;
    uint32_t rule_line;         /* 0 without a rule */
    uint16_t port;              /* the authority's (0 without one) */
    uint8_t state;              /* conn_state */
    bool in_head;               /* holds a request-head slot */
    uint8_t key_off;            /* the per-peer limit's key: peer + key_off; "" = no slot held */
    char peer[];                /* who connected, for the log; then the key */
} px_conn;

static void conn_free(px_conn *c);
static void leave_head(px_conn *c);

/* The most one head read takes: a whole head and the tunnel bytes a client
 * sent right behind it (a TLS ClientHello fits). */
#define HEAD_READ_MAX (PH_PREQ_HEAD_MAX + 4096)

/* The client socket as a bufferevent, made on first use (a refusal is
 * written through it) with the bytes read so far in its input; the socket
 * is then the bufferevent's. NULL when out of memory. */
static struct bufferevent *client_bev(px_conn *c)
{
    conn_head *h = c->h;
    if (h->client != NULL)
        return h->client;
    struct bufferevent *b = bufferevent_socket_new(c->w->base, c->fd, BEV_OPT_CLOSE_ON_FREE);
    if (b == NULL)
        return NULL;
    /* A socket bufferevent's input is frozen at its end for everyone but
     * its own reads: thawed for the bytes read before it existed. */
    struct evbuffer *in = bufferevent_get_input(b);
    int added = 0;
    if (h->head_got > 0) {
        evbuffer_unfreeze(in, 0);
        added = evbuffer_add(in, h->head_buf, h->head_got);
        evbuffer_freeze(in, 0);
    }
    if (added != 0) {
        bufferevent_setfd(b, -1);
        bufferevent_free(b);
        return NULL;
    }
    if (h->head_ev != NULL) {
        event_free(h->head_ev);
        h->head_ev = NULL;
    }
    h->client = b;
    c->fd = -1;
    return b;
}

/* ---- replies ------------------------------------------------------------- */

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
 * a client that does not read cannot hold the connection). Only in the head
 * phase (c->h): a tunnel ends through its relay. */
static void refuse(px_conn *c, int status, ph_reason reason, const char *detail)
{
    conn_head *h = c->h;
    char body[PH_DIAG_MESSAGE_MAX + 128], resp[PH_DIAG_MESSAGE_MAX + 512];
    c->status = status;
    c->reason = reason;
    if (detail && detail != h->detail)
        snprintf(h->detail, sizeof h->detail, "%s", detail);
    snprintf(body, sizeof body, "pinhole: %s%s%s", ph_reason_code(reason),
             h->detail[0] ? ": " : "", h->detail);
    size_t n = px_format_refusal(resp, sizeof resp, status, reason, body);
    px_metrics_request(reason);
    leave_head(c);
    c->state = ST_REPLY;
    if (h->timer)
        evtimer_del(h->timer);
    if (c->up != NULL)
        px_upstream_stop(c->up);
    struct bufferevent *b = client_bev(c);
    if (b == NULL) {
        /* Out of memory: what the socket takes now, then the end, from the
         * loop (the callers still use c after this returns). */
        ssize_t wr = send(c->fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)wr;
        struct timeval now = { 0, 0 };
        evtimer_assign(h->timer, c->w->base, reply_unbuffered_cb, c);
        evtimer_add(h->timer, &now);
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

/* The connection's log strings (and a recheck's) in str[CS_COUNT], NULL
 * where absent, from wherever they are kept: the head phase's fields, or
 * the tunnel's packed copy of those same values. *token_len: the token's
 * length. Valid until h or t changes. */
static void conn_strings(const px_conn *c, const char *str[CS_COUNT], size_t *token_len)
{
    const conn_head *h = c->h;
    const conn_tunnel *t = c->t;
    *token_len = 0;
    for (int k = 0; k < CS_COUNT; k++)
        str[k] = t != NULL && t->off[k] != CS_ABSENT ? t->s + t->off[k] : NULL;
    if (t != NULL) {
        *token_len = t->token_len;
        return;
    }
    if (h == NULL)
        return;
    if (h->has_grant) {
        str[CS_TENANT] = h->grant.tenant;
        str[CS_LEASE] = h->grant.lease;
        str[CS_LIST] = h->grant.list;
    }
    str[CS_HOST] = h->has_auth ? h->host : NULL;
    str[CS_RULE_FILE] = h->has_rule ? h->rule_file : NULL;
    str[CS_POLICY_ID] = h->policy_id[0] ? h->policy_id : NULL;
    str[CS_TOKEN] = h->token;
    *token_len = h->token_len;
    str[CS_DETAIL] = h->detail[0] ? h->detail : NULL;
}

/* One allocation holding copies of str[CS_COUNT] (NULL: absent; the token
 * token_len bytes, the others NUL-terminated). NULL when out of memory. */
static conn_tunnel *tunnel_pack(const char *const str[CS_COUNT], size_t token_len)
{
    size_t len[CS_COUNT], total = 0;
    for (int k = 0; k < CS_COUNT; k++) {
        len[k] = str[k] == NULL ? 0 : (k == CS_TOKEN ? token_len : strlen(str[k]));
        total += str[k] == NULL ? 0 : len[k] + 1;
    }
    /* Bounded by the head (PH_PREQ_HEAD_MAX) and the fields' own caps. */
    if (total >= CS_ABSENT)
        return NULL;
    conn_tunnel *t = malloc(sizeof *t + total);
    if (t == NULL)
        return NULL;
    size_t at = 0;
    for (int k = 0; k < CS_COUNT; k++) {
        if (str[k] == NULL) {
            t->off[k] = CS_ABSENT;
            continue;
        }
        t->off[k] = (uint16_t)at;
        memcpy(t->s + at, str[k], len[k]);
        t->s[at + len[k]] = '\0';
        at += len[k] + 1;
    }
    t->token_len = (uint16_t)len[CS_TOKEN];
    return t;
}

static void conn_log(const px_conn *c)
{
    const char *str[CS_COUNT];
    size_t token_len;
    conn_strings(c, str, &token_len);
    px_log_record r = {
        .conn_id = c->id,
        .peer = c->peer,
        .tenant = str[CS_TENANT],
        .lease = str[CS_LEASE],
        .list = str[CS_LIST],
        .host = str[CS_HOST],
        .port = c->port,
        .dialed = c->up != NULL ? px_upstream_dialed(c->up) : NULL,
        .checked = c->up != NULL ? px_upstream_checked(c->up) : NULL,
        .status = c->status,
        .reason = c->reason,
        .detail = str[CS_DETAIL],
        .rule_file = str[CS_RULE_FILE],
        .rule_line = c->rule_line,
        .policy_id = str[CS_POLICY_ID],
        .bytes_up = c->bytes_up,
        .bytes_down = c->bytes_down,
        .duration_s = elapsed(c),
        .end = c->end,
    };
    px_log_connection(&r);
}

/* Frees the head phase and everything it holds (its events and
 * bufferevent: none of their callbacks runs afterwards). NULLs *hp. */
static void head_free(conn_head **hp)
{
    conn_head *h = *hp;
    if (h == NULL)
        return;
    free(h->token);
    free(h->head_buf);
    if (h->timer)
        event_free(h->timer);
    if (h->head_ev)
        event_free(h->head_ev);
    if (h->client)
        bufferevent_free(h->client);
    free(h);
    *hp = NULL;
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
    leave_head(c);
    if (c->peer[c->key_off])
        px_limits_peer_release(c->peer + c->key_off);
    px_upstream_free(&c->up); /* releases the lease slot */
    if (c->fd >= 0)
        close(c->fd);
    if (c->relay) {
        px_relay_free(&c->relay); /* closes both sockets */
        px_metrics_tunnel_close();
        px_metrics_bytes(c->bytes_up, c->bytes_down);
    }
    head_free(&c->h);
    free(c->t);
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

/* Decides an open connection again against the policy now in force (the
 * guard says whether it goes on and, if not, why it ends). */
static void recheck(px_conn *c)
{
    const char *str[CS_COUNT];
    size_t token_len;
    conn_strings(c, str, &token_len);
    ph_recheck_request r = {
        .host = str[CS_HOST] ? str[CS_HOST] : "",
        .port = c->port,
        .proxy_authorization = str[CS_TOKEN],
        .proxy_authorization_len = token_len,
        .now = (int64_t)time(NULL),
    };
    ph_decision d;
    ph_ending ending;
    if (ph_decide_again(px_policy(), &r, &d, &ending) == PH_OK ||
        (ending == PH_ENDING_POLICY_REVOKED && c->w->cfg->keep_tunnels_on_reload))
        return;
    const char *end = ph_ending_code(ending);
    char detail[PH_DIAG_MESSAGE_MAX + 64];
    snprintf(detail, sizeof detail, "after reload: %s", d.log_detail);
    if (c->state == ST_RELAY) {
        /* The log line gets the detail: the tunnel's strings again, with it
         * (out of memory: the line goes without it). */
        str[CS_DETAIL] = detail;
        conn_tunnel *t = tunnel_pack(str, token_len);
        if (t != NULL) {
            free(c->t);
            c->t = t;
        }
        px_relay_stop(c->relay, end); /* frees c */
        return;
    }
    c->end = end;
    refuse(c, d.http_status, d.reason, detail);
}

void px_conn_recheck_all(px_worker *w)
{
    px_conn *c = w->conns, *next;
    for (; c; c = next) {
        next = c->next; /* recheck frees at most c */
        /* Past the decision: resolving, dialing or a tunnel (each holds
         * the token the decision accepted). */
        if (c->state == ST_RESOLVE || c->state == ST_CONNECT || c->state == ST_RELAY)
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

static void start_relay(px_conn *c)
{
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    conn_head *h = c->h;
    /* The 200 goes out first, so the client's wake-up overlaps the set-up
     * below. Nothing can precede it: the client has been sent nothing, and
     * the upstream's first bytes are read only by the relay. What the
     * socket does not take now (never, in practice), the relay sends; an
     * error, the relay meets again and ends the tunnel with. */
    ssize_t sent = send(c->fd, ok, sizeof ok - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent < 0)
        sent = 0;
    /* The relay keeps the tunnel's deadlines; the upstream's connection is
     * the tunnel's now (with TCP_NODELAY; the client socket inherited it
     * from its listener), and of its dial only the log's strings and the
     * lease slot stay. */
    struct bufferevent *ub = px_upstream_take(c->up, NULL);
    px_upstream_stop(c->up);
    c->status = 200;
    c->reason = PH_REASON_ALLOWED;
    h->detail[0] = '\0';
    px_metrics_request(PH_REASON_ALLOWED);
    /* What the tunnel keeps of the head phase: the log's strings. */
    const char *str[CS_COUNT];
    size_t token_len;
    conn_strings(c, str, &token_len);
    conn_tunnel *t = tunnel_pack(str, token_len);
    if (t == NULL) {
        bufferevent_free(ub);
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    const char *life_end;
    long life = px_upstream_lifetime(c->up, &life_end);
    c->relay = px_relay_start(c->w->base, c->fd, bufferevent_getfd(ub), h->head_buf + h->head_len,
                              h->head_got - h->head_len, ok + sent, sizeof ok - 1 - (size_t)sent,
                              c->w->cfg, life, life_end, &c->bytes_up, &c->bytes_down, relay_done,
                              c);
    if (c->relay == NULL) {
        bufferevent_free(ub);
        free(t);
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    /* The relay owns the sockets now: the upstream's leaves its bufferevent
     * (whose connect event is deleted before the loop applies it), and the
     * head phase goes (nothing of it is pending: the head was parsed, the
     * dial ended, the timer and the client's read event are gone). */
    bufferevent_disable(ub, EV_READ | EV_WRITE);
    bufferevent_setfd(ub, -1);
    bufferevent_free(ub);
    c->fd = -1;
    head_free(&c->h);
    c->t = t;
    c->state = ST_RELAY;
    px_metrics_tunnel_open();
    px_relay_run(c->relay); /* may end the tunnel (and free c) at once */
}

/* ---- the upstream -------------------------------------------------------- */

static void upstream_cb(void *arg, px_up_event ev, ph_reason reason, const char *detail)
{
    px_conn *c = arg;
    switch (ev) {
    case PX_UP_RESOLVED:
        c->state = ST_CONNECT;
        px_upstream_dial(c->up); /* may free c */
        return;
    case PX_UP_CONNECTED:
        start_relay(c); /* may free c */
        return;
    case PX_UP_REFUSED:
        refuse_for(c, reason, detail);
        return;
    }
}

/* ---- the head and the decision ------------------------------------------- */

static void decide(px_conn *c, const uint8_t *head, const ph_proxy_request *req)
{
    conn_head *h = c->h;
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
        h->has_auth = true;
        c->port = d.verdict.port;
        snprintf(h->host, sizeof h->host, "%s", d.verdict.host);
    }
    if (d.has_grant) {
        h->has_grant = true;
        h->grant = d.grant;
        snprintf(h->policy_id, sizeof h->policy_id, "%s", d.verdict.policy_id);
    }
    if (!d.allowed) {
        /* The client learns the code and the client-safe detail; the log
         * gets the full line. */
        refuse(c, d.http_status, d.reason, d.client_detail);
        snprintf(h->detail, sizeof h->detail, "%s", d.log_detail);
        return;
    }
    h->has_rule = d.verdict.has_rule;
    c->rule_line = d.verdict.has_rule ? d.verdict.rule_line : 0;
    snprintf(h->rule_file, sizeof h->rule_file, "%s", d.verdict.rule_file);

    /* Kept for rechecks after a reload (px_conn_recheck_all). */
    if ((h->token = malloc(vlen + 1)) == NULL) {
        refuse_for(c, PH_REASON_PROXY_OVERLOADED, "out of memory");
        return;
    }
    memcpy(h->token, value != NULL ? value : "", vlen);
    h->token[vlen] = '\0';
    h->token_len = vlen;

    /* The lease slot, then exactly this name resolved for this port (the
     * answer comes from the loop). */
    ph_reason why;
    const char *detail;
    if ((c->up = px_upstream_start(c->w, &d, upstream_cb, c, &why, &detail)) == NULL) {
        refuse_for(c, why, detail);
        return;
    }
    c->state = ST_RESOLVE;
}

static void head_read(px_conn *c);
static void head_parse(px_conn *c, const uint8_t *in, size_t n);

/* Not a CONNECT: forward.c serves the connection from here on, starting
 * with the bytes read so far (client_bev puts them in its input). */
static void forward_handoff(px_conn *c)
{
    evtimer_del(c->h->timer);
    struct bufferevent *b = client_bev(c);
    struct px_fwd *f = b ? px_forward_start(c, c->w, b, c->id, c->peer) : NULL;
    if (f == NULL) {
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    /* The client is forward.c's now; the head phase goes (the bytes read
     * so far are in the client's input, the read event went with
     * client_bev, nothing else of it is pending). */
    c->h->client = NULL;
    head_free(&c->h);
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
    conn_head *h = c->h;
    ph_proxy_request req;
    ph_preq_result st = PH_PREQ_INCOMPLETE;
    size_t mark = h->head_len;
    bool parse = ph_h1_head_scan(in, n, &mark) || n >= PH_PREQ_HEAD_MAX;
    h->head_len = mark;
    if (parse) {
        px_metrics_head_parse();
        st = ph_proxy_request_parse(in, n, &req);
    }
    if (h->head_buf == NULL && n > 0) {
        if ((h->head_buf = malloc(st == PH_PREQ_INCOMPLETE ? HEAD_READ_MAX : n)) == NULL) {
            c->end = "out_of_memory";
            conn_free(c);
            return;
        }
        memcpy(h->head_buf, in, n);
        h->head_got = n;
    }
    const uint8_t *head = h->head_buf;
    if (px_forward_wants(head, h->head_got)) {
        forward_handoff(c);
        return;
    }
    switch (st) {
    case PH_PREQ_INCOMPLETE:
        if (h->head_ev == NULL) {
            h->head_ev = event_new(c->w->base, c->fd, EV_READ | EV_PERSIST, head_ev_cb, c);
            if (h->head_ev == NULL || event_add(h->head_ev, NULL) != 0) {
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
    evtimer_del(h->timer);
    if (h->head_ev != NULL) {
        event_free(h->head_ev);
        h->head_ev = NULL;
    }
    leave_head(c);
    /* The spans point into head_buf; bytes after the head stay there for
     * the upstream (the relay's early bytes). */
    h->head_len = req.head_len;
    decide(c, head, &req);
}

/* Reads what the client sent (right after accept: TCP_DEFER_ACCEPT means
 * the head is normally there already) and parses it. */
static void head_read(px_conn *c)
{
    conn_head *h = c->h;
    uint8_t *to = h->head_buf != NULL ? h->head_buf + h->head_got : head_scratch;
    ssize_t r = recv(c->fd, to, HEAD_READ_MAX - h->head_got, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (h->head_got == 0)
            head_parse(c, head_scratch, 0); /* nothing yet: arms the read event */
        return;
    }
    if (r <= 0) {
        c->end = r == 0 ? "client_closed" : "client_error";
        conn_free(c);
        return;
    }
    if (h->head_buf == NULL) {
        head_parse(c, head_scratch, (size_t)r);
        return;
    }
    h->head_got += (size_t)r;
    head_parse(c, h->head_buf, h->head_got);
}

static void head_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    refuse_for(arg, PH_REASON_HTTP_HEAD_TIMEOUT, "request head not complete in time");
}

static void refuse_at_accept(int fd, const char *peer, ph_reason reason, const char *why)
{
    px_refuse_socket(fd, reason, why);
    px_metrics_request(reason);
    px_log_record r = { .peer = peer, .status = ph_reason_http_status(reason), .reason = reason,
                        .detail = why };
    px_log_connection(&r);
}

/* The head slots (overall and the peer's) are held together, from accept
 * until the head was parsed or the connection ends. */
static void leave_head(px_conn *c)
{
    if (c->in_head) {
        c->in_head = false;
        px_limits_head_release();
        px_limits_peer_head_release(c->peer + c->key_off);
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
    /* peer_identity's strings fit their 64 bytes: key_off fits a byte. */
    size_t log_len = strlen(peer_log), key_len = strlen(peer_key);
    px_conn *c = calloc(1, sizeof *c + log_len + 1 + key_len + 1);
    conn_head *h = c != NULL ? calloc(1, sizeof *h) : NULL;
    if (h == NULL) {
        free(c);
        px_limits_head_release();
        px_limits_peer_head_release(peer_key);
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        close(fd);
        return;
    }
    c->w = w;
    c->h = h;
    c->fd = fd;
    c->id = ((uint64_t)w->id << 48) | ++w->next_conn_seq;
    c->started_ns = ph_monotonic_ns();
    memcpy(c->peer, peer_log, log_len + 1);
    c->key_off = (uint8_t)(log_len + 1);
    memcpy(c->peer + c->key_off, peer_key, key_len + 1);
    c->in_head = true;
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    /* fd is non-blocking already: evconnlistener accepts with SOCK_NONBLOCK. */
    h->timer = evtimer_new(w->base, head_timeout_cb, c);
    if (h->timer == NULL) {
        c->end = "out_of_memory";
        conn_free(c);
        return;
    }
    struct timeval tv = { w->cfg->header_timeout_ms / 1000,
                          (w->cfg->header_timeout_ms % 1000) * 1000 };
    evtimer_add(h->timer, &tv);
    head_read(c); /* may free c */
}
