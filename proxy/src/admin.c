/* admin.c - the admin listener (loopback by default): /metrics (Prometheus
 * text), /healthz (the process serves), /readyz (a table is loaded and we
 * are not draining), POST /reload. Served on the main loop, apart from the
 * workers, so a flood of tunnels cannot starve the probes.
 *
 * A small server of its own rather than evhttp: libevent 2.1's evhttp has
 * no cap on its connections and no hook to count them, and every idle
 * admin connection holds a descriptor. Here at most max_admin_connections
 * are open; the next is answered 503 proxy_overloaded at accept and closed.
 * Each connection serves one request (Connection: close), its head framed
 * by the forwarding's strict parser (http1.h), within ADMIN_TIMEOUT_S.
 * Every answer, a refusal included, lingers the same way: once it is
 * written the sending side is shut, and what the client still sends (a
 * body, a pipelined request) is read and dropped, ADMIN_LINGER_MAX bytes at
 * most, until the client closes or the deadline. Closing on unread bytes
 * would reset the connection and drop the answer's unsent bytes.
 *
 * Ownership (all on the main thread):
 *   px_admin owns the evconnlistener (which owns the listening socket,
 *   LEV_OPT_CLOSE_ON_FREE) and the list of its admin_conns; px_admin_free
 *   frees them all.
 *   admin_conn owns its bufferevent (BEV_OPT_CLOSE_ON_FREE: the socket)
 *   and its deadline timer (argument: the admin_conn); it is freed only by
 *   conn_free, called from the bufferevent's callbacks or the deadline's
 *   (which return at once after) or from px_admin_free.
 *   The EMFILE resume timer (argument: the px_admin) is made with the
 *   listener and freed with it by px_admin_free, so a pause cannot fail for
 *   want of memory and leave the listener off for good.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "admin.h"
#include "http1.h"
#include "listener.h"
#include "log_json.h"
#include "metrics.h"
#include "pinhole/diag.h"
#include "proxy_limits.h"
#include "reload.h"
#include "reply.h"
#include "sockaddr.h"

#define ADMIN_TIMEOUT_S 10    /* the request must arrive, the answer leave, within it
                               * (from accept, however the bytes trickle) */
#define ADMIN_BODY_MAX 4096   /* a POST /reload needs none */
#define ADMIN_BACKOFF_MS 100  /* how long accepting pauses when descriptors ran out */
#define ADMIN_LINGER_MAX 65536 /* bytes read and dropped after the answer is queued */

typedef struct admin_conn {
    struct px_admin *srv;
    struct admin_conn *prev, *next;
    struct bufferevent *bev;
    struct event *deadline;   /* ADMIN_TIMEOUT_S from accept: the connection ends */
    size_t head_scan;         /* ph_h1_head_scan's mark */
    bool replied;             /* the answer is queued: shut the sending side once written */
    bool peer_closed;         /* end of file read: free once the answer is written */
    size_t dropped;           /* bytes read and dropped after the answer was queued */
} admin_conn;

struct px_admin {
    struct evconnlistener *listener;
    struct event *resume; /* re-enables the listener after an EMFILE pause */
    admin_conn *conns;
    long nconns, max;
    time_t refused_logged;    /* when a refusal was last logged */
    unsigned long refused_unlogged;
};

static atomic_bool g_draining;

void px_admin_set_draining(void)
{
    atomic_store(&g_draining, true);
}

static void conn_free(admin_conn *c)
{
    struct px_admin *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    event_free(c->deadline);
    bufferevent_free(c->bev);
    free(c);
}

static void written_cb(struct bufferevent *b, void *arg)
{
    admin_conn *c = arg;
    if (!c->replied || evbuffer_get_length(bufferevent_get_output(b)) > 0)
        return;
    if (c->peer_closed)
        conn_free(c);
    else
        shutdown(bufferevent_getfd(b), SHUT_WR); /* then the client's end of file frees it */
}

/* The bufferevent's timeouts bound each wait for bytes; this bounds the
 * whole connection (a request sent a byte every few seconds). */
static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_free(arg);
}

static void event_cb(struct bufferevent *b, short what, void *arg)
{
    admin_conn *c = arg;
    /* A client that half-closed after its request still gets the answer. */
    if (what == (BEV_EVENT_READING | BEV_EVENT_EOF) && c->replied &&
        evbuffer_get_length(bufferevent_get_output(b)) > 0) {
        c->peer_closed = true;
        return;
    }
    conn_free(c); /* EOF, error or timeout: the connection ends */
}

/* Queues the answer (body may be NULL for HEAD) and drops the rest of the
 * request; the connection lingers (see the top of the file). The caller
 * must not touch the input after. */
