/* forward.c - plain-HTTP forwarding: absolute-form requests
 * ("GET http://host/path HTTP/1.1"), any method, each decided exactly like a
 * CONNECT to the URL's host and port.
 *
 *   request head (http1.h: strict RFC 9112 framing, smuggling refused)
 *     -> https:// refused (https_use_connect); not absolute-form refused
 *        (origin_form)
 *     -> ph_decide_url (guard: URL, grant from Proxy-Authorization, list, on
 *        one pinned policy version; the verdict carries its status)
 *     -> per-lease limit -> resolve exactly that name, every address checked
 *        (the guard's resolver driver, dns_async.c) -> dial a checked address
 *        (or reuse the kept-alive upstream, when it was opened for the same
 *        host, port, grant tenant/lease/list and its address is among the
 *        checked ones)
 *     -> the head rewritten (origin-form target, Host from the URI, hop-by-hop
 *        fields removed, Via added), the body re-framed as it streams
 *     -> the response head framed as strictly before a byte of it is relayed
 *        (a response the proxy cannot frame: 502 if nothing was sent yet, else
 *        the connection ends), then its body re-framed to the client
 *     -> one log line per request; the next request is read only after this
 *        response ended, so pipelined requests are answered in order.
 *
 * No status is chosen here: every refusal's status is
 * ph_reason_http_status of its reason; forwarded responses carry the
 * upstream's status.
 *
 * Descriptors: at most two per client connection, as limits.c counts them
 * (the client, and either the kept-alive upstream or the current one: the
 * kept-alive one is closed before another is dialed).
 *
 * Ownership: forward.h. Every buffer is bounded: the request head
 * (PH_H1_REQUEST_HEAD_MAX), the response head (PH_H1_RESPONSE_HEAD_MAX), and
 * each body direction (buffer_bytes: reading the source stops while the sink
 * holds that much, and resumes below half).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "forward.h"
#include "pinhole/clock.h"
#include "pinhole/host.h"
#include "http1.h"
#include "pinhole/url.h"
#include "reply.h"
#include "upstream.h"

typedef enum fwd_state {
    F_HEAD,     /* waiting for (or reading) a request head */
    F_RESOLVE,  /* decided; resolving the name */
    F_CONNECT,  /* dialing the checked addresses */
    F_EXCHANGE, /* request and response streaming */
    F_CLOSING,  /* the last bytes are flushed to the client */
    F_LINGER,   /* flushed and half-closed: what the client still sends is
                 * read and dropped for a moment, so its unread bytes do not
                 * make the kernel reset the connection (and drop the answer
                 * before the client read it) */
    F_DEAD,     /* ended: the reap event frees it from the loop */
} fwd_state;

typedef struct px_fwd px_fwd;

/* What an upstream connection was opened for: it is reused only for the
 * same checked destination and the same grant. */
typedef struct fwd_dest {
    char host[PH_HOST_MAX + 1];
    uint16_t port;
    struct sockaddr_storage addr; /* the checked address dialed */
    char tenant[PH_GRANT_FIELD_MAX + 1];
    char lease[PH_GRANT_FIELD_MAX + 1];
    char list[PH_GRANT_FIELD_MAX + 1];
} fwd_dest;

struct px_fwd {
    px_worker *w;
    struct px_conn *owner;
    uint64_t conn_id;
    const char *peer;
    fwd_state state;
    struct bufferevent *client;
    struct bufferevent *up;   /* the current request's upstream */
    fwd_dest up_dest;
    struct bufferevent *idle; /* one kept-alive upstream, between requests */
    fwd_dest idle_dest;
    struct event *timer;      /* head or keep-alive timeout; connect timeout */
    struct event *reap;       /* ends the connection from the loop */
    struct event *client_watch; /* the client's socket while its request waits (watch_client) */
    bool watching_client;
    struct event *deadline;   /* the request's end of life (decide_deadline) */
    const char *deadline_end; /* "max_lifetime" or "grant_expired" */
    const char *reap_end;
    bool head_timer;          /* the timer counts a head's arrival */
    bool client_close;        /* close after this response */
    bool client_v10;          /* the request was HTTP/1.0 */
    bool paused_client;       /* client reading stopped: the upstream is full */
    bool paused_up;           /* upstream reading stopped: the client is full */
    ph_h1_head head;          /* the request head, then the response head */
    size_t head_scan;         /* how far ph_h1_head_scan examined the head being received */

    /* the request in flight */
    bool in_request;
    int64_t started_ns; /* ph_monotonic_ns() when forwarding began */
    char method[40];
    bool is_head;
    bool has_grant;
    ph_grant grant;
    bool has_host;
    char host[PH_HOST_MAX + 1];
    uint16_t port;
    bool has_rule;
    uint32_t rule_line;
    char rule_file[PH_VERDICT_FILE_MAX + 1];
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    px_upstream *dial;          /* from the decision to the end of the request: the lease slot */
    struct evbuffer *up_head;   /* the rewritten head, kept for one retry */
    bool reused, retried;
    ph_h1_body req_body;
    uint64_t req_left;
    ph_h1_chunked req_chunks;
    bool req_done;
    bool resp_head_done;
    ph_h1_body resp_body;
    uint64_t resp_left;
    ph_h1_chunked resp_chunks;
    bool resp_chunked_out;      /* re-framed as chunked to the client */
    bool up_reusable;
    bool up_sent_any;
    int status;
    ph_reason reason;
    char detail[PH_DIAG_MESSAGE_MAX + 64];
    uint64_t bytes_up, bytes_down;
};

static void client_head(px_fwd *f);
static void pump_request(px_fwd *f);
static void up_timeouts(px_fwd *f);
static void pump_response(px_fwd *f);

