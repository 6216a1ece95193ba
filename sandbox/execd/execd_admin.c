/* execd_admin.c - pinhole-execd's admin listener (--metrics-listen): GET
 * /metrics (the Prometheus text of the metrics operation) and GET /health,
 * plain HTTP on the loop. It reveals counts only, never an identity, tenant
 * or id.
 *
 * A small server of its own rather than evhttp: libevent 2.1's evhttp has
 * no cap on its connections and restarts its timeout at every byte, so a
 * peer that reaches the port held a descriptor per connection for as long
 * as it dripped bytes, until the daemon had none left: then every accept
 * failed (EMFILE), no worker could connect, and the loop retried the
 * readable listener at once, logging each failure. Here at most
 * XD_ADMIN_MAX connections are open (one more is closed at accept), and
 * each serves one request (Connection: close) whose head must arrive, and
 * whose answer must leave, within XD_ADMIN_TIMEOUT_MS of accept however
 * the bytes trickle.
 *
 * The answer is not lost to a reset: closing a socket with bytes unread
 * (a body, a pipelined request) resets the connection, and the kernel drops
 * what of the answer the peer's window had not taken yet. So once the
 * answer is handed to the kernel the sending side is shut (the answer ends
 * with a FIN), and what the peer still sends is read and dropped, up to
 * XD_ADMIN_LINGER_MAX bytes, until it closes (or the deadline).
 *
 * Ownership (all on the loop): xd_admin owns its evconnlistener (which owns
 * the listening socket, LEV_OPT_CLOSE_ON_FREE) and its connections; an
 * admin_conn owns its bufferevent (BEV_OPT_CLOSE_ON_FREE: the socket) and
 * its deadline timer (argument: the admin_conn), and is freed only by
 * admin_conn_free, called from its callbacks (which return at once after)
 * or from xd_admin_free. */
#include "execd_state-int.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define XD_ADMIN_MAX 16             /* open admin connections at most */
#define XD_ADMIN_TIMEOUT_MS 10000   /* from accept: the head in, the answer out */
#define XD_ADMIN_HEAD_MAX 8192      /* request line and headers */
#define XD_ADMIN_LINGER_MAX 65536   /* bytes read and dropped after the request */

typedef struct admin_conn {
    struct xd_admin *srv;
    struct bufferevent *bev;
    struct event *deadline;
    bool replied;               /* the answer is queued */
    bool peer_closed;           /* end of file read: freed once the answer is written */
    size_t dropped;             /* bytes read after the request, dropped */
    struct admin_conn *prev, *next;
} admin_conn;

struct xd_admin {
    struct evconnlistener *listener;
    xd_accept_guard *guard;
    admin_conn *conns;
    size_t count;
    int64_t refused_logged_ms;  /* refusals are logged at most once a second */
    unsigned long refused;
};

static void admin_conn_free(admin_conn *c)
{
    struct xd_admin *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->count--;
    event_free(c->deadline);
    bufferevent_free(c->bev);
    free(c);
}

static void admin_reply(admin_conn *c, int code, const char *reason, const char *type,
                        const char *body)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out,
                        "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                        "%sConnection: close\r\n\r\n%s",
                        code, reason, type, strlen(body), code == 405 ? "Allow: GET\r\n" : "",
                        body);
    c->replied = true;
    /* What is left of the request is dropped (and reading goes on, under
     * the head's high-water mark no longer). */
    struct evbuffer *in = bufferevent_get_input(c->bev);
    evbuffer_drain(in, evbuffer_get_length(in));
}

/* The request line: "GET <target> HTTP/1.<digit>"; anything else is 400.
 * The target's query is ignored (a scraper's params), as the proxy's admin
 * listener ignores it. */
static void admin_serve(admin_conn *c, const char *line)
{
    const char *sp = strchr(line, ' ');
    const char *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
    const char *ver = sp2 ? sp2 + 1 : "";
    bool well_formed = sp != NULL && sp2 != NULL && sp != line && sp2 != sp + 1 &&
                       strncmp(ver, "HTTP/1.", 7) == 0 && (ver[7] == '0' || ver[7] == '1') &&
                       ver[8] == '\0';
    if (!well_formed) {
        admin_reply(c, 400, "Bad Request", "text/plain", "bad request\n");
        return;
    }
    size_t target_len = (size_t)(sp2 - sp - 1);
    const char *query = memchr(sp + 1, '?', target_len);
    if (query != NULL)
        target_len = (size_t)(query - sp - 1);
    if ((size_t)(sp - line) != 3 || memcmp(line, "GET", 3) != 0) {
        admin_reply(c, 405, "Method Not Allowed", "text/plain", "GET only\n");
    } else if (target_len == 8 && memcmp(sp + 1, "/metrics", 8) == 0) {
        char text[8192];
        xd_metrics_text(text, sizeof text);
        admin_reply(c, 200, "OK", "text/plain; version=0.0.4", text);
    } else if (target_len == 7 && memcmp(sp + 1, "/health", 7) == 0) {
        admin_reply(c, 200, "OK", "text/plain", "ok\n");
    } else {
        admin_reply(c, 404, "Not Found", "text/plain", "not found\n");
    }
}