static void reply(admin_conn *c, int code, const char *phrase, const char *type,
                  struct evbuffer *body, bool head_only)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    size_t len = body ? evbuffer_get_length(body) : 0;
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                        "Connection: close\r\n\r\n",
                        code, phrase, type, len);
    if (body && !head_only)
        evbuffer_add_buffer(out, body);
    c->replied = true;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
    bufferevent_enable(c->bev, EV_WRITE);
}

static void reply_text(admin_conn *c, int code, const char *phrase, const char *text,
                       bool head_only)
{
    struct evbuffer *b = evbuffer_new();
    if (b != NULL)
        evbuffer_add_printf(b, "%s\n", text);
    reply(c, code, phrase, "text/plain", b, head_only);
    if (b != NULL)
        evbuffer_free(b);
}

static bool span_is(const uint8_t *buf, ph_h1_span s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(buf + s.off, lit, s.len) == 0;
}

/* One request: the path (its query ignored) and the method. */
static void serve(admin_conn *c, const uint8_t *buf, const ph_h1_head *h)
{
    bool get = span_is(buf, h->method, "GET"), head = span_is(buf, h->method, "HEAD");
    bool post = span_is(buf, h->method, "POST");
    size_t plen = 0;
    while (plen < h->target.len && buf[h->target.off + plen] != '?')
        plen++;
    ph_h1_span path = { h->target.off, (uint32_t)plen };
    if (span_is(buf, path, "/metrics") || span_is(buf, path, "/healthz") ||
        span_is(buf, path, "/readyz")) {
        if (!get && !head) {
            reply_text(c, 405, "Method Not Allowed", "GET only", false);
            return;
        }
        if (span_is(buf, path, "/healthz")) {
            reply_text(c, 200, "OK", "ok", head);
        } else if (span_is(buf, path, "/readyz")) {
            char id[PH_TABLE_ID_HEX_LEN + 1];
            px_policy_id(id);
            if (atomic_load(&g_draining))
                reply_text(c, 503, "Service Unavailable", "draining", head);
            else if (id[0] == '\0')
                reply_text(c, 503, "Service Unavailable", "no table loaded", head);
            else
                reply_text(c, 200, "OK", "ready", head);
        } else {
            struct evbuffer *b = evbuffer_new();
            if (b == NULL) {
                reply_text(c, 500, "Internal Server Error", "out of memory", head);
                return;
            }
            char id[PH_TABLE_ID_HEX_LEN + 1];
            px_policy_id(id);
            px_metrics_render(b, px_limits_conn_active(), id,
                              ph_guard_revocations_live(px_policy(), (int64_t)time(NULL)));
            reply(c, 200, "OK", "text/plain; version=0.0.4", b, head);
            evbuffer_free(b);
        }
        return;
    }
    if (span_is(buf, path, "/reload")) {
        if (!post) {
            reply_text(c, 405, "Method Not Allowed", "POST only", head);
            return;
        }
        ph_diag diag = { 0 };
        if (px_policy_reload(&diag) != PH_OK) {
            reply_text(c, 500, "Reload Failed", diag.message, false);
            return;
        }
        char id[PH_TABLE_ID_HEX_LEN + 1];
        px_policy_id(id);
        reply_text(c, 200, "OK", id, false);
        return;
    }
    reply_text(c, 404, "Not Found", "not found", head);
}

static void read_cb(struct bufferevent *b, void *arg)
{
    admin_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(b);
    if (c->replied) {
        c->dropped += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->dropped > ADMIN_LINGER_MAX)
            conn_free(c); /* not a client that reads its answer */
        return;
    }
    size_t len = evbuffer_get_length(in);
    size_t n = len < PH_H1_REQUEST_HEAD_MAX ? len : PH_H1_REQUEST_HEAD_MAX;
    const uint8_t *buf = evbuffer_pullup(in, (ev_ssize_t)n);
    if (buf == NULL || (!ph_h1_head_scan(buf, n, &c->head_scan) && n < PH_H1_REQUEST_HEAD_MAX))
        return;
    ph_h1_head h;
    switch (ph_h1_parse_request(buf, n, &h)) {
    case PH_H1_INCOMPLETE:
        return;
    case PH_H1_REFUSED: {
        char msg[PH_DIAG_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s: %s", ph_reason_code(h.reason), h.message);
        reply_text(c, 400, "Bad Request", msg, false);
        return;
    }
    case PH_H1_DONE:
        break;
    }
    /* A small body is read whole before answering (a POST /reload needs
     * none); a larger one is refused, and dropped while the answer lingers. */
    if (h.body == PH_H1_BODY_CHUNKED || (h.body == PH_H1_BODY_LENGTH &&
                                         h.content_length > ADMIN_BODY_MAX)) {
        reply_text(c, 413, "Content Too Large", "the admin endpoints take no body", false);
        return;
    }
    size_t body = h.body == PH_H1_BODY_LENGTH ? (size_t)h.content_length : 0;
    if (len < h.head_len + body) {
        /* The rest of the body is still coming: the head is scanned and
         * parsed again then (a few KiB at most, once per read). */
        c->head_scan = 0;
        return;
    }
    buf = evbuffer_pullup(in, (ev_ssize_t)(h.head_len + body));
    if (buf == NULL)
        return;
    serve(c, buf, &h);
}

