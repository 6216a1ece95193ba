/* forward.c - plain-HTTP forwarding: absolute-form requests
 * ("GET http://host/path HTTP/1.1"), any method, each decided exactly like a
 * CONNECT to the URL's host and port.
 *
 *   request head (http1.h: strict RFC 9112 framing, smuggling refused)
 *     -> forward_decide.c: not absolute-form refused (origin_form); the URL
 *        to ph_decide_url (guard: URL and its scheme, grant from
 *        Proxy-Authorization, list, on one pinned policy version; the
 *        verdict carries its status); https:// refused (https_use_connect)
 *     -> upstream.c, as for a CONNECT: per-lease limit, exactly that name
 *        resolved for the port, every address checked; then a checked
 *        address dialed, or the kept-alive upstream reused when it was
 *        opened for the same host, port, grant tenant/lease/list and its
 *        address is among the checked ones
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
 * This file serves each request; the connection's life around them (a
 * request's log line and end, refusals, the kept-alive upstream, timers,
 * closing) is forward_conn.c's (forward-int.h), a request head's decision
 * forward_decide.c's (forward_decide.h), the re-framing of fields and
 * bodies h1_reframe.c's.
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

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "evbuffer_wipe.h"
#include "forward-int.h"
#include "forward.h"
#include "forward_decide.h"
#include "h1_reframe.h"
#include "http1.h"
#include "log_json.h"
#include "metrics.h"
#include "pinhole/clock.h"
#include "reply.h"
#include "upstream.h"
#include "worker.h"

static void client_head(px_fwd *f);
static void pump_request(px_fwd *f);
static void up_timeouts(px_fwd *f);
static void pump_response(px_fwd *f);

/* ---- the kept-alive upstream --------------------------------------------- */

/* The kept-alive upstream serves this request: same host, port and grant,
 * and the address it is connected to is one the guard just checked. */
static bool idle_matches(const px_fwd *f)
{
    const fwd_dest *d = &f->idle_dest;
    return f->idle != NULL && d->port == f->port && strcmp(d->host, f->host) == 0 &&
           strcmp(d->tenant, f->grant.tenant) == 0 && strcmp(d->lease, f->grant.lease) == 0 &&
           strcmp(d->list, f->grant.list) == 0 && px_upstream_is_checked(f->dial, &d->addr);
}

/* ---- writes -------------------------------------------------------------- */

/* A socket that holds nothing unsent takes a small write at once: a
 * bufferevent would wait for the next loop pass, with two epoll_ctl calls
 * around a wake-up saying what is nearly always so (writable). So each
 * side's EV_WRITE is enabled only while its output holds bytes the socket
 * did not take (then libevent writes them, its write timeout runs, and the
 * write callbacks see the output drain); a write error leaves the bytes
 * there for libevent to fail on, as before. */

/* The client's output, written now when no write is pending; what its
 * socket does not take waits for EV_WRITE. Only while the connection
 * serves requests, in every state of one: a response that ended with a
 * pipelined request already read leaves the next one resolving or
 * connecting, and its bytes must not wait for that one's upstream
 * (F_CLOSING enables EV_WRITE itself; nothing is written once the
 * connection ended). */
static void flush_client(px_fwd *f)
{
    struct evbuffer *out = bufferevent_get_output(f->client);
    if (f->state == F_CLOSING || f->state == F_LINGER || f->state == F_DEAD ||
        (bufferevent_get_enabled(f->client) & EV_WRITE) || evbuffer_get_length(out) == 0)
        return;
    /* A socket bufferevent's output is frozen at its start for everyone
     * but its own writes: thawed for this one, as libevent's writer does. */
    evbuffer_unfreeze(out, 1);
    (void)evbuffer_write(out, bufferevent_getfd(f->client));
    evbuffer_freeze(out, 1);
    if (evbuffer_get_length(out) > 0)
        bufferevent_enable(f->client, EV_WRITE);
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
    /* A response that started before its request's body ended is the
     * connection's last (response_head); an upstream that did not get the
     * whole request is never reused (it may read the rest as a request). */
    bool reuse = f->up_reusable && f->req_done && !f->client_close &&
                 evbuffer_get_length(bufferevent_get_input(f->up)) == 0;
    bool last = f->client_close || f->w->draining;
    /* The client is read again before its watch goes (px_fwd_end_request):
     * its socket stays in the epoll set as it is, with no epoll_ctl
     * (px_fwd_watch_client). */
    if (!last)
        bufferevent_enable(f->client, EV_READ);
    px_fwd_end_request(f, "done");
    if (reuse)
        px_fwd_keep_idle(f);
    else
        bev_free(&f->up);
    if (last)
        px_fwd_close_after_flush(f, "closed");
    else
        next_request(f);
}

