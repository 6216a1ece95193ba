/* execd_service.c - pinhole-execd's serving loop (docs/execd.md): the
 * listeners, the connections, the timer and signals (the admin listener's
 * connections are execd_admin.c's).
 *
 * One libevent loop (the main thread) owns the listener and every
 * connection; it never blocks. Each request that touches a sandbox becomes a
 * job for a fixed pool of threads (--max-executions, execd_pool.c) behind a
 * bounded queue (--queue): a request that finds the queue full is answered
 * `busy` at once. A finished job is handed back to the loop (a locked list
 * and an event made active from the thread), which writes the response if
 * the connection is still there. The operations are in execd_ops.c.
 *
 * The registry (environments, workspace ids, leases, identities;
 * execd_registry.c) is shared by the loop and the pool under one mutex,
 * held only for lookups and bookkeeping, never across a sandbox call. An
 * object in use by a job is marked (xd_use); a request whose use it excludes
 * gets `busy` rather than waiting: file operations run beside an execute, a
 * second execute or a destroy does not.
 *
 * Memory per connection is bounded before anything is parsed: its input
 * holds at most one frame (the read high-water mark), a frame is scanned
 * for its JSON values before jansson sees it (ph_wire_frame_scan), one
 * request is in progress at a time, and the connection is not read while
 * more than XD_OUTPUT_PAUSE of its output is unsent. Frames over
 * XD_PARSE_INLINE_MAX are parsed on the parser thread (execd_pool.c), so
 * no frame holds up the loop. Every connection has one deadline at a time:
 * the handshake's, from accept (total, not idle), or its current frame's,
 * from the frame's first byte.
 *
 * Ownership: an xd_conn is owned by the loop; a job holds a reference
 * (conn->job) and the loop frees a closed connection only once its job has
 * come back. The bufferevent is owned by its xd_conn (freed in conn_close).
 * A job owns its request and response JSON; a frame, once queued, is the
 * pool's until the loop writes and frees it. */
#include "execd_state-int.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- logging ---- */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

void xd_log(const char *level, const char *event, json_t *extra)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "level", level, "module", "execd", "event", event);
    if (o == NULL)
        return;
    if (extra != NULL)
        json_object_update(o, extra);
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (line == NULL)
        return;
    xd_log_line(line);
    free(line);
}

void xd_log_line(const char *line)
{
    pthread_mutex_lock(&g_log_mu);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pthread_mutex_unlock(&g_log_mu);
}

static struct event_base *g_base;

/* ---- connections (on the loop) ---- */

static xd_conn *g_conns; /* the loop's, for shutdown */
static size_t g_conn_count; /* identified connections: --max-connections */
static size_t g_anon_count; /* not yet identified (TLS handshake, refused peers) */

static void conn_free(xd_conn *c)
{
    free(c);
}

static void log_request(const char *op, const char *identity, const json_t *resp, int64_t ms)
{
    const char *err = ph_wire_str(resp, "error");
    json_t *x = json_pack("{s:s, s:s, s:s, s:I}", "op", op, "identity", identity, "status",
                          err ? "error" : "ok", "ms", (json_int_t)ms);
    if (x && err)
        json_object_set_new(x, "error", json_string(err));
    __atomic_add_fetch(&g_requests, 1, __ATOMIC_RELAXED);
    if (err == NULL)
        xd_observe(op, ms);
    if (err)
        __atomic_add_fetch(&g_errors_total, 1, __ATOMIC_RELAXED);
    xd_log(err ? "warning" : "info", "request", x);
    json_decref(x);
}

/* An answer that leaves more than XD_OUTPUT_PAUSE unsent must be read at
 * XD_ANSWER_MIN_RATE at least: what is unsent then has until now +
 * XD_STREAM_STALL_MS + unsent / XD_ANSWER_MIN_RATE, or the connection is
 * closed (write_too_slow). A peer trickling its reads therefore holds a
 * whole-file answer for seconds, not hours. */
static void conn_send(xd_conn *c, const json_t *resp)
{
    uint8_t *f;
    size_t len;
    if (ph_wire_frame(resp, &f, &len) == 0) {
        bufferevent_write(c->bev, f, len);
        free(f);
    }
    size_t out = evbuffer_get_length(bufferevent_get_output(c->bev));
    if (out > XD_OUTPUT_PAUSE) {
        int64_t ms = XD_STREAM_STALL_MS + (int64_t)(out / (XD_ANSWER_MIN_RATE / 1000));
        struct timeval t = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
        evtimer_add(c->answer_deadline, &t);
    }
}

static void conn_close(xd_conn *c);

static void on_answer_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    xd_conn *c = arg;
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) <= XD_OUTPUT_PAUSE)
        return;
    json_t *x = json_pack("{s:s}", "identity", c->ident ? c->ident->name : "?");
    xd_log("warning", "write_too_slow", x);
    json_decref(x);
    conn_close(c);
}

/* c no longer counts against --max-connections, its identity's share or
 * the unidentified connections. */