/* Logs a refusal at accept, at most once a second (a flood of them is one
 * line a second, with the count). */
static void log_refused(struct px_admin *s)
{
    time_t now = time(NULL);
    s->refused_unlogged++;
    if (now == s->refused_logged)
        return;
    px_log_event("warning", "admin_refused",
                 "%lu admin connection(s) refused: %s (max_admin_connections %ld)",
                 s->refused_unlogged, ph_reason_code(PH_REASON_PROXY_OVERLOADED), s->max);
    s->refused_logged = now;
    s->refused_unlogged = 0;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    (void)l;
    (void)sa;
    (void)salen;
    struct px_admin *s = arg;
    admin_conn *c = s->nconns < s->max ? calloc(1, sizeof *c) : NULL;
    if (c == NULL) {
        /* Over the cap (or out of memory): answered at once, never parsed. */
        px_refuse_socket(fd, PH_REASON_PROXY_OVERLOADED,
                         s->nconns < s->max ? "out of memory" : "max_admin_connections reached");
        px_metrics_admin_refused();
        log_refused(s);
        return;
    }
    c->srv = s;
    struct event_base *base = evconnlistener_get_base(l);
    c->deadline = evtimer_new(base, deadline_cb, c);
    c->bev = c->deadline ? bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (c->bev == NULL) {
        if (c->deadline)
            event_free(c->deadline);
        close(fd);
        free(c);
        return;
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    struct timeval tv = { ADMIN_TIMEOUT_S, 0 };
    evtimer_add(c->deadline, &tv);
    bufferevent_set_timeouts(c->bev, &tv, &tv);
    bufferevent_setwatermark(c->bev, EV_READ, 0, PH_H1_REQUEST_HEAD_MAX + ADMIN_BODY_MAX);
    bufferevent_setcb(c->bev, read_cb, written_cb, event_cb, c);
    bufferevent_enable(c->bev, EV_READ);
}

static void admin_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct px_admin *s = arg;
    evconnlistener_enable(s->listener);
}

/* Without this, an accept failing with EMFILE leaves the listening socket
 * readable and the main loop retries it at once, forever. */
static void admin_accept_error_cb(struct evconnlistener *l, void *arg)
{
    struct px_admin *s = arg;
    int err = EVUTIL_SOCKET_ERROR();
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        px_metrics_accept_backoff();
        evconnlistener_disable(l);
        struct timeval tv = { 0, ADMIN_BACKOFF_MS * 1000 };
        evtimer_add(s->resume, &tv);
        return;
    }
    px_log_event("warning", "accept_error", "admin accept failed: %s", strerror(err));
}

struct px_admin *px_admin_start(struct event_base *base, const char *listen_addr,
                                long max_connections, px_sockaddr *bound, ph_diag *diag)
{
    px_sockaddr sa;
    if (px_sockaddr_parse(listen_addr, &sa, diag) != PH_OK)
        return NULL;
    struct px_admin *s = calloc(1, sizeof *s);
    if (s == NULL) {
        ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        return NULL;
    }
    s->max = max_connections;
    if ((s->resume = evtimer_new(base, admin_resume_cb, s)) == NULL) {
        ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        free(s);
        return NULL;
    }
    int fd = px_listen_tcp(&sa, true, diag);
    if (fd < 0) {
        event_free(s->resume);
        free(s);
        return NULL;
    }
    /* Backlog 0: px_listen_tcp's socket is listening already. */
    s->listener = evconnlistener_new(base, accept_cb, s, LEV_OPT_CLOSE_ON_FREE, 0, fd);
    if (s->listener == NULL) {
        ph_diag_set(diag, PH_E_IO, 0, "admin listener on %s failed", listen_addr);
        close(fd);
        event_free(s->resume);
        free(s);
        return NULL;
    }
    evconnlistener_set_error_cb(s->listener, admin_accept_error_cb);
    *bound = sa;
    return s;
}

void px_admin_free(struct px_admin **admin)
{
    struct px_admin *s = *admin;
    if (s == NULL)
        return;
    while (s->conns)
        conn_free(s->conns);
    evconnlistener_free(s->listener);
    event_free(s->resume);
    free(s);
    *admin = NULL;
}
