/* forward_conn.c - a forwarding connection's life (forward-int.h): each
 * request's beginning, log line and end; refusals; the kept-alive
 * upstream; the request's deadline and the connection's timer (head,
 * keep-alive, flush, linger); the client watched while its request waits;
 * the end from the loop (reap), a reload's included (what a reload decides
 * the connection again on, and the line of one it ends between requests).
 * Calls nothing of forward.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "evbuffer_wipe.h"
#include "forward-int.h"
#include "forward.h"
#include "log_json.h"
#include "metrics.h"
#include "pinhole/clock.h"
#include "reply.h"
#include "upstream.h"

#define LINGER_MS 2000

static double since(int64_t started_ns)
{
    return (double)(ph_monotonic_ns() - started_ns) / 1e9;
}

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_fwd *f = arg;
    f->hooks->end(f->owner, f->reap_end); /* frees f */
}

void px_fwd_unwatch_client(px_fwd *f)
{
    if (f->watching_client) {
        f->watching_client = false;
        event_del(f->client_watch);
    }
}

/* The client's socket while its request waits for the answer (the request
 * was read whole and the client is not read: its next bytes belong to the
 * next request). A reset (or another socket error) ends the request
 * (end=client_closed): the upstream and the lease slot are not held for a
 * client that is gone. Looked at with MSG_PEEK, so nothing is taken from
 * the socket. Bytes pending (a pipelined request) or an EOF stop the watch
 * until the next request (the socket stays readable until they are read):
 * an EOF is a half-close, after which the client still gets its answer
 * (forward.c's client_event_cb), so a client that went away with a plain
 * close is seen only when its answer is written. */
static void client_watch_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    px_fwd *f = arg;
    if (f->resp_head_done) {
        /* The response is going out: its writes see a client that is gone. */
        px_fwd_unwatch_client(f);
        return;
    }
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n >= 0) {
        px_fwd_unwatch_client(f);
        return;
    }
    snprintf(f->detail, sizeof f->detail, "%s",
             errno == ECONNRESET ? "the client reset its connection before the response"
                                 : "the client's connection failed before the response");
    px_fwd_kill(f, "client_closed");
}

void px_fwd_watch_client(px_fwd *f)
{
    if (f->watching_client || f->resp_head_done)
        return;
    if (event_add(f->client_watch, NULL) == 0)
        f->watching_client = true;
}

void px_fwd_kill(px_fwd *f, const char *end)
{
    if (f->state == F_DEAD)
        return;
    f->state = F_DEAD;
    f->reap_end = end;
    struct bufferevent *bevs[] = { f->client, f->up, f->idle };
    for (size_t i = 0; i < sizeof bevs / sizeof *bevs; i++) {
        if (bevs[i] != NULL) {
            bufferevent_setcb(bevs[i], NULL, NULL, NULL, NULL);
            bufferevent_disable(bevs[i], EV_READ | EV_WRITE);
        }
    }
    evtimer_del(f->timer);
    evtimer_del(f->deadline);
    px_fwd_unwatch_client(f);
    if (f->dial != NULL)
        px_upstream_stop(&f->dial);
    event_active(f->reap, EV_TIMEOUT, 0);
}

void px_fwd_begin_request(px_fwd *f)
{
    f->in_request = true;
    f->started_ns = ph_monotonic_ns();
    f->method[0] = '\0';
    f->is_head = false;
    f->has_grant = f->has_host = f->has_rule = false;
    f->policy_id[0] = f->detail[0] = '\0';
    f->reused = f->retried = false;
    f->req_done = f->resp_head_done = f->resp_chunked_out = false;
    f->up_reusable = f->up_sent_any = f->up_write_failed = false;
    f->paused_client = f->paused_up = false;
    f->status = 0;
    f->reason = PH_REASON_ALLOWED;
    f->bytes_up = f->bytes_down = 0;
    ph_h1_chunked_init(&f->req_chunks);
    ph_h1_chunked_init(&f->resp_chunks);
}