static void conn_uncount(xd_conn *c)
{
    if (c->ident != NULL)
        g_conn_count--;
    else if (c->anon)
        g_anon_count--;
    pthread_mutex_lock(&g_mu);
    if (c->ident && --c->ident->conns == 0)
        c->ident->gone_since_ms = ph_monotonic_ms();
    pthread_mutex_unlock(&g_mu);
}

/* The connection is gone: its job (if any) is cancelled and its command
 * killed; the xd_conn lives on until the job comes back. A frame on the
 * parser's queue is the connection's memory still: the connection stays
 * counted (its slot and its identity's) until the frame comes back, so
 * closing and reopening cannot pile frames up faster than they are
 * dropped. */
static void conn_close(xd_conn *c)
{
    bufferevent_free(c->bev);
    c->bev = NULL;
    if (c->deadline)
        event_free(c->deadline);
    c->deadline = NULL;
    if (c->answer_deadline)
        event_free(c->answer_deadline);
    c->answer_deadline = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        g_conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->counted_until_parsed = c->job != NULL && c->job->fn == NULL;
    if (!c->counted_until_parsed)
        conn_uncount(c);
    pthread_mutex_lock(&g_mu);
    if (c->job) {
        c->job->cancelled = true;
        if (c->job->tid)
            xd_kill_children_of(c->job->tid);
    }
    pthread_mutex_unlock(&g_mu);
    if (c->job)
        c->dead = true;
    else
        conn_free(c);
}

static void on_read(struct bufferevent *bev, void *arg);

static void arm_deadline(xd_conn *c, int64_t ms)
{
    struct timeval t = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};
    evtimer_add(c->deadline, &t);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    xd_conn *c = arg;
    size_t out = evbuffer_get_length(bufferevent_get_output(bev));
    __atomic_store_n(&c->backlog, out, __ATOMIC_RELEASE);
    if (c->close_after_write && out == 0) {
        conn_close(c);
    } else if (c->paused && out <= XD_OUTPUT_PAUSE) {
        /* The peer read its answers: what it sent meanwhile is served. */
        c->paused = false;
        bufferevent_enable(bev, EV_READ);
        on_read(bev, c);
    }
}

/* Answers code and closes once the answer is written, or at the frame
 * deadline if the peer never reads it. */
static void reply_and_close(xd_conn *c, const char *code, const char *msg)
{
    json_t *e = ph_wire_error(code, msg);
    if (e)
        conn_send(c, e);
    json_decref(e);
    c->close_after_write = true;
    bufferevent_disable(c->bev, EV_READ);
    c->frame_pending = false;
    if (!c->anon) /* an unidentified peer keeps its deadline from accept */
        arm_deadline(c, g_cfg->frame_timeout_ms);
}

void xd_metrics_text(char *text, size_t cap)
{
    pthread_mutex_lock(&g_mu);
    size_t live = g_live;
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_lock(&g_pool_mu);
    size_t queued = g_queued, running = g_running;
    pthread_mutex_unlock(&g_pool_mu);
    snprintf(text, cap,
             "# TYPE pinhole_execd_sandboxes_live gauge\npinhole_execd_sandboxes_live %zu\n"
             "# TYPE pinhole_execd_executions_in_flight gauge\n"
             "pinhole_execd_executions_in_flight %zu\n"
             "# TYPE pinhole_execd_queue_depth gauge\npinhole_execd_queue_depth %zu\n"
             "# TYPE pinhole_execd_requests_total counter\npinhole_execd_requests_total %lu\n"
             "# TYPE pinhole_execd_errors_total counter\npinhole_execd_errors_total %lu\n"
             "# TYPE pinhole_execd_busy_total counter\npinhole_execd_busy_total %lu\n",
             live, running, queued, __atomic_load_n(&g_requests, __ATOMIC_RELAXED),
             __atomic_load_n(&g_errors_total, __ATOMIC_RELAXED),
             __atomic_load_n(&g_busy_total, __ATOMIC_RELAXED));
    xd_print_histograms(text, cap);
}

/* hello, health and metrics: answered on the loop (cheap, and what a
 * worker asks when the pool is busy). NULL for any other operation. */