/* ---- small helpers ------------------------------------------------------- */

static size_t cap_bytes(const px_fwd *f)
{
    return (size_t)f->w->cfg->buffer_bytes;
}

static struct timeval secs(long s)
{
    return (struct timeval){ s, 0 };
}

static struct timeval msecs(long ms)
{
    return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

static double since(int64_t started_ns)
{
    return (double)(ph_monotonic_ns() - started_ns) / 1e9;
}

static void bev_free(struct bufferevent **b)
{
    if (*b != NULL) {
        bufferevent_free(*b);
        *b = NULL;
    }
}

static bool starts_with_ci(const uint8_t *p, size_t len, const char *lit)
{
    size_t n = strlen(lit);
    return len >= n && ph_h1_name_is(p, n, lit);
}

/* ---- the end of a connection, a request ---------------------------------- */

static void reap_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_fwd *f = arg;
    px_conn_forward_end(f->owner, f->reap_end); /* frees f */
}

static void unwatch_client(px_fwd *f)
{
    if (f->watching_client) {
        f->watching_client = false;
        event_del(f->client_watch);
    }
}

static void fwd_kill(px_fwd *f, const char *end);

/* The client's socket while its request waits for the answer (the request
 * was read whole and the client is not read: its next bytes belong to the
 * next request). A reset (or another socket error) ends the request
 * (end=client_closed): the upstream and the lease slot are not held for a
 * client that is gone. Looked at with MSG_PEEK, so nothing is taken from
 * the socket. Bytes pending (a pipelined request) or an EOF stop the watch
 * until the next request (the socket stays readable until they are read):
 * an EOF is a half-close, after which the client still gets its answer
 * (client_event_cb), so a client that went away with a plain close is seen
 * only when its answer is written. */
static void client_watch_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    px_fwd *f = arg;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n >= 0) {
        unwatch_client(f);
        return;
    }
    snprintf(f->detail, sizeof f->detail, "%s",
             errno == ECONNRESET ? "the client reset its connection before the response"
                                 : "the client's connection failed before the response");
    fwd_kill(f, "client_closed");
}

/* Watches the client's socket while its request, read whole, waits for its
 * response (client reading is off: see client_watch_cb). */
static void watch_client(px_fwd *f)
{
    if (f->watching_client || f->resp_head_done)
        return;
    if (event_add(f->client_watch, NULL) == 0)
        f->watching_client = true;
}

/* Ends the connection from the loop (forward.h: nothing is freed inside a
 * callback of ours). */
static void fwd_kill(px_fwd *f, const char *end)
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
    unwatch_client(f);
    if (f->dial != NULL)
        px_upstream_stop(f->dial);
    event_active(f->reap, EV_TIMEOUT, 0);
}

static void begin_request(px_fwd *f)
{
    f->in_request = true;
    f->started_ns = ph_monotonic_ns();
    f->method[0] = '\0';
    f->is_head = false;
    f->has_grant = f->has_host = f->has_rule = false;
    f->policy_id[0] = f->detail[0] = '\0';
    f->reused = f->retried = false;
    f->req_done = f->resp_head_done = f->resp_chunked_out = false;
    f->up_reusable = f->up_sent_any = false;
    f->paused_client = f->paused_up = false;
    f->status = 0;
    f->reason = PH_REASON_ALLOWED;
    f->bytes_up = f->bytes_down = 0;
    ph_h1_chunked_init(&f->req_chunks);
    ph_h1_chunked_init(&f->resp_chunks);
}

/* The request's log line and metrics, once; then its resources go. */
static void end_request(px_fwd *f, const char *end)
{
    evtimer_del(f->deadline);
    unwatch_client(f);
    if (f->in_request) {
        f->in_request = false;
        px_log_record r = {
            .conn_id = f->conn_id,
            .peer = f->peer,
            .tenant = f->has_grant ? f->grant.tenant : NULL,
            .lease = f->has_grant ? f->grant.lease : NULL,
            .list = f->has_grant ? f->grant.list : NULL,
            .host = f->has_host ? f->host : NULL,
            .port = f->has_host ? f->port : 0,
            .dialed = f->dial != NULL ? px_upstream_dialed(f->dial) : NULL,
            .checked = f->dial != NULL ? px_upstream_checked(f->dial) : NULL,
            .status = f->status,
            .reason = f->reason,
            .detail = f->detail[0] ? f->detail : NULL,
            .rule_file = f->has_rule ? f->rule_file : NULL,
            .rule_line = f->has_rule ? f->rule_line : 0,
            .policy_id = f->policy_id[0] ? f->policy_id : NULL,
            .bytes_up = f->bytes_up,
            .bytes_down = f->bytes_down,
            .duration_s = since(f->started_ns),
            .end = end,
            .method = f->method,
        };
        px_log_connection(&r);
        if (f->status != 0)
            px_metrics_request(f->reason);
        px_metrics_bytes(f->bytes_up, f->bytes_down);
    }
    px_upstream_free(&f->dial); /* releases the lease slot */
    if (f->up_head != NULL)
        evbuffer_drain(f->up_head, evbuffer_get_length(f->up_head));
}

#define LINGER_MS 2000

/* Everything was written: half-close, then read and drop what the client
 * still sends until it closes or LINGER_MS pass. */
static void linger(px_fwd *f)
{
    f->state = F_LINGER;
    shutdown(bufferevent_getfd(f->client), SHUT_WR);
    struct evbuffer *in = bufferevent_get_input(f->client);
    evbuffer_drain(in, evbuffer_get_length(in));
    bufferevent_setwatermark(f->client, EV_READ, 0, 0);
    bufferevent_disable(f->client, EV_WRITE);
    bufferevent_enable(f->client, EV_READ);
    struct timeval tv = msecs(LINGER_MS);
    evtimer_del(f->timer);
    evtimer_add(f->timer, &tv);
}

