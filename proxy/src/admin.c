/* admin.c - the admin listener (loopback by default): /metrics (Prometheus
 * text), /healthz (the process serves), /readyz (a table is loaded and we
 * are not draining), POST /reload. Served by evhttp on the main loop, apart
 * from the workers, so a flood of tunnels cannot starve the probes. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "pinhole/diag.h"
#include "proxy-int.h"

static atomic_bool g_draining;

void px_admin_set_draining(void)
{
    atomic_store(&g_draining, true);
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evbuffer_add_printf(b, "%s\n", text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
    evhttp_send_reply(req, code, reason, b);
    evbuffer_free(b);
}

static void metrics_cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        reply_text(req, 405, "Method Not Allowed", "GET only");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    px_metrics_render(b);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; version=0.0.4");
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

static void healthz_cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    reply_text(req, 200, "OK", "ok");
}

static void readyz_cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    char id[PH_TABLE_ID_HEX_LEN + 1];
    px_policy_id(id);
    if (atomic_load(&g_draining))
        reply_text(req, 503, "Service Unavailable", "draining");
    else if (id[0] == '\0')
        reply_text(req, 503, "Service Unavailable", "no table loaded");
    else
        reply_text(req, 200, "OK", "ready");
}

static void reload_cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
        reply_text(req, 405, "Method Not Allowed", "POST only");
        return;
    }
    ph_diag diag = { 0 };
    if (px_policy_reload(&diag) != PH_OK) {
        reply_text(req, 500, "Reload Failed", diag.message);
        return;
    }
    char id[PH_TABLE_ID_HEX_LEN + 1];
    px_policy_id(id);
    reply_text(req, 200, "OK", id);
}

/* How long the admin listener pauses accepting when descriptors ran out. */
#define ADMIN_BACKOFF_MS 100

static void admin_resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

/* evhttp's listener has no error callback of its own: without this one, an
 * accept failing with EMFILE (idle admin connections holding the
 * descriptors) leaves the listening socket readable, and the main loop
 * retries it at once, forever, one warning line each time. The listener
 * lives until evhttp_free, after the main loop ended, so the resume timer
 * never outlives it. */
static void admin_accept_error_cb(struct evconnlistener *l, void *arg)
{
    (void)arg; /* evhttp's own */
    int err = EVUTIL_SOCKET_ERROR();
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        px_metrics_accept_backoff();
        evconnlistener_disable(l);
        struct timeval tv = { 0, ADMIN_BACKOFF_MS * 1000 };
        event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, admin_resume_cb, l, &tv);
        return;
    }
    px_log_event("warning", "accept_error", "admin accept failed: %s", strerror(err));
}

struct evhttp *px_admin_start(struct event_base *base, const char *listen_addr,
                              px_sockaddr *bound, ph_diag *diag)
{
    px_sockaddr sa;
    ph_status st = px_sockaddr_parse(listen_addr, &sa, diag);
    if (st != PH_OK)
        return NULL;
    struct evhttp *h = evhttp_new(base);
    if (h == NULL) {
        ph_diag_set(diag, PH_E_NOMEM, 0, "evhttp_new failed");
        return NULL;
    }
    evhttp_set_allowed_methods(h, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD);
    evhttp_set_max_headers_size(h, 8192);
    evhttp_set_max_body_size(h, 4096);
    evhttp_set_timeout(h, 10);
    evhttp_set_cb(h, "/metrics", metrics_cb, NULL);
    evhttp_set_cb(h, "/healthz", healthz_cb, NULL);
    evhttp_set_cb(h, "/readyz", readyz_cb, NULL);
    evhttp_set_cb(h, "/reload", reload_cb, NULL);
    int fd = px_listen_tcp(&sa, true, diag);
    struct evhttp_bound_socket *bound_socket = fd < 0 ? NULL : evhttp_accept_socket_with_handle(h, fd);
    if (bound_socket == NULL) {
        if (fd >= 0) {
            ph_diag_set(diag, PH_E_IO, 0, "admin listener on %s failed", listen_addr);
            close(fd);
        }
        evhttp_free(h);
        return NULL;
    }
    evconnlistener_set_error_cb(evhttp_bound_socket_get_listener(bound_socket),
                                admin_accept_error_cb);
    *bound = sa;
    return h;
}