static json_t *inline_op(xd_conn *c, ph_wire_op_id op, const json_t *req)
{
    if (op != PH_OP_HELLO && op != PH_OP_HEALTH && op != PH_OP_METRICS)
        return NULL;
    ph_wire_args a;
    const char *bad = ph_wire_decode(op, req, &a);
    if (bad != NULL)
        return ph_wire_error("invalid", bad);
    pthread_mutex_lock(&g_mu);
    size_t live = g_live;
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_lock(&g_pool_mu);
    size_t queued = g_queued, running = g_running;
    pthread_mutex_unlock(&g_pool_mu);
    if (op == PH_OP_HELLO) {
        int64_t cap = a.f[PH_F_HARD_CAP_MS].present ? a.f[PH_F_HARD_CAP_MS].i : g_cfg->hard_cap_ms;
        if (cap < XD_CAP_MIN_MS) /* the daemon's own cap, when no cap was asked */
            return ph_wire_error("invalid", ph_wire_field_msg(op, PH_F_HARD_CAP_MS));
        c->cap_ms = xd_cap_bucket(cap);
        return json_pack("{s:b, s:i, s:s, s:s, s:I, s:s}", "ok", 1, "protocol", PH_EXECD_PROTOCOL,
                         "mechanism", ph_sandbox_mechanism_name(g_cfg->mechanism), "mode",
                         ph_service_mode_name(g_cfg->mode), "hard_cap_ms", (json_int_t)c->cap_ms,
                         "identity", c->ident->name);
    }
    if (op == PH_OP_HEALTH)
        return json_pack("{s:b, s:s, s:s, s:I, s:I, s:I}", "ok", 1, "status", "ok", "mechanism",
                         ph_sandbox_mechanism_name(g_cfg->mechanism), "sandboxes",
                         (json_int_t)live, "executions", (json_int_t)running, "queued",
                         (json_int_t)queued);
    char text[8192];
    xd_metrics_text(text, sizeof text);
    return json_pack("{s:b, s:s}", "ok", 1, "prometheus", text);
}

static void dispatch(xd_conn *c, json_t *req)
{
    const char *op = ph_wire_str(req, "op");
    ph_wire_op_id id;
    int64_t t0 = ph_monotonic_ms();
    json_t *resp = op == NULL              ? ph_wire_error("invalid", "no op")
                   : ph_wire_op_find(op, &id) ? inline_op(c, id, req)
                                          : NULL;
    if (resp == NULL) {
        if (xd_op_find(op) == NULL)
            resp = ph_wire_error("invalid", "unknown op");
        else if (c->cap_ms == 0)
            resp = ph_wire_error("protocol", "the first request must be hello");
        else if (c->ident->jobs >= g_cfg->max_requests_per_identity)
            resp = xd_busy("this identity is at --max-requests-per-identity");
    }
    if (resp == NULL) {
        xd_job *job = calloc(1, sizeof *job);
        pthread_mutex_lock(&g_pool_mu);
        bool full = g_queued >= g_cfg->queue;
        if (job && !full) {
            job->conn = c;
            job->req = json_incref(req);
            job->fn = xd_op_find(op);
            snprintf(job->op, sizeof job->op, "%s", op);
            snprintf(job->owner, sizeof job->owner, "%s", c->ident->name);
            job->cap_ms = c->cap_ms;
            job->start_ms = t0;
            c->job = job;
            xd_enqueue(job);
        }
        pthread_mutex_unlock(&g_pool_mu);
        if (c->job == job && job) {
            c->ident->jobs++;
            return;
        }
        free(job);
        resp = job ? xd_busy("the execution queue is full") : ph_wire_error("nomem", "out of memory");
    }
    if (resp) {
        conn_send(c, resp);
        log_request(op ? op : "?", c->ident->name, resp, ph_monotonic_ms() - t0);
        json_decref(resp);
    }
}

/* Bytes of a frame not yet complete in `in` (0: none, or a whole frame). */
static bool frame_partial(struct evbuffer *in)
{
    size_t have = evbuffer_get_length(in);
    if (have == 0)
        return false;
    if (have < PH_EXECD_FRAME_HEADER)
        return true;
    uint8_t hdr[PH_EXECD_FRAME_HEADER];
    evbuffer_copyout(in, hdr, sizeof hdr);
    return have < PH_EXECD_FRAME_HEADER + (size_t)ph_wire_frame_len(hdr);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    xd_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->tls_pending)
        return; /* no request before the handshake verified a certificate */
    if (c->unauthenticated && !c->close_after_write) {
        evbuffer_drain(in, evbuffer_get_length(in));
        reply_and_close(c, "unauthenticated", "this peer is not allowed");
        return;
    }
    bool completed = false; /* a frame was taken from the input in this call */
    while (!c->close_after_write && evbuffer_get_length(in) >= PH_EXECD_FRAME_HEADER) {
        if (c->job != NULL) {
            reply_and_close(c, "protocol", "one request at a time per connection");
            return;
        }
        if (evbuffer_get_length(bufferevent_get_output(bev)) > XD_OUTPUT_PAUSE) {
            c->paused = true;
            bufferevent_disable(bev, EV_READ);
            break;
        }
        uint8_t hdr[PH_EXECD_FRAME_HEADER];
        evbuffer_copyout(in, hdr, sizeof hdr);
        uint32_t n = ph_wire_frame_len(hdr);
        if (n == 0 || n > g_cfg->max_request_bytes) {
            reply_and_close(c, "too_large", "the request is over --max-request-bytes");
            return;
        }
        if (evbuffer_get_length(in) < PH_EXECD_FRAME_HEADER + (size_t)n)
            break;
        evbuffer_drain(in, PH_EXECD_FRAME_HEADER);
        completed = true;
        if (n > XD_PARSE_INLINE_MAX && c->ident->jobs >= g_cfg->max_requests_per_identity) {
            /* A frame for the parser counts as a request of its identity. */
            evbuffer_drain(in, n);
            json_t *busy = xd_busy("this identity is at --max-requests-per-identity");
            conn_send(c, busy);
            log_request("?", c->ident->name, busy, 0);
            json_decref(busy);
            continue;
        }
        if (n > XD_PARSE_INLINE_MAX) {
            xd_job *job = calloc(1, sizeof *job);
            uint8_t *frame = job ? malloc(n) : NULL;
            if (frame == NULL) {
                free(job);
                reply_and_close(c, "nomem", "out of memory");
                return;
            }
            evbuffer_remove(in, frame, n);
            job->conn = c;
            job->frame = frame;
            job->frame_len = n;
            c->job = job;
            c->ident->jobs++;
            xd_parse_enqueue(job);
            continue; /* more bytes now are a second request: refused above */
        }
        const uint8_t *body = evbuffer_pullup(in, n);
        const char *code = "nomem", *msg = "out of memory";
        json_t *req = body ? xd_frame_parse(body, n, &code, &msg) : NULL;
        evbuffer_drain(in, n);
        if (req == NULL) {
            reply_and_close(c, code, msg);
            return;
        }
        dispatch(c, req);
        json_decref(req);
    }
    /* A frame begun has --frame-timeout-ms from its first byte seen to
     * complete (a frame begun in the read that completed the one before
     * it, from then); a frame complete (served, or waiting while reading
     * is paused) has no deadline. */
    if (c->close_after_write)
        return;
    bool partial = frame_partial(in);
    if (partial && (!c->frame_pending || completed))
        arm_deadline(c, g_cfg->frame_timeout_ms);
    else if (!partial && c->frame_pending)
        evtimer_del(c->deadline);
    c->frame_pending = partial;
}