/* Flushes what the client has not been sent yet, then ends (lingering). */
static void close_after_flush(px_fwd *f, const char *end)
{
    f->state = F_CLOSING;
    f->reap_end = end;
    evtimer_del(f->timer);
    bufferevent_disable(f->client, EV_READ);
    bufferevent_setwatermark(f->client, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(f->client)) == 0)
        linger(f);
    else
        bufferevent_enable(f->client, EV_WRITE);
}

/* Refuses the request in flight (or a head that did not parse) with the
 * guard's status for reason, and closes once the answer is written. */
static void fwd_refuse(px_fwd *f, ph_reason reason, const char *client_detail,
                       const char *log_detail)
{
    char body[PH_DIAG_MESSAGE_MAX + 128], resp[PH_DIAG_MESSAGE_MAX + 512];
    int status = ph_reason_http_status(reason);
    if (!f->in_request)
        begin_request(f);
    f->status = status;
    f->reason = reason;
    snprintf(f->detail, sizeof f->detail, "%s",
             log_detail != NULL && log_detail[0] ? log_detail : client_detail);
    snprintf(body, sizeof body, "pinhole: %s%s%s", ph_reason_code(reason),
             client_detail[0] ? ": " : "", client_detail);
    size_t n = px_format_refusal(resp, sizeof resp, status, reason, body);
    f->bytes_down += n;
    end_request(f, "closed");
    bev_free(&f->up);
    bev_free(&f->idle);
    bufferevent_write(f->client, resp, n);
    close_after_flush(f, "closed");
    if (f->state == F_CLOSING) {
        /* A client that does not read cannot hold the connection. */
        struct timeval tv = secs(5);
        evtimer_add(f->timer, &tv);
    }
}

/* ---- the kept-alive upstream --------------------------------------------- */

static void drop_idle(px_fwd *f)
{
    bev_free(&f->idle);
}

static void idle_read_cb(struct bufferevent *b, void *arg)
{
    (void)b;
    drop_idle(arg); /* bytes nobody asked for: the connection is not reusable */
}

static void idle_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    (void)what;
    drop_idle(arg);
}

static void keep_idle(px_fwd *f)
{
    drop_idle(f);
    f->idle = f->up;
    f->idle_dest = f->up_dest;
    f->up = NULL;
    bufferevent_setcb(f->idle, idle_read_cb, NULL, idle_event_cb, f);
    bufferevent_set_timeouts(f->idle, NULL, NULL);
    bufferevent_enable(f->idle, EV_READ);
}

/* The kept-alive upstream serves this request: same host, port and grant,
 * and the address it is connected to is one the guard just checked. */
static bool idle_matches(const px_fwd *f)
{
    const fwd_dest *d = &f->idle_dest;
    return f->idle != NULL && d->port == f->port && strcmp(d->host, f->host) == 0 &&
           strcmp(d->tenant, f->grant.tenant) == 0 && strcmp(d->lease, f->grant.lease) == 0 &&
           strcmp(d->list, f->grant.list) == 0 && px_upstream_is_checked(f->dial, &d->addr);
}

/* ---- the next request ---------------------------------------------------- */

static void next_request(px_fwd *f)
{
    f->state = F_HEAD;
    f->head_timer = false;
    struct timeval tv = secs(f->w->cfg->idle_timeout_s);
    evtimer_del(f->timer);
    evtimer_add(f->timer, &tv);
    bufferevent_setwatermark(f->client, EV_READ, 0, PH_H1_REQUEST_HEAD_MAX);
    bufferevent_enable(f->client, EV_READ);
    client_head(f); /* a pipelined request may be buffered already */
}

static void response_done(px_fwd *f)
{
    bool reuse = f->up_reusable && f->req_done &&
                 evbuffer_get_length(bufferevent_get_input(f->up)) == 0;
    /* A response that ended before its request's body: where the next
     * request starts is unknown, so this is the connection's last. */
    if (!f->req_done)
        f->client_close = true;
    end_request(f, "done");
    if (reuse)
        keep_idle(f);
    else
        bev_free(&f->up);
    if (f->client_close || f->w->draining)
        close_after_flush(f, "closed");
    else
        next_request(f);
}

/* ---- bodies -------------------------------------------------------------- */

/* Decodes chunked bytes from in and writes their data to out, as chunks
 * (chunked_out) or as plain bytes. 1: the body ended, 0: more to come, -1:
 * malformed (st->reason). */
static int rechunk(struct evbuffer *in, struct evbuffer *out, ph_h1_chunked *st, bool chunked_out,
                   uint64_t *count)
{
    size_t avail = evbuffer_get_length(in);
    if (avail > 65536)
        avail = 65536;
    const uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)avail);
    size_t used = 0;
    int res = 0;
    while (used < avail) {
        ph_h1_chunk_step s;
        ph_h1_result r = ph_h1_chunked_step(st, p + used, avail - used, &s);
        if (s.data_len > 0) {
            if (chunked_out)
                evbuffer_add_printf(out, "%zx\r\n", s.data_len);
            evbuffer_add(out, p + used + s.data_off, s.data_len);
            if (chunked_out)
                evbuffer_add(out, "\r\n", 2);
            *count += s.data_len;
        }
        used += s.consumed;
        if (r == PH_H1_DONE) {
            if (chunked_out)
                evbuffer_add(out, "0\r\n\r\n", 5);
            res = 1;
            break;
        }
        if (r == PH_H1_REFUSED) {
            res = -1;
            break;
        }
        if (s.consumed == 0)
            break;
    }
    evbuffer_drain(in, used);
    return res;
}