/* The log record of a forwarding connection's line: what every line of it
 * names (the grant, the destination given, the rule, the detail, the time
 * since the request began, the ending); a request's line adds its own. */
static px_log_record fwd_record(const px_fwd *f, const char *host, uint16_t port, const char *end)
{
    return (px_log_record){
        .conn_id = f->conn_id,
        .peer = f->peer,
        .tenant = f->has_grant ? f->grant.tenant : NULL,
        .lease = f->has_grant ? f->grant.lease : NULL,
        .list = f->has_grant ? f->grant.list : NULL,
        .host = host,
        .port = port,
        .detail = f->detail[0] ? f->detail : NULL,
        .rule_file = f->has_rule ? f->rule_file : NULL,
        .rule_line = f->has_rule ? f->rule_line : 0,
        .policy_id = f->policy_id[0] ? f->policy_id : NULL,
        .duration_s = since(f->started_ns),
        .end = end,
    };
}

void px_fwd_end_request(px_fwd *f, const char *end)
{
    evtimer_del(f->deadline);
    px_fwd_unwatch_client(f);
    if (f->in_request) {
        f->in_request = false;
        px_log_record r = fwd_record(f, f->has_host ? f->host : NULL, f->has_host ? f->port : 0, end);
        r.dialed = f->dial != NULL ? px_upstream_dialed(f->dial) : NULL;
        r.checked = f->dial != NULL ? px_upstream_checked(f->dial) : NULL;
        r.status = f->status;
        r.reason = f->reason;
        r.bytes_up = f->bytes_up;
        r.bytes_down = f->bytes_down;
        r.method = f->method;
        px_log_connection(&r);
        if (f->status != 0)
            px_metrics_request(f->reason);
        px_metrics_bytes(f->bytes_up, f->bytes_down);
    }
    px_upstream_free(&f->dial); /* releases the lease slot */
    if (f->up_head != NULL)
        evbuffer_drain(f->up_head, evbuffer_get_length(f->up_head));
}

void px_fwd_linger(px_fwd *f)
{
    f->state = F_LINGER;
    shutdown(bufferevent_getfd(f->client), SHUT_WR);
    struct evbuffer *in = bufferevent_get_input(f->client);
    px_evbuffer_drain_wiped(in, evbuffer_get_length(in)); /* a head not taken holds a grant */
    bufferevent_setwatermark(f->client, EV_READ, 0, 0);
    bufferevent_disable(f->client, EV_WRITE);
    bufferevent_enable(f->client, EV_READ);
    struct timeval tv = msecs(LINGER_MS);
    evtimer_del(f->timer);
    evtimer_add(f->timer, &tv);
}

void px_fwd_close_after_flush(px_fwd *f, const char *end)
{
    f->state = F_CLOSING;
    f->reap_end = end;
    evtimer_del(f->timer);
    bufferevent_disable(f->client, EV_READ);
    bufferevent_setwatermark(f->client, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(f->client)) == 0)
        px_fwd_linger(f);
    else
        bufferevent_enable(f->client, EV_WRITE);
}

/* px_fwd_refuse, the request's line ending with end. */
static void refuse_ending(px_fwd *f, ph_reason reason, const char *client_detail,
                          const char *log_detail, const char *end)
{
    char body[PH_DIAG_MESSAGE_MAX + 128], resp[PH_DIAG_MESSAGE_MAX + 512];
    int status = ph_reason_http_status(reason);
    if (!f->in_request)
        px_fwd_begin_request(f);
    f->status = status;
    f->reason = reason;
    snprintf(f->detail, sizeof f->detail, "%s",
             log_detail != NULL && log_detail[0] ? log_detail : client_detail);
    snprintf(body, sizeof body, "pinhole: %s%s%s", ph_reason_code(reason),
             client_detail[0] ? ": " : "", client_detail);
    size_t n = px_format_refusal(resp, sizeof resp, status, reason, body);
    f->bytes_down += n;
    px_fwd_end_request(f, end);
    bev_free(&f->up);
    bev_free(&f->idle);
    bufferevent_write(f->client, resp, n);
    px_fwd_close_after_flush(f, end);
    if (f->state == F_CLOSING) {
        /* A client that does not read cannot hold the connection. */
        struct timeval tv = secs(5);
        evtimer_add(f->timer, &tv);
    }
}