/* The deadline: an unidentified connection at the end of its handshake
 * time, a frame not complete in time, or a refusal its peer never read. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    xd_conn *c = arg;
    if (c->anon) {
        json_t *x = json_pack("{s:s}", "source", c->source);
        xd_log("warning", "handshake_timeout", x);
        json_decref(x);
        conn_close(c);
    } else if (c->frame_pending) {
        json_t *x = json_pack("{s:s}", "identity", c->ident->name);
        xd_log("warning", "frame_timeout", x);
        json_decref(x);
        reply_and_close(c, "protocol", "the frame did not complete within --frame-timeout-ms");
    } else {
        conn_close(c);
    }
}

static void conn_identify(xd_conn *c, const char *name);
static bool tls_identity(xd_conn *c, char name[XD_IDENTITY_MAX]);

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    xd_conn *c = arg;
    if ((what & BEV_EVENT_CONNECTED) && c->tls_pending) {
        char name[XD_IDENTITY_MAX];
        c->tls_pending = false;
        if (tls_identity(c, name)) {
            conn_identify(c, name);
            return;
        }
        what |= BEV_EVENT_ERROR;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
        if (c->tls_pending) {
            unsigned long e = bufferevent_get_openssl_error(c->bev);
            char reason[256] = "closed during the handshake";
            if (e)
                ERR_error_string_n(e, reason, sizeof reason);
            json_t *x = json_pack("{s:s}", "error", reason);
            xd_log("warning", "tls_refused", x);
            json_decref(x);
        }
        if ((what & BEV_EVENT_TIMEOUT) && c->ident != NULL) {
            json_t *x = json_pack("{s:s}", "identity", c->ident->name);
            xd_log("warning", "write_stalled", x);
            json_decref(x);
        }
        conn_close(c);
    }
}

static bool peer_allowed(int fd, char name[XD_IDENTITY_MAX])
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    snprintf(name, XD_IDENTITY_MAX, "uid:%u", (unsigned)cred.uid);
    for (size_t i = 0; i < g_cfg->allow_uid_count; i++)
        if (g_cfg->allow_uid[i] == cred.uid)
            return true;
    if (g_cfg->allow_gid_count == 0)
        return false;
    /* The primary group and the supplementary ones the peer had at
     * connect (SO_PEERGROUPS), as a file's group permission would. */
    gid_t few[64], *groups = few;
    socklen_t glen = sizeof few;
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen);
    if (rc != 0 && errno == ERANGE && (groups = malloc(glen)) != NULL)
        rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen);
    size_t ngroups = rc == 0 ? glen / sizeof groups[0] : 0;
    bool ok = false;
    for (size_t i = 0; !ok && i < g_cfg->allow_gid_count; i++) {
        ok = g_cfg->allow_gid[i] == cred.gid;
        for (size_t k = 0; !ok && k < ngroups; k++)
            ok = g_cfg->allow_gid[i] == groups[k];
    }
    if (groups != few)
        free(groups);
    return ok;
}

/* Whether c's TLS handshake has begun: OpenSSL has a whole ClientHello. */
static bool anon_in_handshake(xd_conn *c)
{
    SSL *ssl = c->tls_pending ? bufferevent_openssl_get_ssl(c->bev) : NULL;
    return ssl != NULL && !SSL_in_before(ssl);
}