/* Client -> upstream: the request body, with backpressure. */
static void pump_request(px_fwd *f)
{
    struct evbuffer *in = bufferevent_get_input(f->client);
    struct evbuffer *out = bufferevent_get_output(f->up);
    while (!f->req_done && evbuffer_get_length(in) > 0) {
        if (evbuffer_get_length(out) >= cap_bytes(f)) {
            f->paused_client = true;
            bufferevent_disable(f->client, EV_READ);
            return;
        }
        if (f->req_body == PH_H1_BODY_LENGTH) {
            size_t n = evbuffer_get_length(in);
            if (n > f->req_left)
                n = (size_t)f->req_left;
            if (n > cap_bytes(f))
                n = cap_bytes(f);
            evbuffer_remove_buffer(in, out, n);
            f->req_left -= n;
            f->bytes_up += n;
            f->req_done = f->req_left == 0;
            continue;
        }
        int r = rechunk(in, out, &f->req_chunks, true, &f->bytes_up);
        if (r < 0) {
            /* The upstream got the head and whole chunks only: it sees a
             * truncated body, never bytes it could take for a request. */
            char d[PH_DIAG_MESSAGE_MAX];
            snprintf(d, sizeof d, "request body: %s", f->req_chunks.message);
            if (f->resp_head_done) {
                f->reason = f->req_chunks.reason;
                snprintf(f->detail, sizeof f->detail, "%s", d);
                fwd_kill(f, "client_error");
            } else {
                fwd_refuse(f, f->req_chunks.reason, d, NULL);
            }
            return;
        }
        f->req_done = r > 0;
    }
    if (f->req_done) {
        bufferevent_disable(f->client, EV_READ); /* the next request waits */
        up_timeouts(f);
        watch_client(f);
    }
}

/* Upstream -> client: the response body, with backpressure. */
static void pump_response(px_fwd *f)
{
    struct evbuffer *in = bufferevent_get_input(f->up);
    struct evbuffer *out = bufferevent_get_output(f->client);
    for (;;) {
        if (f->resp_body == PH_H1_BODY_NONE ||
            (f->resp_body == PH_H1_BODY_LENGTH && f->resp_left == 0)) {
            response_done(f);
            return;
        }
        size_t avail = evbuffer_get_length(in);
        if (avail == 0)
            return;
        if (evbuffer_get_length(out) >= cap_bytes(f)) {
            f->paused_up = true;
            bufferevent_disable(f->up, EV_READ);
            return;
        }
        if (f->resp_body == PH_H1_BODY_LENGTH) {
            size_t n = avail < f->resp_left ? avail : (size_t)f->resp_left;
            evbuffer_remove_buffer(in, out, n);
            f->resp_left -= n;
            f->bytes_down += n;
        } else if (f->resp_body == PH_H1_BODY_CLOSE) {
            evbuffer_remove_buffer(in, out, avail); /* ends at the upstream's EOF */
            f->bytes_down += avail;
        } else {
            int r = rechunk(in, out, &f->resp_chunks, f->resp_chunked_out, &f->bytes_down);
            if (r < 0) {
                /* Part of it was relayed: the client sees it cut short. */
                snprintf(f->detail, sizeof f->detail, "response body (%s): %s",
                         ph_reason_code(f->resp_chunks.reason), f->resp_chunks.message);
                bev_free(&f->up);
                close_after_flush(f, "upstream_error");
                return;
            }
            if (r > 0) {
                response_done(f);
                return;
            }
        }
    }
}

/* ---- heads --------------------------------------------------------------- */

/* Fields a proxy removes in either direction (RFC 9110 section 7.6.1), the
 * framing fields it writes itself, and Pinhole-Reason, which only the
 * proxy's own refusals carry (an upstream must not forge one). */
static bool dropped_field(const uint8_t *buf, const ph_h1_head *h, const ph_h1_field *fl)
{
    static const char *const names[] = {
        "connection", "keep-alive",          "proxy-connection",   "te",
        "trailer",    "upgrade",             "proxy-authorization", "proxy-authenticate",
        "host",       "transfer-encoding",   "content-length",     "pinhole-reason",
    };
    const uint8_t *n = buf + fl->name.off;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (ph_h1_name_is(n, fl->name.len, names[i]))
            return true;
    return ph_h1_connection_lists(buf, h, n, fl->name.len);
}

static void copy_fields(struct evbuffer *out, const uint8_t *buf, const ph_h1_head *h)
{
    for (unsigned i = 0; i < h->nfields; i++) {
        const ph_h1_field *fl = &h->fields[i];
        if (!dropped_field(buf, h, fl))
            evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)fl->name.len,
                                (const char *)buf + fl->name.off, (int)fl->value.len,
                                (const char *)buf + fl->value.off);
    }
}

/* A response head the proxy cannot frame, or an upstream that failed
 * before one: 502 (or the reason's status) while the client has been sent
 * nothing of it; else the connection ends once what was relayed is
 * flushed. */
static void upstream_failed(px_fwd *f, ph_reason reason, const char *detail)
{
    if (!f->resp_head_done) {
        fwd_refuse(f, reason, "", detail);
        return;
    }
    /* What was relayed reaches the client, which sees the body cut short. */
    snprintf(f->detail, sizeof f->detail, "%s", detail);
    bev_free(&f->up);
    close_after_flush(f, "upstream_error");
}

/* Writes the client's response head (status and fields from the upstream,
 * re-framed) and sets up the body. */