void px_fwd_refuse(px_fwd *f, ph_reason reason, const char *client_detail,
                   const char *log_detail)
{
    refuse_ending(f, reason, client_detail, log_detail, "closed");
}

/* Frees a copy keep_bytes made (of len bytes and its NUL), wiped. */
static void drop_bytes(char **p, size_t len)
{
    if (*p != NULL)
        ph_secret_free(*p, len + 1);
    *p = NULL;
}

/* *dst (of *dst_len bytes, owned) becomes a NUL-terminated copy of
 * src[0..len), unless it holds those bytes already. False when out of
 * memory (*dst unchanged). A copy replaced goes wiped: it holds a grant. */
static bool keep_bytes(char **dst, size_t *dst_len, const void *src, size_t len)
{
    if (*dst != NULL && *dst_len == len && memcmp(*dst, src, len) == 0)
        return true;
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return false;
    if (len > 0)
        memcpy(copy, src, len);
    copy[len] = '\0';
    drop_bytes(dst, *dst_len);
    *dst = copy;
    *dst_len = len;
    return true;
}

bool px_fwd_keep_token(px_fwd *f, const uint8_t *token, size_t len)
{
    return keep_bytes(&f->last_token, &f->last_token_len, token, len);
}

void px_fwd_drop_idle(px_fwd *f)
{
    bev_free(&f->idle);
}

static void idle_read_cb(struct bufferevent *b, void *arg)
{
    (void)b;
    px_fwd_drop_idle(arg); /* bytes nobody asked for: the connection is not reusable */
}

static void idle_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    (void)what;
    px_fwd_drop_idle(arg);
}

void px_fwd_keep_idle(px_fwd *f)
{
    px_fwd_drop_idle(f);
    f->idle = f->up;
    f->idle_dest = f->up_dest;
    f->up = NULL;
    bufferevent_setcb(f->idle, idle_read_cb, NULL, idle_event_cb, f);
    bufferevent_set_timeouts(f->idle, NULL, NULL);
    bufferevent_enable(f->idle, EV_READ);
}

/* A forwarded request lives, like a tunnel, until the earliest of
 * max_lifetime_s (from its decision) and its grant's expiry, however its
 * upstream keeps it busy (interim responses, a trickled body) and however
 * long its client streams a body. */
static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_fwd *f = arg;
    if (!f->in_request || (f->state != F_RESOLVE && f->state != F_CONNECT &&
                           f->state != F_EXCHANGE))
        return;
    bool expired = strcmp(f->deadline_end, "grant_expired") == 0;
    if (!f->resp_head_done) {
        /* Whose side was slow: a client still sending its body (the
         * upstream taking what it was given) is named, not the upstream. */
        if (expired)
            px_fwd_refuse(f, PH_REASON_GRANT_EXPIRED, "the grant expired during the request", NULL);
        else if (f->state == F_EXCHANGE && !f->req_done && !f->paused_client &&
                 !f->up_write_failed)
            px_fwd_refuse(f, PH_REASON_CLIENT_TIMEOUT,
                          "the request body did not arrive within max_lifetime_s", NULL);
        else
            px_fwd_refuse(f, PH_REASON_UPSTREAM_TIMEOUT,
                       "the request did not complete within max_lifetime_s", NULL);
        return;
    }
    /* Part of the response was relayed: the client sees it cut short. */
    snprintf(f->detail, sizeof f->detail, "%s",
             expired ? "the grant expired during the response"
                     : "the response did not complete within max_lifetime_s");
    bev_free(&f->up);
    px_fwd_close_after_flush(f, f->deadline_end);
}