/* Makes room for one more unidentified connection from source: at
 * XD_ANON_PER_SOURCE from it, one of its own is closed; at XD_ANON_MAX in
 * all, one of the source holding the most. Within the chosen source a
 * connection whose handshake has not begun goes first, then the oldest. A
 * handshake in progress from a source with fewer connections than another
 * is therefore never the one closed: flooding from any number of addresses
 * evicts the flooders' own connections first. */
static void anon_make_room(const char *source)
{
    size_t same = 0, most = 0;
    const char *most_source = NULL;
    for (xd_conn *c = g_conns; c; c = c->next) {
        if (!c->anon || c->bev == NULL)
            continue;
        same += strcmp(c->source, source) == 0;
        if (most >= XD_ANON_PER_SOURCE)
            continue; /* no source holds more: a flood costs one pass, not n^2 */
        size_t n = 0;
        for (xd_conn *o = g_conns; o; o = o->next)
            n += o->anon && o->bev != NULL && strcmp(o->source, c->source) == 0;
        if (n > most) {
            most = n;
            most_source = c->source;
        }
    }
    bool per_source = same >= XD_ANON_PER_SOURCE;
    if (!per_source && g_anon_count < XD_ANON_MAX)
        return;
    const char *from = per_source ? source : most_source;
    xd_conn *victim = NULL;
    bool victim_begun = true;
    for (xd_conn *c = g_conns; c && from; c = c->next) {
        if (!c->anon || c->bev == NULL || strcmp(c->source, from) != 0)
            continue;
        bool begun = anon_in_handshake(c);
        if (victim == NULL || (victim_begun && !begun) ||
            (begun == victim_begun && c->accepted_ms <= victim->accepted_ms)) {
            victim = c;
            victim_begun = begun;
        }
    }
    if (victim == NULL)
        return;
    __atomic_add_fetch(&g_busy_total, 1, __ATOMIC_RELAXED);
    json_t *x = json_pack("{s:s, s:s}", "source", victim->source, "why",
                          per_source ? "per_source" : "total");
    xd_log("warning", "unidentified_evicted", x);
    json_decref(x);
    conn_close(victim);
}

/* anon: the peer is not identified yet (a TLS handshake to come, or a unix
 * peer not allowed, named by source): counted against XD_ANON_MAX until
 * identified, and closed --handshake-timeout-ms after accept unless
 * identified by then. */
static xd_conn *conn_new(struct bufferevent *bev, bool anon, const char *source)
{
    if (anon)
        anon_make_room(source);
    xd_conn *c = calloc(1, sizeof *c);
    struct event *deadline = c ? evtimer_new(g_base, on_deadline, c) : NULL;
    struct event *answer = deadline ? evtimer_new(g_base, on_answer_deadline, c) : NULL;
    if (answer == NULL) {
        if (deadline)
            event_free(deadline);
        free(c);
        bufferevent_free(bev);
        return NULL;
    }
    c->deadline = deadline;
    c->answer_deadline = answer;
    c->bev = bev;
    c->next = g_conns;
    if (g_conns)
        g_conns->prev = c;
    g_conns = c;
    c->anon = anon;
    c->accepted_ms = ph_monotonic_ms();
    snprintf(c->source, sizeof c->source, "%s", source);
    if (anon) {
        g_anon_count++;
        arm_deadline(c, g_cfg->handshake_timeout_ms);
    }
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    /* on_write runs whenever output drains below this: a streaming job
     * waiting for the peer learns of progress, a paused connection that
     * its peer has read resumes. */
    bufferevent_setwatermark(bev, EV_WRITE, XD_STREAM_BACKLOG / 2, 0);
    return c;
}

/* The peer is name: counted under its identity, then served. */
static void conn_identify(xd_conn *c, const char *name)
{
    if (g_conn_count >= g_cfg->max_connections) {
        __atomic_add_fetch(&g_busy_total, 1, __ATOMIC_RELAXED);
        xd_log("warning", "too_many_connections", NULL);
        conn_close(c);
        return;
    }
    pthread_mutex_lock(&g_mu);
    xd_identity *id = xd_identity_find(name);
    if (id == NULL && (id = calloc(1, sizeof *id)) != NULL) {
        snprintf(id->name, sizeof id->name, "%s", name);
        id->next = g_identities;
        g_identities = id;
    }
    bool over = id && (size_t)id->conns >= g_cfg->max_connections_per_identity;
    if (id && !over)
        id->conns++;
    pthread_mutex_unlock(&g_mu);
    if (over) {
        __atomic_add_fetch(&g_busy_total, 1, __ATOMIC_RELAXED);
        json_t *x = json_pack("{s:s}", "identity", name);
        xd_log("warning", "too_many_connections_for_identity", x);
        json_decref(x);
    }
    if (id == NULL || over) {
        conn_close(c);
        return;
    }
    c->ident = id;
    if (c->anon)
        g_anon_count--;
    c->anon = false;
    evtimer_del(c->deadline);
    g_conn_count++;
    /* Output its peer reads none of for the stall limit ends the
     * connection: an answer nobody reads is not held for good. */
    struct timeval stall = {XD_STREAM_STALL_MS / 1000, 0};
    bufferevent_set_timeouts(c->bev, NULL, &stall);
    /* At most one frame (and its header) is read ahead of the loop. */
    bufferevent_setwatermark(c->bev, EV_READ, 0,
                             PH_EXECD_FRAME_HEADER + g_cfg->max_request_bytes);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

/* The pause of a listener whose accept failed for want of descriptors.
 * Its resume timer (argument: the guard) is made with the guard, so a
 * pause cannot fail for want of memory and leave a listener off for good.
 * Owned by whoever made it (xd_serve, xd_admin) and freed with the
 * listener it paused. */
struct xd_accept_guard {
    struct evconnlistener *paused;
    struct event *resume;
};

static void accept_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    xd_accept_guard *g = arg;
    evconnlistener_enable(g->paused);
}