static void admin_read(struct bufferevent *bev, void *arg)
{
    admin_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->replied) {
        c->dropped += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->dropped > XD_ADMIN_LINGER_MAX)
            admin_conn_free(c); /* not a client that reads its answer */
        return;
    }
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (end.pos < 0) {
        if (evbuffer_get_length(in) >= XD_ADMIN_HEAD_MAX)
            admin_reply(c, 431, "Request Header Fields Too Large", "text/plain",
                        "the request head is over 8 KiB\n");
        return;
    }
    size_t len = 0;
    char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF_STRICT);
    if (line == NULL || strlen(line) != len)
        admin_reply(c, 400, "Bad Request", "text/plain", "bad request\n");
    else
        admin_serve(c, line);
    free(line);
}

static void admin_written(struct bufferevent *bev, void *arg)
{
    admin_conn *c = arg;
    if (!c->replied || evbuffer_get_length(bufferevent_get_output(bev)) > 0)
        return;
    if (c->peer_closed)
        admin_conn_free(c);
    else
        shutdown(bufferevent_getfd(bev), SHUT_WR); /* then its end of file frees it */
}

static void admin_event(struct bufferevent *bev, short what, void *arg)
{
    admin_conn *c = arg;
    /* A peer that half-closed after its request still gets the answer. */
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && c->replied &&
        evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        c->peer_closed = true;
        return;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        admin_conn_free(c);
}

static void admin_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    admin_conn_free(arg);
}

static void admin_accept(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa,
                         int salen, void *arg)
{
    (void)sa;
    (void)salen;
    struct xd_admin *s = arg;
    if (s->count >= XD_ADMIN_MAX) {
        close(fd);
        s->refused++;
        int64_t now = ph_monotonic_ms();
        if (now - s->refused_logged_ms >= 1000) {
            json_t *x = json_pack("{s:I, s:i}", "refused", (json_int_t)s->refused, "max",
                                  XD_ADMIN_MAX);
            xd_log("warning", "admin_connections_full", x);
            json_decref(x);
            s->refused_logged_ms = now;
            s->refused = 0;
        }
        return;
    }
    struct event_base *base = evconnlistener_get_base(lst);
    admin_conn *c = calloc(1, sizeof *c);
    struct bufferevent *bev = c ? bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    struct event *deadline = bev ? evtimer_new(base, admin_deadline, c) : NULL;
    if (deadline == NULL) {
        if (bev)
            bufferevent_free(bev);
        else
            close(fd);
        free(c);
        return;
    }
    c->srv = s;
    c->bev = bev;
    c->deadline = deadline;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->count++;
    struct timeval t = {XD_ADMIN_TIMEOUT_MS / 1000, (XD_ADMIN_TIMEOUT_MS % 1000) * 1000};
    evtimer_add(deadline, &t);
    bufferevent_setwatermark(bev, EV_READ, 0, XD_ADMIN_HEAD_MAX);
    bufferevent_setcb(bev, admin_read, admin_written, admin_event, c);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static void admin_accept_error(struct evconnlistener *lst, void *arg)
{
    xd_accept_failed(lst, ((struct xd_admin *)arg)->guard);
}

xd_admin *xd_admin_start(struct event_base *base, int fd)
{
    xd_admin *s = calloc(1, sizeof *s);
    if (s != NULL)
        s->guard = xd_accept_guard_new(base);
    if (s != NULL && s->guard != NULL)
        s->listener = evconnlistener_new(base, admin_accept, s,
                                         LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
    if (s == NULL || s->listener == NULL) {
        close(fd);
        if (s)
            xd_accept_guard_free(&s->guard);
        free(s);
        return NULL;
    }
    evconnlistener_set_error_cb(s->listener, admin_accept_error);
    return s;
}

void xd_admin_free(xd_admin **admin)
{
    xd_admin *s = *admin;
    if (s == NULL)
        return;
    while (s->conns)
        admin_conn_free(s->conns);
    evconnlistener_free(s->listener);
    xd_accept_guard_free(&s->guard);
    free(s);
    *admin = NULL;
}