void px_fwd_arm_deadline(px_fwd *f)
{
    struct timeval tv = secs(px_upstream_lifetime(f->dial, &f->deadline_end));
    evtimer_add(f->deadline, &tv);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_fwd *f = arg;
    switch (f->state) {
    case F_HEAD:
        if (f->head_timer)
            px_fwd_refuse(f, PH_REASON_HTTP_HEAD_TIMEOUT, "request head not complete in time", NULL);
        else
            px_fwd_kill(f, "idle_timeout");
        return;
    case F_CLOSING:
        px_fwd_kill(f, "client_error"); /* it did not read its answer */
        return;
    case F_LINGER:
        px_fwd_kill(f, f->reap_end);
        return;
    default:
        return;
    }
}

bool px_forward_wants(const uint8_t *buf, size_t len)
{
    static const char connect[] = "CONNECT ";
    size_t n = len < sizeof connect - 1 ? len : sizeof connect - 1;
    return n > 0 && memcmp(buf, connect, n) != 0;
}

struct px_fwd *px_forward_start(const px_fwd_owner *hooks, void *owner, px_worker *w,
                                struct bufferevent *client, uint64_t conn_id, const char *peer)
{
    px_fwd *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->w = w;
    f->hooks = hooks;
    f->owner = owner;
    f->conn_id = conn_id;
    f->peer = peer;
    f->timer = evtimer_new(w->base, timer_cb, f);
    f->reap = event_new(w->base, -1, 0, reap_cb, f);
    f->deadline = evtimer_new(w->base, deadline_cb, f);
    f->client_watch = event_new(w->base, bufferevent_getfd(client), EV_READ | EV_PERSIST,
                                client_watch_cb, f);
    f->up_head = evbuffer_new();
    if (f->timer == NULL || f->reap == NULL || f->deadline == NULL || f->client_watch == NULL ||
        f->up_head == NULL) {
        if (f->timer)
            event_free(f->timer);
        if (f->reap)
            event_free(f->reap);
        if (f->deadline)
            event_free(f->deadline);
        if (f->client_watch)
            event_free(f->client_watch);
        if (f->up_head)
            evbuffer_free(f->up_head);
        free(f);
        return NULL;
    }
    f->client = client;
    f->state = F_HEAD;
    f->started_ns = ph_monotonic_ns();
    return f;
}

void px_forward_free(struct px_fwd **fp, const char *end)
{
    px_fwd *f = *fp;
    if (f == NULL)
        return;
    *fp = NULL;
    px_fwd_end_request(f, end);
    event_free(f->client_watch); /* before the socket it watches closes */
    bev_free(&f->up);
    bev_free(&f->idle);
    /* What the client sent and nobody took (a head not complete, one
     * refused, pipelined ones) goes wiped. */
    if (f->client != NULL)
        px_evbuffer_drain_wiped(bufferevent_get_input(f->client),
                                evbuffer_get_length(bufferevent_get_input(f->client)));
    bev_free(&f->client);
    event_free(f->timer);
    event_free(f->reap);
    event_free(f->deadline);
    evbuffer_free(f->up_head);
    drop_bytes(&f->tun_token, f->tun_token_len);
    drop_bytes(&f->last_token, f->last_token_len);
    ph_grant_memo_clear(&f->grant_memo);
    free(f);
}