void xd_accept_failed(struct evconnlistener *lst, void *guard)
{
    xd_accept_guard *g = guard;
    int err = EVUTIL_SOCKET_ERROR();
    bool scarce = err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
    json_t *x = json_pack("{s:s, s:i}", "error", strerror(err), "pause_ms",
                          scarce ? XD_ACCEPT_PAUSE_MS : 0);
    xd_log("warning", scarce ? "accept_paused" : "accept_failed", x);
    json_decref(x);
    if (!scarce)
        return;
    evconnlistener_disable(lst);
    g->paused = lst;
    struct timeval t = {0, XD_ACCEPT_PAUSE_MS * 1000};
    evtimer_add(g->resume, &t);
}

xd_accept_guard *xd_accept_guard_new(struct event_base *base)
{
    xd_accept_guard *g = calloc(1, sizeof *g);
    if (g != NULL)
        g->resume = evtimer_new(base, accept_resume, g);
    if (g == NULL || g->resume == NULL) {
        free(g);
        return NULL;
    }
    return g;
}

void xd_accept_guard_free(xd_accept_guard **g)
{
    if (*g == NULL)
        return;
    event_free((*g)->resume);
    free(*g);
    *g = NULL;
}

static void on_accept(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)lst;
    (void)sa;
    (void)salen;
    (void)arg;
    struct bufferevent *bev = bufferevent_socket_new(g_base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        close(fd);
        return;
    }
    char name[XD_IDENTITY_MAX] = "";
    bool allowed = peer_allowed(fd, name);
    xd_conn *c = conn_new(bev, !allowed, name[0] ? name : "uid:unknown");
    if (c == NULL)
        return;
    if (!allowed) {
        /* Answered at its first request (a client that sends first then
         * reads always gets the answer, never a broken pipe), or dropped
         * at the handshake deadline. */
        json_t *x = json_pack("{s:s}", "identity", name[0] ? name : "unknown");
        xd_log("warning", "unauthenticated", x);
        json_decref(x);
        c->unauthenticated = true;
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        return;
    }
    conn_identify(c, name);
}

/* TCP with mutual TLS: the handshake (bounded by a timeout) verifies the
 * client's certificate against the configured CA; one that has none or
 * another CA's never gets past it. The certificate subject is the identity. */
static SSL_CTX *g_tls_ctx;

/* "ip:" and the peer's address; an IPv6 peer's /64, which one host
 * commonly holds whole. */
static void tcp_source(const struct sockaddr *sa, char out[64])
{
    char text[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, text, sizeof text);
    } else if (sa->sa_family == AF_INET6) {
        struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
        memset(a.s6_addr + 8, 0, 8);
        inet_ntop(AF_INET6, &a, text, sizeof text);
    }
    snprintf(out, 64, "ip:%s", text);
}

static void on_accept_tls(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa,
                          int salen, void *arg)
{
    (void)lst;
    (void)salen;
    (void)arg;
    SSL *ssl = SSL_new(g_tls_ctx);
    struct bufferevent *bev =
        ssl ? bufferevent_openssl_socket_new(g_base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE)
            : NULL;
    if (bev == NULL) {
        SSL_free(ssl);
        close(fd);
        return;
    }
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    char source[64];
    tcp_source(sa, source);
    xd_conn *c = conn_new(bev, true, source);
    if (c == NULL)
        return;
    c->tls_pending = true;
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* "cert:" and the RFC 2253 form of the verified peer's subject. */
static bool tls_identity(xd_conn *c, char name[XD_IDENTITY_MAX])
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
    X509 *cert = ssl ? SSL_get1_peer_certificate(ssl) : NULL;
    if (cert == NULL || SSL_get_verify_result(ssl) != X509_V_OK) {
        X509_free(cert);
        return false;
    }
    BIO *bio = BIO_new(BIO_s_mem());
    bool ok = bio && X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0,
                                        XN_FLAG_RFC2253) >= 0;
    char *text = NULL;
    long len = ok ? BIO_get_mem_data(bio, &text) : 0;
    ok = ok && len > 0 && (size_t)len + 6 < XD_IDENTITY_MAX;
    if (ok)
        snprintf(name, XD_IDENTITY_MAX, "cert:%.*s", (int)len, text);
    BIO_free(bio);
    X509_free(cert);
    return ok;
}