static void response_head(px_fwd *f, const uint8_t *buf, const ph_h1_head *h)
{
    /* From here a client that is gone shows in the writes. */
    unwatch_client(f);
    f->status = h->status;
    f->reason = PH_REASON_ALLOWED;
    f->resp_body = h->body;
    f->resp_left = h->content_length;
    f->up_reusable = h->version_minor == 1 && !h->conn_close && h->body != PH_H1_BODY_CLOSE;
    f->resp_chunked_out = h->body == PH_H1_BODY_CHUNKED && !f->client_v10;
    if (h->body == PH_H1_BODY_CLOSE || (h->body == PH_H1_BODY_CHUNKED && f->client_v10))
        f->client_close = true;
    struct evbuffer *out = bufferevent_get_output(f->client);
    size_t before = evbuffer_get_length(out);
    evbuffer_add_printf(out, "HTTP/1.1 %d %.*s\r\n", h->status, (int)h->reason_phrase.len,
                        (const char *)buf + h->reason_phrase.off);
    copy_fields(out, buf, h);
    if (h->body == PH_H1_BODY_LENGTH || (h->body == PH_H1_BODY_NONE && h->has_content_length))
        evbuffer_add_printf(out, "Content-Length: %llu\r\n", (unsigned long long)h->content_length);
    if (f->resp_chunked_out)
        evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
    evbuffer_add(out, "Via: 1.1 pinhole\r\n", 18);
    if (f->client_close)
        evbuffer_add(out, "Connection: close\r\n", 19);
    evbuffer_add(out, "\r\n", 2);
    f->bytes_down += evbuffer_get_length(out) - before;
}

static void up_read_cb(struct bufferevent *b, void *arg)
{
    px_fwd *f = arg;
    struct evbuffer *in = bufferevent_get_input(b);
    if (f->state != F_EXCHANGE)
        return;
    if (evbuffer_get_length(in) > 0)
        f->up_sent_any = true;
    while (!f->resp_head_done) {
        size_t len = evbuffer_get_length(in);
        if (len == 0)
            return;
        /* Interim responses are relayed too: an upstream sending them
         * without end must not grow the client's buffer past its bound
         * (client_write_cb resumes). */
        if (evbuffer_get_length(bufferevent_get_output(f->client)) >= cap_bytes(f)) {
            f->paused_up = true;
            bufferevent_disable(f->up, EV_READ);
            return;
        }
        size_t n = len < PH_H1_RESPONSE_HEAD_MAX ? len : PH_H1_RESPONSE_HEAD_MAX;
        const uint8_t *buf = evbuffer_pullup(in, (ev_ssize_t)n);
        ph_h1_head *h = &f->head;
        /* Parsed only when a line worth deciding ended or at the cap: a
         * head arriving in pieces is not read again from its start. */
        if (buf == NULL ||
            (!ph_h1_head_scan(buf, n, &f->head_scan) && n < PH_H1_RESPONSE_HEAD_MAX))
            return;
        px_metrics_head_parse();
        switch (ph_h1_parse_response(buf, n, f->is_head, h)) {
        case PH_H1_INCOMPLETE:
            return;
        case PH_H1_REFUSED: {
            char d[PH_DIAG_MESSAGE_MAX];
            snprintf(d, sizeof d, "response head (%s): %s at byte %zu", ph_reason_code(h->reason),
                     h->message, h->error_offset);
            upstream_failed(f, PH_REASON_UPSTREAM_BAD_RESPONSE, d);
            return;
        }
        case PH_H1_DONE:
            break;
        }
        if (h->status < 200) {
            if (h->status == 101) {
                upstream_failed(f, PH_REASON_UPSTREAM_BAD_RESPONSE,
                                "101 Switching Protocols: no upgrade was forwarded");
                return;
            }
            /* An interim response (100 Continue, 103): the status line goes
             * to an HTTP/1.1 client, its fields do not. */
            if (!f->client_v10) {
                struct evbuffer *out = bufferevent_get_output(f->client);
                size_t before = evbuffer_get_length(out);
                evbuffer_add_printf(out, "HTTP/1.1 %d %.*s\r\n\r\n", h->status,
                                    (int)h->reason_phrase.len,
                                    (const char *)buf + h->reason_phrase.off);
                f->bytes_down += evbuffer_get_length(out) - before;
            }
            evbuffer_drain(in, h->head_len);
            f->head_scan = 0;
            continue;
        }
        response_head(f, buf, h);
        evbuffer_drain(in, h->head_len);
        f->head_scan = 0;
        f->resp_head_done = true;
    }
    pump_response(f);
}

static void up_write_cb(struct bufferevent *b, void *arg)
{
    (void)b;
    px_fwd *f = arg;
    if (f->state == F_EXCHANGE && f->paused_client) {
        f->paused_client = false;
        bufferevent_enable(f->client, EV_READ);
        pump_request(f);
    }
}

/* RFC 9110 9.2.2: the idempotent methods, the only ones a proxy may send
 * again by itself. */