/* ---- bodies -------------------------------------------------------------- */

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
        int r = px_h1_rechunk(in, out, &f->req_chunks, true, &f->bytes_up);
        if (r < 0) {
            /* The upstream got the head and whole chunks only: it sees a
             * truncated body, never bytes it could take for a request. */
            char d[PH_DIAG_MESSAGE_MAX];
            snprintf(d, sizeof d, "request body: %s", f->req_chunks.message);
            if (f->resp_head_done) {
                f->reason = f->req_chunks.reason;
                snprintf(f->detail, sizeof f->detail, "%s", d);
                px_fwd_kill(f, "client_error");
            } else {
                px_fwd_refuse(f, f->req_chunks.reason, d, NULL);
            }
            return;
        }
        f->req_done = r > 0;
    }
    if (f->req_done) {
        px_fwd_watch_client(f); /* first: then no epoll_ctl (forward-int.h) */
        bufferevent_disable(f->client, EV_READ); /* the next request waits */
        up_timeouts(f);
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
            int r = px_h1_rechunk(in, out, &f->resp_chunks, f->resp_chunked_out, &f->bytes_down);
            if (r < 0) {
                /* Part of it was relayed: the client sees it cut short. */
                snprintf(f->detail, sizeof f->detail, "response body (%s): %s",
                         ph_reason_code(f->resp_chunks.reason), f->resp_chunks.message);
                bev_free(&f->up);
                px_fwd_close_after_flush(f, "upstream_error");
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

/* A response head the proxy cannot frame, or an upstream that failed
 * before one: 502 (or the reason's status) while the client has been sent
 * nothing of it; else the connection ends once what was relayed is
 * flushed. */
static void upstream_failed(px_fwd *f, ph_reason reason, const char *detail)
{
    if (!f->resp_head_done) {
        px_fwd_refuse(f, reason, "", detail);
        return;
    }
    /* What was relayed reaches the client, which sees the body cut short. */
    snprintf(f->detail, sizeof f->detail, "%s", detail);
    bev_free(&f->up);
    px_fwd_close_after_flush(f, "upstream_error");
}

/* Writes the client's response head (status and fields from the upstream,
 * re-framed) and sets up the body. */
static void response_head(px_fwd *f, const uint8_t *buf, const ph_h1_head *h)
{
    /* From here a client that is gone shows in the writes: the watch, if it
     * fires, only ends itself (client_watch_cb), and goes with the request
     * otherwise (px_fwd_watch_client). */
    f->status = h->status;
    f->reason = PH_REASON_ALLOWED;
    f->resp_body = h->body;
    f->resp_left = h->content_length;
    f->up_reusable = h->version_minor == 1 && !h->conn_close && h->body != PH_H1_BODY_CLOSE;
    f->resp_chunked_out = h->body == PH_H1_BODY_CHUNKED && !f->client_v10;
    /* A response that starts before its request's body ended (a 413, a 417
     * to Expect: 100-continue) ends the connection: where the client's next
     * request would start is unknown. Decided here, so the head says so. */
    if (h->body == PH_H1_BODY_CLOSE || (h->body == PH_H1_BODY_CHUNKED && f->client_v10) ||
        !f->req_done)
        f->client_close = true;
    struct evbuffer *out = bufferevent_get_output(f->client);
    size_t before = evbuffer_get_length(out);
    evbuffer_add_printf(out, "HTTP/1.1 %d %.*s\r\n", h->status, (int)h->reason_phrase.len,
                        (const char *)buf + h->reason_phrase.off);
    px_h1_copy_fields(out, buf, h);
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

/* The upstream's bytes: interim responses, the response head, its body,
 * to the client's output (flushed by up_read_cb). */
static void up_read(struct bufferevent *b, px_fwd *f)
{
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

static void up_read_cb(struct bufferevent *b, void *arg)
{
    px_fwd *f = arg;
    up_read(b, f);
    flush_client(f);
}

static void up_write_cb(struct bufferevent *b, void *arg)
{
    (void)b;
    px_fwd *f = arg;
    if (f->state == F_EXCHANGE && f->paused_client && !f->up_write_failed) {
        f->paused_client = false;
        bufferevent_enable(f->client, EV_READ);
        pump_request(f);
    }
}

/* A kept-alive connection the upstream closed just as it was reused: the
 * request goes once more on a new connection, when nothing of it was
 * answered, it had no body (it can be sent again whole) and its method is
 * idempotent (a POST the upstream may have acted on is never repeated). */
static bool retry_fresh(px_fwd *f)
{
    if (!f->reused || f->retried || f->up_sent_any || f->req_body != PH_H1_BODY_NONE ||
        !px_h1_method_idempotent(f->method))
        return false;
    f->retried = true;
    f->reused = false;
    f->up_write_failed = false;
    bev_free(&f->up);
    f->state = F_CONNECT;
    px_upstream_dial(f->dial); /* its callback may run within */
    return true;
}

/* The upstream stopped taking the request (err: the write's error): one
 * that answers early (413, or 417 to Expect: 100-continue, often with
 * Connection: close) and closes or resets without reading the body. What it
 * sent before is still in the socket (a reset discards the bytes it would
 * have sent, not those received), so the answer is read and relayed as
 * usual; the read side's end (EOF or error) ends the request if no
 * complete answer came, as upstream_bad_response. Nothing more of the
 * request goes upstream; a response to a request whose body was not all
 * sent ends the connection (response_head). */
static void upstream_stopped_reading(px_fwd *f, int err)
{
    f->up_write_failed = true;
    f->paused_client = false;
    px_fwd_watch_client(f); /* first: then no epoll_ctl (forward-int.h) */
    bufferevent_disable(f->client, EV_READ); /* the rest of the body is not read */
    snprintf(f->detail, sizeof f->detail, "the upstream stopped taking the request: %s",
             evutil_socket_error_to_string(err));
    struct timeval idle = secs(f->w->cfg->idle_timeout_s);
    bufferevent_set_timeouts(f->up, &idle, NULL);
    up_read_cb(f->up, f); /* what the read callback was not called for yet */
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
    if ((what & (BEV_EVENT_ERROR | BEV_EVENT_WRITING)) == (BEV_EVENT_ERROR | BEV_EVENT_WRITING) &&
        !f->up_write_failed) {
        upstream_stopped_reading(f, EVUTIL_SOCKET_ERROR());
        return;
    }
    if (retry_fresh(f))
        return;
    /* The upstream was reached (connected, or a kept-alive connection):
     * whatever it did then is its response's fault, never unreachable. */
    if (what & BEV_EVENT_TIMEOUT) {
        upstream_failed(f, PH_REASON_UPSTREAM_TIMEOUT,
                        "the upstream sent nothing within idle_timeout_s");
    } else if (what & BEV_EVENT_EOF) {
        upstream_failed(f, PH_REASON_UPSTREAM_BAD_RESPONSE,
                        "the upstream closed before its response was complete");
    } else {
        char d[PH_DIAG_MESSAGE_MAX];
        snprintf(d, sizeof d, "the upstream connection failed before its response was complete: %s",
                 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
        upstream_failed(f, PH_REASON_UPSTREAM_BAD_RESPONSE, d);
    }
}

/* ---- the upstream -------------------------------------------------------- */

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
    /* The head goes at once when nothing is pending (flush_client's
     * reason: a new connection, or a kept-alive one whose every byte was
     * taken); up_head stays for a retry. EV_WRITE stays on only for what
     * the socket did not take, or for a body to come. */
    size_t n = evbuffer_get_length(f->up_head);
    const uint8_t *head = evbuffer_pullup(f->up_head, (ev_ssize_t)n);
    struct evbuffer *out = bufferevent_get_output(f->up);
    size_t done = 0;
    if (evbuffer_get_length(out) == 0) {
        bufferevent_disable(f->up, EV_WRITE);
        ssize_t sent = send(bufferevent_getfd(f->up), head, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        done = sent > 0 ? (size_t)sent : 0;
    }
    if (done < n)
        bufferevent_write(f->up, head + done, n - done);
    f->bytes_up += n;
    bufferevent_enable(f->up, evbuffer_get_length(out) > 0 || !f->req_done ? EV_READ | EV_WRITE
                                                                            : EV_READ);
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
        px_fwd_drop_idle(f);
        f->state = F_CONNECT;
        px_upstream_dial(f->dial);
        return;
    case PX_UP_CONNECTED: {
        fwd_dest *d = &f->up_dest;
        if ((f->up = px_upstream_take(f->dial, &d->addr)) == NULL) {
            px_fwd_refuse(f, PH_REASON_PROXY_OVERLOADED, "out of memory", NULL);
            return;
        }
        snprintf(d->host, sizeof d->host, "%s", f->host);
        d->port = f->port;
        snprintf(d->tenant, sizeof d->tenant, "%s", f->grant.tenant);
        snprintf(d->lease, sizeof d->lease, "%s", f->grant.lease);
        snprintf(d->list, sizeof d->list, "%s", f->grant.list);
        start_exchange(f);
        return;
    }
    case PX_UP_REFUSED:
        px_fwd_refuse(f, reason, detail, NULL);
        return;
    }
}

/* ---- the request head and the decision ----------------------------------- */

/* The request head for the upstream: origin-form target, Host from the URI,
 * the client's end-to-end fields, the body's framing, Via. */
static void rewrite_head(px_fwd *f, const uint8_t *buf, const ph_h1_head *h, const char *url,
                         const ph_decision *d)
{
    struct evbuffer *o = f->up_head;
    /* An empty path is "/" (RFC 9112 section 3.2.1), before a query too:
     * "http://a.com?q" goes as "/?q" (pinhole/url.h). */
    const char *path = url + d->path_offset;
    evbuffer_add_printf(o, "%s %s%.*s HTTP/1.1\r\n", f->method,
                        d->path_len > 0 && path[0] == '/' ? "" : "/", (int)d->path_len, path);
    if (f->port == 80)
        evbuffer_add_printf(o, "Host: %s\r\n", f->host);
    else
        evbuffer_add_printf(o, "Host: %s:%u\r\n", f->host, (unsigned)f->port);
    px_h1_copy_fields(o, buf, h);
    if (h->body == PH_H1_BODY_LENGTH)
        evbuffer_add_printf(o, "Content-Length: %llu\r\n", (unsigned long long)h->content_length);
    else if (h->body == PH_H1_BODY_CHUNKED)
        evbuffer_add(o, "Transfer-Encoding: chunked\r\n", 28);
    evbuffer_add(o, "Via: 1.1 pinhole\r\n\r\n", 20);
}

static void decide(px_fwd *f, const uint8_t *buf, const ph_h1_head *h)
{
    snprintf(f->method, sizeof f->method, "%.*s", (int)h->method.len, (const char *)buf);
    f->is_head = h->method.len == 4 && memcmp(buf, "HEAD", 4) == 0;
    f->client_v10 = h->version_minor == 0;
    char url[PX_FWD_URL_MAX];
    ph_decision d;
    const char *u = px_fwd_decide(f, buf, h, url, &d);
    if (u == NULL)
        return;
    /* The lease slot, and exactly this name resolved for this port (the
     * answer comes from the loop, after the head is rewritten below). */
    ph_reason why;
    const char *why_detail;
    if ((f->dial = px_upstream_start(f->w, &d, upstream_cb, f, &why, &why_detail)) == NULL) {
        px_fwd_refuse(f, why, why_detail, NULL);
        return;
    }
    px_fwd_arm_deadline(f);
    rewrite_head(f, buf, h, u, &d); /* the path as the guard's parse found it */
    f->req_body = h->body;
    f->req_left = h->content_length;
    f->req_done = h->body == PH_H1_BODY_NONE ||
                  (h->body == PH_H1_BODY_LENGTH && h->content_length == 0);
    f->client_close = f->client_v10 || h->conn_close;
    /* The head's bytes go, wiped: they hold the grant (evbuffer_wipe.h). */
    px_evbuffer_drain_wiped(bufferevent_get_input(f->client), h->head_len);
    f->head_scan = 0; /* the response head comes next */
    if (f->req_done)
        px_fwd_watch_client(f); /* first: then no epoll_ctl (forward-int.h) */
    bufferevent_disable(f->client, EV_READ); /* the body follows the dial */
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
    const uint8_t *buf = px_evbuffer_pullup_wiped(in, n); /* it holds a grant */
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
        f->hooks->head_done(f->owner);
        px_fwd_begin_request(f);
        px_fwd_refuse(f, h->reason, d, NULL);
        return;
    }
    case PH_H1_DONE:
        break;
    }
    evtimer_del(f->timer);
    f->head_timer = false;
    f->hooks->head_done(f->owner);
    px_fwd_begin_request(f);
    decide(f, buf, h);
}

/* ---- client callbacks ---------------------------------------------------- */

static void client_read_cb(struct bufferevent *b, void *arg)
{
    px_fwd *f = arg;
    if (f->state == F_LINGER) {
        struct evbuffer *in = bufferevent_get_input(b);
        px_evbuffer_drain_wiped(in, evbuffer_get_length(in)); /* perhaps a pipelined head */
    } else if (f->state == F_HEAD)
        client_head(f);
    else if (f->state == F_EXCHANGE && !f->req_done && !f->up_write_failed)
        pump_request(f);
}

static void client_write_cb(struct bufferevent *b, void *arg)
{
    px_fwd *f = arg;
    if (f->state == F_CLOSING) {
        if (evbuffer_get_length(bufferevent_get_output(b)) == 0)
            px_fwd_linger(f);
        return;
    }
    if (f->state == F_EXCHANGE && f->paused_up) {
        f->paused_up = false;
        bufferevent_enable(f->up, EV_READ);
        up_read_cb(f->up, f); /* the rest of an interim response, or the body */
    }
    /* Drained: the next bytes go straight to the socket (flush_client;
     * F_CLOSING returned above, F_LINGER and F_DEAD write nothing). */
    if (f->state != F_LINGER && f->state != F_DEAD &&
        evbuffer_get_length(bufferevent_get_output(b)) == 0)
        bufferevent_disable(b, EV_WRITE);
}

static void client_event_cb(struct bufferevent *b, short what, void *arg)
{
    px_fwd *f = arg;
    if (f->state == F_LINGER) {
        px_fwd_kill(f, f->reap_end);
        return;
    }
    const char *end = (what & BEV_EVENT_EOF)       ? "client_closed"
                      : (what & BEV_EVENT_TIMEOUT) ? "idle_timeout"
                                                   : "client_error";
    /* A half-close is not an end: a client that half-closed after its last
     * complete request still gets every answer it was sent. What it sent
     * after that request (the start of a head, never completed now) is not
     * a request and is dropped: the requests before it were complete and
     * answered in order (a complete head is taken before its EOF is read). */
    if ((what & BEV_EVENT_EOF) && f->state == F_HEAD && !f->in_request &&
        evbuffer_get_length(bufferevent_get_output(b)) > 0) {
        px_fwd_close_after_flush(f, end);
        return;
    }
    px_fwd_kill(f, end);
}

/* ---- forward.h ----------------------------------------------------------- */

void px_forward_run(struct px_fwd *f)
{
    struct bufferevent *c = f->client;
    bufferevent_setcb(c, client_read_cb, client_write_cb, client_event_cb, f);
    bufferevent_setwatermark(c, EV_READ, 0, PH_H1_REQUEST_HEAD_MAX);
    bufferevent_setwatermark(c, EV_WRITE, cap_bytes(f) / 2, 0);
    struct timeval idle = secs(f->w->cfg->idle_timeout_s);
    bufferevent_set_timeouts(c, &idle, &idle);
    /* EV_WRITE only while the output holds bytes (flush_client). */
    if (evbuffer_get_length(bufferevent_get_output(c)) == 0)
        bufferevent_disable(c, EV_WRITE);
    else
        bufferevent_enable(c, EV_WRITE);
    bufferevent_enable(c, EV_READ);
    client_head(f);
}