static bool g_stopping; /* the loop's: SIGTERM or SIGINT came */
static bool g_hold_job_queued; /* the loop's: a maintain.hold job is queued or running */

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    xd_job *list;
    xd_frame *frames;
    xd_pool_take(&list, &frames);
    /* A frame's connection is alive: its job (still running or in `list`)
     * keeps a closed xd_conn until the job is handled below. */
    while (frames) {
        xd_frame *fr = frames;
        frames = fr->next;
        if (fr->conn->bev) {
            bufferevent_write(fr->conn->bev, fr->data, fr->len);
            __atomic_store_n(&fr->conn->backlog,
                             evbuffer_get_length(bufferevent_get_output(fr->conn->bev)),
                             __ATOMIC_RELEASE);
        }
        free(fr->data);
        free(fr);
    }
    while (list) {
        xd_job *job = list;
        list = job->next;
        xd_conn *c = job->conn;
        if (job->fn == NULL) {
            /* A frame back from the parser: served as if parsed here. */
            const char *msg = ph_wire_str(job->resp, "message");
            c->job = NULL;
            c->ident->jobs--;
            if (c->dead) {
                if (c->counted_until_parsed)
                    conn_uncount(c);
                conn_free(c);
            } else {
                if (job->req == NULL)
                    reply_and_close(c, job->refusal, msg ? msg : "refused");
                else if (xd_pool_stopping())
                    reply_and_close(c, "shutting_down", "the daemon is stopping");
                else
                    dispatch(c, job->req);
                if (!c->close_after_write)
                    on_read(c->bev, c); /* what arrived while it was parsed */
            }
            xd_job_free(job);
            continue;
        }
        /* Stopping: whatever a job did is destroyed with everything else. */
        json_t *resp = g_stopping  ? ph_wire_error("shutting_down", "the service is stopping")
                       : job->resp ? job->resp
                                   : ph_wire_error("internal", "no response");
        if (c != NULL) {
            log_request(job->op, job->owner, resp, ph_monotonic_ms() - job->start_ms);
            c->job = NULL;
            c->ident->jobs--;
            xd_job *undo = c->dead && json_is_true(json_object_get(resp, "ok")) &&
                                   strcmp(job->op, "environment.create") == 0
                               ? xd_undelivered_job(job)
                               : NULL;
            if (undo != NULL) {
                pthread_mutex_lock(&g_pool_mu);
                xd_enqueue(undo); /* the daemon's own: not bounded by --queue */
                pthread_mutex_unlock(&g_pool_mu);
            }
            if (c->dead)
                conn_free(c);
            else
                conn_send(c, resp);
        }
        if (c == NULL && job->fn == xd_op_maintain) {
            pthread_mutex_lock(&g_mu);
            xd_identity *id = job->owner[0] ? xd_identity_find(job->owner) : NULL;
            if (id != NULL)
                id->reaping = false;
            pthread_mutex_unlock(&g_mu);
            g_hold_job_queued &= job->owner[0] != '\0';
        }
        if (resp != job->resp)
            json_decref(resp);
        xd_job_free(job);
    }
}

/* Once a second: ticks held leases on the workers' clocks and reaps the
 * objects of identities gone longer than the grace period. Each is one job
 * at a time: while the threads are busy a tick finds the last one still
 * queued, and queues no other (one a second would fill --queue, which they
 * count against, and workers would be answered busy). */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    char gone[8][XD_IDENTITY_MAX];
    size_t ngone = 0;
    bool held = false;
    pthread_mutex_lock(&g_mu);
    for (xd_identity *id = g_identities; id; id = id->next) {
        if (id->conns == 0 && id->gone_since_ms > 0 && !id->reaping && ngone < 8 &&
            ph_monotonic_ms() - id->gone_since_ms >= g_cfg->grace_seconds * 1000) {
            bool has = false;
            for (xd_env *e = g_envs; e && !has; e = e->next)
                has = strcmp(e->owner, id->name) == 0;
            for (xd_lease *l = g_leases; l && !has; l = l->next)
                has = strcmp(l->owner, id->name) == 0;
            if (has)
                memcpy(gone[ngone++], id->name, XD_IDENTITY_MAX);
            else
                id->gone_since_ms = 0;
        }
    }
    for (xd_lease *l = g_leases; l && !held && !g_hold_job_queued; l = l->next)
        held = l->held && l->env_id[0] && !l->busy && !xd_lease_env_in_use(l);
    pthread_mutex_unlock(&g_mu);
    for (size_t i = 0; i <= ngone; i++) {
        if (i == ngone && !held)
            break;
        xd_job *job = calloc(1, sizeof *job);
        if (job == NULL)
            break;
        job->fn = xd_op_maintain;
        snprintf(job->op, sizeof job->op, "%s", i < ngone ? "maintain.owner_gone" : "maintain.hold");
        if (i < ngone) {
            memcpy(job->owner, gone[i], XD_IDENTITY_MAX);
            json_t *x = json_pack("{s:s}", "identity", gone[i]);
            xd_log("info", "owner_gone_reaping", x);
            json_decref(x);
        }
        pthread_mutex_lock(&g_pool_mu);
        xd_enqueue(job); /* the daemon's own: not bounded by --queue */
        pthread_mutex_unlock(&g_pool_mu);
        pthread_mutex_lock(&g_mu);
        xd_identity *id = i < ngone ? xd_identity_find(gone[i]) : NULL;
        if (id != NULL)
            id->reaping = true;
        pthread_mutex_unlock(&g_mu);
        g_hold_job_queued |= i == ngone;
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    json_t *x = json_pack("{s:i}", "signal", (int)sig);
    xd_log("info", "stopping", x);
    json_decref(x);
    event_base_loopbreak(g_base);
}