struct px_fwd *px_forward_start_tunnel(const px_fwd_owner *hooks, void *owner, px_worker *w,
                                       struct bufferevent *client, uint64_t conn_id,
                                       const char *peer, const px_fwd_tunnel *t)
{
    px_fwd *f = px_forward_start(hooks, owner, w, client, conn_id, peer);
    if (f == NULL)
        return NULL;
    if (!keep_bytes(&f->tun_token, &f->tun_token_len, t->token, t->token_len)) {
        f->client = NULL; /* still the caller's */
        px_forward_free(&f, "out_of_memory");
        return NULL;
    }
    snprintf(f->tun_host, sizeof f->tun_host, "%s", t->host);
    f->tun_port = t->port;
    /* The CONNECT's decision is the last one until a request is decided
     * (px_fwd_begin_request clears it): the line of a reload that ends the
     * tunnel before its first request names its grant, rule and policy. */
    if (t->tenant != NULL && t->lease != NULL && t->list != NULL) {
        f->has_grant = true;
        snprintf(f->grant.tenant, sizeof f->grant.tenant, "%s", t->tenant);
        snprintf(f->grant.lease, sizeof f->grant.lease, "%s", t->lease);
        snprintf(f->grant.list, sizeof f->grant.list, "%s", t->list);
    }
    if (t->rule_file != NULL) {
        f->has_rule = true;
        snprintf(f->rule_file, sizeof f->rule_file, "%s", t->rule_file);
        f->rule_line = t->rule_line;
    }
    snprintf(f->policy_id, sizeof f->policy_id, "%s", t->policy_id ? t->policy_id : "");
    if (t->upstream != NULL) {
        /* The tunnel's connection, kept alive for the first request to its
         * address (forward.c reuses it only when the guard checked that
         * address again for the request). */
        fwd_dest *d = &f->up_dest;
        socklen_t sl = sizeof d->addr;
        memset(&d->addr, 0, sizeof d->addr);
        (void)getpeername(bufferevent_getfd(t->upstream), (struct sockaddr *)&d->addr, &sl);
        snprintf(d->host, sizeof d->host, "%s", t->host);
        d->port = t->port;
        snprintf(d->tenant, sizeof d->tenant, "%s", t->tenant ? t->tenant : "");
        snprintf(d->lease, sizeof d->lease, "%s", t->lease ? t->lease : "");
        snprintf(d->list, sizeof d->list, "%s", t->list ? t->list : "");
        f->up = t->upstream;
        px_fwd_keep_idle(f);
    }
    return f;
}

bool px_forward_recheck_target(const struct px_fwd *f, ph_recheck_request *r, bool *in_tunnel)
{
    /* Between requests or in one; a connection closing or lingering has
     * had its last answer. */
    if (f->state != F_HEAD && f->state != F_RESOLVE && f->state != F_CONNECT &&
        f->state != F_EXCHANGE)
        return false;
    *in_tunnel = f->tun_token != NULL;
    if (f->tun_token != NULL) {
        r->host = f->tun_host;
        r->port = f->tun_port;
        r->proxy_authorization = f->tun_token;
        r->proxy_authorization_len = f->tun_token_len;
        return true;
    }
    /* An allowed decision set both (one that refused ends the connection). */
    if (!f->has_host || f->last_token == NULL)
        return false;
    r->host = f->host;
    r->port = f->port;
    r->proxy_authorization = f->last_token;
    r->proxy_authorization_len = f->last_token_len;
    return true;
}

void px_forward_revoke(struct px_fwd *f, const char *end, ph_reason reason, const char *detail)
{
    if (f->state == F_DEAD)
        return;
    if (f->in_request && !f->resp_head_done) {
        /* Nothing of the answer went out yet: the client is told why, as a
         * CONNECT still resolving or dialing is (tunnel.c). */
        refuse_ending(f, reason, "the policy changed (reload)", detail, end);
        return;
    }
    snprintf(f->detail, sizeof f->detail, "%s", detail);
    if (!f->in_request) {
        /* px_fwd_end_request logs only a request in flight. */
        bool tun = f->tun_token != NULL;
        px_log_record r = fwd_record(f, tun ? f->tun_host : f->has_host ? f->host : NULL,
                                     tun ? f->tun_port : f->has_host ? f->port : 0, end);
        px_log_connection(&r);
    }
    px_fwd_kill(f, end);
}

bool px_forward_idle(const struct px_fwd *f)
{
    return f->state == F_HEAD && !f->in_request;
}