static bool method_idempotent(const char *m)
{
    static const char *const idem[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
    for (size_t i = 0; i < sizeof idem / sizeof idem[0]; i++)
        if (strcmp(m, idem[i]) == 0)
            return true;
    return false;
}

/* A kept-alive connection the upstream closed just as it was reused: the
 * request goes once more on a new connection, when nothing of it was
 * answered, it had no body (it can be sent again whole) and its method is
 * idempotent (a POST the upstream may have acted on is never repeated). */
static bool retry_fresh(px_fwd *f)
{
    if (!f->reused || f->retried || f->up_sent_any || f->req_body != PH_H1_BODY_NONE ||
        !method_idempotent(f->method))
        return false;
    f->retried = true;
    f->reused = false;
    bev_free(&f->up);
    f->state = F_CONNECT;
    px_upstream_dial(f->dial); /* its callback may run within */
    return true;
}

static void up_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    px_fwd *f = arg;
    /* A connect that completed inside connect(2) (upstream.h) is still
     * reported once, at the first write. */
    if (f->state != F_EXCHANGE || what == BEV_EVENT_CONNECTED)
        return;
    if ((what & BEV_EVENT_EOF) && f->resp_head_done && f->resp_body == PH_H1_BODY_CLOSE) {
        f->up_reusable = false;
        response_done(f);
        return;
    }
    if (retry_fresh(f))
        return;
    if (what & BEV_EVENT_TIMEOUT)
        upstream_failed(f, PH_REASON_UPSTREAM_TIMEOUT,
                        "the upstream sent nothing within idle_timeout_s");
    else if (what & BEV_EVENT_EOF)
        upstream_failed(f, PH_REASON_UPSTREAM_BAD_RESPONSE,
                        "the upstream closed before its response was complete");
    else
        upstream_failed(f, PH_REASON_UPSTREAM_UNREACHABLE, "upstream connection error");
}

/* ---- dial ---------------------------------------------------------------- */

/* While the request body streams, the upstream need not answer: only its
 * taking the bytes is timed (the client's sending is timed on its side).
 * Once the request is sent, the answer must come within idle_timeout_s. */
static void up_timeouts(px_fwd *f)
{
    struct timeval idle = secs(f->w->cfg->idle_timeout_s);
    bufferevent_set_timeouts(f->up, f->req_done ? &idle : NULL, &idle);
}

static void start_exchange(px_fwd *f)
{
    evtimer_del(f->timer);
    f->state = F_EXCHANGE;
    bufferevent_setcb(f->up, up_read_cb, up_write_cb, up_event_cb, f);
    size_t hi = cap_bytes(f) > PH_H1_RESPONSE_HEAD_MAX ? cap_bytes(f) : PH_H1_RESPONSE_HEAD_MAX;
    bufferevent_setwatermark(f->up, EV_READ, 0, hi);
    bufferevent_setwatermark(f->up, EV_WRITE, cap_bytes(f) / 2, 0);
    up_timeouts(f);
    size_t n = evbuffer_get_length(f->up_head);
    bufferevent_write(f->up, evbuffer_pullup(f->up_head, (ev_ssize_t)n), n);
    f->bytes_up += n;
    bufferevent_enable(f->up, EV_READ | EV_WRITE);
    if (!f->req_done) {
        bufferevent_setwatermark(f->client, EV_READ, 0, cap_bytes(f));
        bufferevent_enable(f->client, EV_READ);
        pump_request(f);
    }
}

/* The upstream's path (upstream.h): the checked addresses, then the
 * kept-alive upstream reused or a new connection dialed. Ends every case
 * with a call that may run this callback again or refuse the request. */
static void upstream_cb(void *arg, px_up_event ev, ph_reason reason, const char *detail)
{
    px_fwd *f = arg;
    switch (ev) {
    case PX_UP_RESOLVED:
        if (idle_matches(f)) {
            f->up = f->idle;
            f->up_dest = f->idle_dest;
            f->idle = NULL;
            f->reused = true;
            px_upstream_set_dialed(f->dial, (const struct sockaddr *)&f->up_dest.addr);
            start_exchange(f);
            return;
        }
        drop_idle(f);
        f->state = F_CONNECT;
        px_upstream_dial(f->dial);
        return;
    case PX_UP_CONNECTED: {
        fwd_dest *d = &f->up_dest;
        f->up = px_upstream_take(f->dial, &d->addr);
        snprintf(d->host, sizeof d->host, "%s", f->host);
        d->port = f->port;
        snprintf(d->tenant, sizeof d->tenant, "%s", f->grant.tenant);
        snprintf(d->lease, sizeof d->lease, "%s", f->grant.lease);
        snprintf(d->list, sizeof d->list, "%s", f->grant.list);
        start_exchange(f);
        return;
    }
    case PX_UP_REFUSED:
        fwd_refuse(f, reason, detail, NULL);
        return;
    }
}

/* ---- the request head and the decision ----------------------------------- */

/* The Proxy-Authorization value, or NULL (*several set when it appears
 * more than once). */
static const uint8_t *proxy_authorization(const uint8_t *buf, const ph_h1_head *h, size_t *len,
                                          bool *several)
{
    const uint8_t *v = NULL;
    *several = false;
    for (unsigned i = 0; i < h->nfields; i++) {
        const ph_h1_field *fl = &h->fields[i];
        if (!ph_h1_name_is(buf + fl->name.off, fl->name.len, "proxy-authorization"))
            continue;
        if (v != NULL)
            *several = true;
        v = buf + fl->value.off;
        *len = fl->value.len;
    }
    return v;
}

/* The request head for the upstream: origin-form target, Host from the URI,
 * the client's end-to-end fields, the body's framing, Via. */