int xd_serve(const xd_config *cfg, int listen_fd, int tls_fd, struct ssl_ctx_st *tls_ctx,
             int admin_fd)
{
    g_cfg = cfg;
    g_base = event_base_new();
    /* The listeners' argument is their guard (xd_accept_failed's). */
    xd_accept_guard *lst_guard = g_base ? xd_accept_guard_new(g_base) : NULL;
    xd_accept_guard *tls_guard = g_base ? xd_accept_guard_new(g_base) : NULL;
    struct evconnlistener *lst =
        lst_guard ? evconnlistener_new(g_base, on_accept, lst_guard,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, listen_fd)
               : NULL;
    g_tls_ctx = tls_ctx;
    struct evconnlistener *tls_lst =
        tls_guard && tls_fd >= 0
            ? evconnlistener_new(g_base, on_accept_tls, tls_guard,
                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, tls_fd)
            : NULL;
    xd_admin *admin = g_base && admin_fd >= 0 ? xd_admin_start(g_base, admin_fd) : NULL;
    struct event *done_ev = g_base ? event_new(g_base, -1, 0, on_done, NULL) : NULL;
    struct event *timer = g_base ? event_new(g_base, -1, EV_PERSIST, on_timer, NULL) : NULL;
    struct event *sigterm = g_base ? evsignal_new(g_base, SIGTERM, on_signal, NULL) : NULL;
    struct event *sigint = g_base ? evsignal_new(g_base, SIGINT, on_signal, NULL) : NULL;
    if (lst == NULL || (tls_fd >= 0 && tls_lst == NULL) || (admin_fd >= 0 && admin == NULL) ||
        done_ev == NULL || timer == NULL || sigterm == NULL || sigint == NULL) {
        xd_log("error", "startup_failed", NULL);
        return 71;
    }
    evconnlistener_set_error_cb(lst, xd_accept_failed);
    if (tls_lst)
        evconnlistener_set_error_cb(tls_lst, xd_accept_failed);
    struct timeval sec = {1, 0};
    event_add(timer, &sec);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    /* Blocked since the sockets were made (execd_main.c): one that came
     * since is handled now; the pool threads start with them unblocked. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
    size_t started = xd_pool_start(cfg->max_executions, done_ev);
    json_t *x = json_pack("{s:s, s:s, s:I}", "mechanism", ph_sandbox_mechanism_name(cfg->mechanism),
                          "mode", ph_service_mode_name(cfg->mode), "threads",
                          (json_int_t)started);
    xd_log("info", "listening", x);
    json_decref(x);
    event_base_dispatch(g_base);

    /* Stop: no new connections; kill what runs; let the pool finish. */
    evconnlistener_free(lst);
    if (tls_lst)
        evconnlistener_free(tls_lst);
    xd_accept_guard_free(&lst_guard);
    xd_accept_guard_free(&tls_guard);
    xd_admin_free(&admin);
    g_stopping = true;
    event_del(timer);
    xd_pool_stop();
    on_done(-1, 0, NULL);
    /* The answers just queued (shutting_down) reach their peers, for at
     * most a second, then every connection closes. */
    for (xd_conn *c = g_conns, *next; c != NULL; c = next) {
        next = c->next;
        if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
            conn_close(c);
        } else {
            c->close_after_write = true;
            bufferevent_disable(c->bev, EV_READ);
        }
    }
    if (g_conns != NULL) {
        struct timeval drain = {1, 0};
        event_base_loopexit(g_base, &drain);
        event_base_dispatch(g_base);
    }
    while (g_conns)
        conn_close(g_conns);
    size_t n = xd_destroy_all();
    x = json_pack("{s:I}", "destroyed", (json_int_t)n);
    xd_log("info", "stopped", x);
    json_decref(x);
    event_free(timer);
    event_free(sigterm);
    event_free(sigint);
    event_free(done_ev);
    event_base_free(g_base);
    return 0; /* the socket's path is removed by the caller (execd_main.c) */
}