static void rewrite_head(px_fwd *f, const uint8_t *buf, const ph_h1_head *h, const ph_url *u)
{
    struct evbuffer *o = f->up_head;
    const char *target = (const char *)buf + h->target.off;
    if (u->path_len > 0)
        evbuffer_add_printf(o, "%s %.*s HTTP/1.1\r\n", f->method, (int)u->path_len,
                            target + u->path_offset);
    else
        evbuffer_add_printf(o, "%s / HTTP/1.1\r\n", f->method);
    if (f->port == 80)
        evbuffer_add_printf(o, "Host: %s\r\n", f->host);
    else
        evbuffer_add_printf(o, "Host: %s:%u\r\n", f->host, (unsigned)f->port);
    copy_fields(o, buf, h);
    if (h->body == PH_H1_BODY_LENGTH)
        evbuffer_add_printf(o, "Content-Length: %llu\r\n", (unsigned long long)h->content_length);
    else if (h->body == PH_H1_BODY_CHUNKED)
        evbuffer_add(o, "Transfer-Encoding: chunked\r\n", 28);
    evbuffer_add(o, "Via: 1.1 pinhole\r\n\r\n", 20);
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
        if (expired)
            fwd_refuse(f, PH_REASON_GRANT_EXPIRED, "the grant expired during the request", NULL);
        else
            fwd_refuse(f, PH_REASON_UPSTREAM_TIMEOUT,
                       "the request did not complete within max_lifetime_s", NULL);
        return;
    }
    /* Part of the response was relayed: the client sees it cut short. */
    snprintf(f->detail, sizeof f->detail, "%s",
             expired ? "the grant expired during the response"
                     : "the response did not complete within max_lifetime_s");
    bev_free(&f->up);
    close_after_flush(f, f->deadline_end);
}

static void arm_deadline(px_fwd *f)
{
    struct timeval tv = secs(px_upstream_lifetime(f->dial, &f->deadline_end));
    evtimer_add(f->deadline, &tv);
}

static void decide(px_fwd *f, const uint8_t *buf, const ph_h1_head *h)
{
    const uint8_t *t = buf + h->target.off;
    size_t tlen = h->target.len;
    snprintf(f->method, sizeof f->method, "%.*s", (int)h->method.len, (const char *)buf);
    f->is_head = h->method.len == 4 && memcmp(buf, "HEAD", 4) == 0;
    f->client_v10 = h->version_minor == 0;
    if (h->method.len == 7 && memcmp(buf, "CONNECT", 7) == 0) {
        /* A tunnel is a connection's first request, never one after
         * forwarded requests (tunnel.c answers those). */
        fwd_refuse(f, PH_REASON_ORIGIN_FORM,
                   "CONNECT opens a connection of its own, not one that forwarded requests", NULL);
        return;
    }
    if (starts_with_ci(t, tlen, "https://")) {
        fwd_refuse(f, PH_REASON_HTTPS_USE_CONNECT,
                   "https:// URLs go through a CONNECT tunnel (HTTPS_PROXY), not forwarding", NULL);
        return;
    }
    if (!starts_with_ci(t, tlen, "http://")) {
        size_t i = 0;
        while (i < tlen && (ph_is_lower(t[i]) || ph_is_upper(t[i])))
            i++;
        if (i > 0 && tlen - i >= 3 && memcmp(t + i, "://", 3) == 0)
            fwd_refuse(f, PH_REASON_PARSE_ERROR, "only http:// URLs are forwarded", NULL);
        else
            fwd_refuse(f, PH_REASON_ORIGIN_FORM,
                       "a proxy request names its http:// URL (absolute form)", NULL);
        return;
    }
    size_t alen = 0;
    bool several;
    const uint8_t *auth = proxy_authorization(buf, h, &alen, &several);
    if (several) {
        fwd_refuse(f, PH_REASON_HTTP_BAD_FIELD, "several Proxy-Authorization fields", NULL);
        return;
    }
    ph_url_request r = {
        .url = (const char *)t,
        .url_len = tlen,
        .proxy_authorization = (const char *)auth,
        .proxy_authorization_len = alen,
        .now = (int64_t)time(NULL),
    };
    ph_decision d;
    ph_decide_url(px_policy(), &r, &d);
    if (d.has_authority) {
        f->has_host = true;
        f->port = d.verdict.port;
        snprintf(f->host, sizeof f->host, "%s", d.verdict.host);
    }
    if (d.has_grant) {
        f->has_grant = true;
        f->grant = d.grant;
    }
    snprintf(f->policy_id, sizeof f->policy_id, "%s", d.verdict.policy_id);
    if (!d.allowed) {
        fwd_refuse(f, d.reason, d.client_detail, d.log_detail);
        return;
    }
    f->has_rule = d.verdict.has_rule;
    f->rule_line = d.verdict.rule_line;
    snprintf(f->rule_file, sizeof f->rule_file, "%s", d.verdict.rule_file);
    /* The URL's path, by the same parser that decided its host. */
    ph_url u;
    if (ph_url_parse((const char *)t, tlen, &u, NULL) != PH_OK) {
        fwd_refuse(f, PH_REASON_PARSE_ERROR, "the URL did not parse again", NULL);
        return;
    }
    /* The lease slot, and exactly this name resolved for this port (the
     * answer comes from the loop, after the head is rewritten below). */
    ph_reason why;
    const char *why_detail;
    if ((f->dial = px_upstream_start(f->w, &d, upstream_cb, f, &why, &why_detail)) == NULL) {
        fwd_refuse(f, why, why_detail, NULL);
        return;
    }
    arm_deadline(f);
    rewrite_head(f, buf, h, &u);
    f->req_body = h->body;
    f->req_left = h->content_length;
    f->req_done = h->body == PH_H1_BODY_NONE ||
                  (h->body == PH_H1_BODY_LENGTH && h->content_length == 0);
    f->client_close = f->client_v10 || h->conn_close;
    evbuffer_drain(bufferevent_get_input(f->client), h->head_len);
    f->head_scan = 0; /* the response head comes next */
    bufferevent_disable(f->client, EV_READ); /* the body follows the dial */
    if (f->req_done)
        watch_client(f);
    f->state = F_RESOLVE;
}

static void client_head(px_fwd *f)
{
    struct evbuffer *in = bufferevent_get_input(f->client);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return;
    if (!f->head_timer) {
        /* The first byte of a head: it must be complete in time. */
        struct timeval tv = msecs(f->w->cfg->header_timeout_ms);
        evtimer_del(f->timer);
        evtimer_add(f->timer, &tv);
        f->head_timer = true;
    }
    size_t n = len < PH_H1_REQUEST_HEAD_MAX ? len : PH_H1_REQUEST_HEAD_MAX;
    const uint8_t *buf = evbuffer_pullup(in, (ev_ssize_t)n);
    ph_h1_head *h = &f->head;
    /* As for a response head (up_read_cb). */
    if (buf == NULL || (!ph_h1_head_scan(buf, n, &f->head_scan) && n < PH_H1_REQUEST_HEAD_MAX))
        return;
    px_metrics_head_parse();
    switch (ph_h1_parse_request(buf, n, h)) {
    case PH_H1_INCOMPLETE:
        return;
    case PH_H1_REFUSED: {
        char d[PH_DIAG_MESSAGE_MAX];
        snprintf(d, sizeof d, "%s (byte %zu)", h->message, h->error_offset);
        px_conn_forward_head_done(f->owner);
        begin_request(f);
        fwd_refuse(f, h->reason, d, NULL);
        return;
    }
    case PH_H1_DONE:
        break;
    }
    evtimer_del(f->timer);
    f->head_timer = false;
    px_conn_forward_head_done(f->owner);
    begin_request(f);
    decide(f, buf, h);
}

/* ---- client callbacks ---------------------------------------------------- */

static void client_read_cb(struct bufferevent *b, void *arg)
{
    px_fwd *f = arg;
    if (f->state == F_LINGER) {
        struct evbuffer *in = bufferevent_get_input(b);
        evbuffer_drain(in, evbuffer_get_length(in));
    } else if (f->state == F_HEAD)
        client_head(f);
    else if (f->state == F_EXCHANGE && !f->req_done)
        pump_request(f);
}

static void client_write_cb(struct bufferevent *b, void *arg)
{
    px_fwd *f = arg;
    if (f->state == F_CLOSING) {
        if (evbuffer_get_length(bufferevent_get_output(b)) == 0)
            linger(f);
        return;
    }
    if (f->state == F_EXCHANGE && f->paused_up) {
        f->paused_up = false;
        bufferevent_enable(f->up, EV_READ);
        up_read_cb(f->up, f); /* the rest of an interim response, or the body */
    }
}

static void client_event_cb(struct bufferevent *b, short what, void *arg)
{
    px_fwd *f = arg;
    if (f->state == F_LINGER) {
        fwd_kill(f, f->reap_end);
        return;
    }
    const char *end = (what & BEV_EVENT_EOF)       ? "client_closed"
                      : (what & BEV_EVENT_TIMEOUT) ? "idle_timeout"
                                                   : "client_error";
    /* A client that half-closed after its last request still gets what it
     * was sent. */
    if ((what & BEV_EVENT_EOF) && f->state == F_HEAD && !f->in_request &&
        evbuffer_get_length(bufferevent_get_input(b)) == 0 &&
        evbuffer_get_length(bufferevent_get_output(b)) > 0) {
        close_after_flush(f, end);
        return;
    }
    fwd_kill(f, end);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_fwd *f = arg;
    switch (f->state) {
    case F_HEAD:
        if (f->head_timer)
            fwd_refuse(f, PH_REASON_HTTP_HEAD_TIMEOUT, "request head not complete in time", NULL);
        else
            fwd_kill(f, "idle_timeout");
        return;
    case F_CLOSING:
        fwd_kill(f, "client_error"); /* it did not read its answer */
        return;
    case F_LINGER:
        fwd_kill(f, f->reap_end);
        return;
    default:
        return;
    }
}

/* ---- forward.h ----------------------------------------------------------- */

bool px_forward_wants(const uint8_t *buf, size_t len)
{
    static const char connect[] = "CONNECT ";
    size_t n = len < sizeof connect - 1 ? len : sizeof connect - 1;
    return n > 0 && memcmp(buf, connect, n) != 0;
}

struct px_fwd *px_forward_start(struct px_conn *owner, px_worker *w, struct bufferevent *client,
                                uint64_t conn_id, const char *peer)
{
    px_fwd *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->w = w;
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
    return f;
}

void px_forward_run(struct px_fwd *f)
{
    struct bufferevent *c = f->client;
    bufferevent_setcb(c, client_read_cb, client_write_cb, client_event_cb, f);
    bufferevent_setwatermark(c, EV_READ, 0, PH_H1_REQUEST_HEAD_MAX);
    bufferevent_setwatermark(c, EV_WRITE, cap_bytes(f) / 2, 0);
    struct timeval idle = secs(f->w->cfg->idle_timeout_s);
    bufferevent_set_timeouts(c, &idle, &idle);
    if (f->peer[0] != 'u') /* not a unix socket */
        px_set_nodelay(c);
    bufferevent_enable(c, EV_READ);
    client_head(f);
}

void px_forward_free(struct px_fwd **fp, const char *end)
{
    px_fwd *f = *fp;
    if (f == NULL)
        return;
    *fp = NULL;
    end_request(f, end);
    event_free(f->client_watch); /* before the socket it watches closes */
    bev_free(&f->up);
    bev_free(&f->idle);
    bev_free(&f->client);
    event_free(f->timer);
    event_free(f->reap);
    event_free(f->deadline);
    evbuffer_free(f->up_head);
    free(f);
}

bool px_forward_idle(const struct px_fwd *f)
{
    return f->state == F_HEAD && !f->in_request;
}
