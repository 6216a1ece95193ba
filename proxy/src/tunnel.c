/* tunnel.c - a CONNECT, the client connection's first front end: read the
 * request head, ask libpinhole for the decision of DESIGN section 4, take
 * the decision to a connected upstream (upstream.c), hand over to the
 * relay. The proxy reads accept -> head -> decide -> upstream -> relay:
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
 * Before any of it, at accept (conn.c): the overall, descriptor, per-peer
 * and request-head caps (503 proxy_overloaded, peer_limit_exceeded,
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
 * a bufferevent only to answer a refusal (px_conn_client_bev).
 *
 * The connection itself (its caps at accept, its refusals, its log line,
 * its end) is conn.c's (conn-int.h), which also says who owns what.
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
#include <event2/event.h>
#include <openssl/crypto.h>

#include "conn-int.h"
#include "conn.h"
#include "event_slot.h"
#include "forward.h"
#include "http1.h"
#include "inspect.h"
#include "log_json.h"
#include "metrics.h"
#include "pinhole/clock.h"
#include "proxy_limits.h"
#include "relay.h"
#include "reload.h"
#include "reply.h"
#include "sockaddr.h"
#include "upstream.h"
#include "worker.h"

/* ---- lifecycle ----------------------------------------------------------- */

/* Decides an open connection again against the policy now in force (the
 * guard says whether it goes on and, if not, why it ends): a tunnel, or a
 * connection forward.c serves, on what its next request would be decided
 * (px_forward_recheck_target). */
static void recheck(px_conn *c)
{
    const char *str[CS_COUNT];
    size_t token_len;
    px_conn_strings(c, str, &token_len);
    ph_recheck_request r = {
        .host = str[CS_HOST] ? str[CS_HOST] : "",
        .port = c->port,
        .proxy_authorization = str[CS_TOKEN],
        .proxy_authorization_len = token_len,
        .now = (int64_t)time(NULL),
    };
    bool forwarding = c->state == ST_FORWARD, in_tunnel = false;
    if (forwarding && !px_forward_recheck_target(c->fwd, &r, &in_tunnel))
        return;
    ph_decision d;
    ph_ending ending;
    ph_status st = ph_decide_again(px_policy(), &r, &d, &ending);
    char detail[PH_DIAG_MESSAGE_MAX + 64];
    snprintf(detail, sizeof detail, "after reload: %s", d.log_detail);
    if (st == PH_OK) {
        ph_protocol now = d.verdict.rule_protocol, was = (ph_protocol)c->protocol;
        if (forwarding) {
            /* HTTP in clear in a tunnel: its next request is refused once
             * the rule says tls (forward_decide.c); a plain forwarded
             * request is not inspected, whatever the rule says. */
            if (!in_tunnel || now != PH_PROTOCOL_TLS)
                return;
        } else {
            /* A tunnel not yet inspected is inspected against the rule now
             * in force. One already relaying carries what its old rule
             * admitted: a ClientHello that passed (still admitted unless
             * the rule now says http) or, with tcp, bytes nobody read
             * (admitted only while the rule still says tcp). */
            bool carried_raw = was == PH_PROTOCOL_TCP;
            bool relaying = c->state == ST_RELAY && !c->inspecting;
            if (!relaying) {
                c->protocol = (uint8_t)now;
                return;
            }
            if (carried_raw ? now == PH_PROTOCOL_TCP : now != PH_PROTOCOL_HTTP)
                return;
        }
        if (c->w->cfg->keep_tunnels_on_reload)
            return;
        ending = PH_ENDING_POLICY_REVOKED;
        snprintf(detail, sizeof detail, "after reload: the rule now says protocol %s",
                 ph_protocol_name(now));
    } else if (ending == PH_ENDING_POLICY_REVOKED && c->w->cfg->keep_tunnels_on_reload) {
        return;
    }
    const char *end = ph_ending_code(ending);
    if (forwarding) {
        /* Ended from the loop (forward.h): c stays in the list until then. */
        px_forward_revoke(c->fwd, end,
                          st == PH_OK ? PH_REASON_PROTOCOL_NOT_ALLOWED : d.reason, detail);
        return;
    }
    if (c->state == ST_RELAY) {
        /* The log line gets the detail: the tunnel's strings again, with it
         * (out of memory: the line goes without it). */
        str[CS_DETAIL] = detail;
        conn_tunnel *t = px_conn_tunnel_pack(str, token_len, &c->up); /* c->up moves into t */
        if (t != NULL) {
            px_conn_tunnel_free(&c->t);
            c->t = t;
        }
        px_relay_stop(c->relay, end); /* frees c */
        return;
    }
    c->end = end;
    px_conn_refuse(c, d.http_status, d.reason, detail);
}

void px_conn_recheck_all(px_worker *w)
{
    px_conn *c = w->conns, *next;
    for (; c; c = next) {
        next = c->next; /* recheck frees at most c */
        /* Past the decision: resolving, dialing, a tunnel (each holds the
         * token the decision accepted), or forward.c's (each request holds
         * the token it was decided on). */
        if (c->state == ST_RESOLVE || c->state == ST_CONNECT || c->state == ST_RELAY ||
            (c->state == ST_FORWARD && c->fwd != NULL))
            recheck(c);
    }
}

/* ---- relay --------------------------------------------------------------- */

/* The tunnel's log strings again with sni and detail (NULL: kept as they
 * are); out of memory, the line goes without them. */
static void tunnel_note(px_conn *c, const char *sni, const char *detail)
{
    const char *str[CS_COUNT];
    size_t token_len;
    px_conn_strings(c, str, &token_len);
    if (sni != NULL)
        str[CS_SNI] = sni;
    if (detail != NULL)
        str[CS_DETAIL] = detail;
    conn_tunnel *t = px_conn_tunnel_pack(str, token_len, &c->up); /* c->up moves into t */
    if (t != NULL) {
        px_conn_tunnel_free(&c->t);
        c->t = t;
    }
}

/* The relay's gate while the client's first bytes are held: the
 * inspection (inspect.h) decides on them against the CONNECT host, and
 * after the first ClientHello went (PASS_SOME) looks at the server's
 * answer (PX_GATE_UPSTREAM) before the client's next bytes go. Its state
 * lives on this stack but for what it keeps between asks, in c (c->insp);
 * what a verdict leaves behind (the log's sni and detail, the alert) is
 * copied or static. */
static px_gate_verdict inspect_gate(void *arg, const uint8_t *held, size_t len, px_gate_ask why,
                                    const char **end, const uint8_t **reply, size_t *reply_len)
{
    px_conn *c = arg;
    if (why == PX_GATE_UPSTREAM) {
        px_inspect_server(&c->insp, held, len);
        return PX_GATE_WAIT;
    }
    if (why == PX_GATE_EOF && len == 0 && c->insp.stage != PX_INSPECT_FIRST_HELLO) {
        /* The first hello went and the client ends its side with nothing
         * after it (a handshake the server refused): nothing is left to
         * inspect. */
        c->inspecting = false;
        return PX_GATE_PASS;
    }
    px_inspect insp, *in = &insp;
    px_inspect_init(in);
    in->kept = c->insp;
    const char *str[CS_COUNT];
    size_t token_len;
    px_conn_strings(c, str, &token_len);
    px_inspect_verdict v = px_inspect_step(in, held, len, str[CS_HOST] ? str[CS_HOST] : "",
                                           (ph_protocol)c->protocol, why != PX_GATE_BYTES);
    c->insp = in->kept;
    if (v == PX_INSPECT_WAIT)
        return PX_GATE_WAIT;
    if (v == PX_INSPECT_HTTP)
        return PX_GATE_HANDOFF; /* http_handoff */
    char detail[PH_DIAG_MESSAGE_MAX];
    if (v == PX_INSPECT_REFUSE)
        snprintf(detail, sizeof detail, "%s%s", in->detail,
                 why == PX_GATE_DEADLINE ? " (inspect_timeout_ms)"
                 : why == PX_GATE_FULL   ? " (inspect_bytes)"
                                         : "");
    /* The name as sent goes to the log (the second hello's, if there is
     * one); the usual one, the host itself, costs no copy of the tunnel's
     * strings. A step that read no hello (the server's answer released
     * the client's bytes) notes nothing. */
    const char *host = str[CS_HOST] ? str[CS_HOST] : "";
    bool read_hello = in->has_sni || v == PX_INSPECT_REFUSE;
    if (read_hello && v != PX_INSPECT_REFUSE && strcmp(in->hello.sni, host) == 0) {
        c->sni_is_host = true;
    } else if (read_hello) {
        tunnel_note(c, in->has_sni ? in->hello.sni : NULL, v == PX_INSPECT_REFUSE ? detail : NULL);
    }
    if (v == PX_INSPECT_PASS_HELLO) {
        /* The hello goes; what follows waits for the server's answer. */
        *reply_len = in->hello.end;
        return PX_GATE_PASS_SOME;
    }
    c->inspecting = false;
    if (v == PX_INSPECT_PASS)
        return PX_GATE_PASS;
    /* The 200 went out already: the status is the log's and the metric's;
     * the client gets a TLS alert (a TLS client) or the close. */
    c->status = ph_reason_http_status(in->reason);
    c->reason = in->reason;
    px_metrics_request(in->reason);
    *end = ph_reason_code(in->reason);
    *reply = in->alert;
    *reply_len = in->alert_len;
    return PX_GATE_END;
}

/* What forward.c asks of the connection that owns it (forward.h). */
static void fwd_head_done(void *owner)
{
    px_conn_leave_head(owner);
}

static void fwd_end(void *owner, const char *end)
{
    px_conn *c = owner;
    c->end = end;
    px_conn_free(c);
}

static const px_fwd_owner fwd_hooks = { fwd_head_done, fwd_end };

/* The inspection found HTTP/1 in clear: the forwarding engine serves the
 * tunnel from here (forward.h px_fwd_tunnel), every request decided on the
 * CONNECT's grant and refused (host_mismatch) unless it names the CONNECT
 * host and port. The tunnel ends as a tunnel (its metrics); the connection
 * logs each request from now on, as a forwarding one does, and holds a
 * lease slot only while a request does. */
static void http_handoff(void *arg, int client_fd, int upstream_fd, struct evbuffer *held,
                         struct evbuffer *to_client)
{
    px_conn *c = arg;
    struct event_base *base = c->w->base;
    px_relay_free(&c->relay); /* the sockets are ours now; it closes nothing */
    px_metrics_tunnel_close();
    px_metrics_bytes(c->bytes_up, c->bytes_down);
    c->bytes_up = c->bytes_down = 0;
    c->inspecting = false;
    px_upstream_free(&c->up);
    struct bufferevent *cb = bufferevent_socket_new(base, client_fd, BEV_OPT_CLOSE_ON_FREE);
    struct bufferevent *ub = cb != NULL ? bufferevent_socket_new(base, upstream_fd,
                                                                 BEV_OPT_CLOSE_ON_FREE)
                                        : NULL;
    const char *str[CS_COUNT];
    size_t token_len;
    px_conn_strings(c, str, &token_len);
    px_fwd_tunnel t = {
        .host = str[CS_HOST] ? str[CS_HOST] : "",
        .port = c->port,
        .token = str[CS_TOKEN] ? str[CS_TOKEN] : "",
        .token_len = token_len,
        .tenant = str[CS_TENANT],
        .lease = str[CS_LEASE],
        .list = str[CS_LIST],
        .rule_file = str[CS_RULE_FILE],
        .rule_line = c->rule_line,
        .policy_id = str[CS_POLICY_ID],
        .upstream = ub,
    };
    struct px_fwd *f = NULL;
    bool moved = false;
    if (ub != NULL) {
        /* The input's end is frozen (only the bufferevent adds to it). */
        struct evbuffer *in = bufferevent_get_input(cb);
        evbuffer_unfreeze(in, 0);
        moved = evbuffer_add_buffer(in, held) == 0 &&
                evbuffer_add_buffer(bufferevent_get_output(cb), to_client) == 0;
        evbuffer_freeze(in, 0);
    }
    if (moved)
        f = px_forward_start_tunnel(&fwd_hooks, c, c->w, cb, c->id, c->peer, &t);
    evbuffer_free(held);
    evbuffer_free(to_client);
    if (f == NULL) {
        if (cb != NULL)
            bufferevent_free(cb);
        else
            close(client_fd);
        if (ub != NULL)
            bufferevent_free(ub);
        else
            close(upstream_fd);
        c->end = "out_of_memory";
        px_conn_free(c);
        return;
    }
    c->fwd = f;
    c->state = ST_FORWARD;
    px_forward_run(f); /* never frees c within the call (forward.h) */
}

static void relay_done(void *arg, const char *why)
{
    px_conn *c = arg;
    c->end = why;
    px_conn_free(c);
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
    const char *life_end;
    long life = px_upstream_lifetime(c->up, &life_end);
    int ufd = px_upstream_take_fd(c->up, NULL);
    c->status = 200;
    c->reason = PH_REASON_ALLOWED;
    h->detail[0] = '\0';
    px_metrics_request(PH_REASON_ALLOWED);
    /* What the tunnel keeps of the head phase: the log's strings, and the
     * upstream stopped beside them (it lived in the head phase's memory,
     * which goes below; out of memory, it stays there until px_conn_free,
     * which frees it first). */
    const char *str[CS_COUNT];
    size_t token_len;
    px_conn_strings(c, str, &token_len);
    conn_tunnel *t = px_conn_tunnel_pack(str, token_len, &c->up);
    if (t != NULL)
        c->t = t; /* with c->up inside: px_conn_free frees c->up, then t */
    if (t == NULL) {
        close(ufd);
        c->end = "out_of_memory";
        px_conn_free(c);
        return;
    }
    c->relay = px_relay_start(c->w->base, c->fd, ufd, h->head_buf + h->head_len,
                              h->head_got - h->head_len, ok + sent, sizeof ok - 1 - (size_t)sent,
                              c->w->cfg, life, life_end, &c->bytes_up, &c->bytes_down, relay_done,
                              c);
    /* protocol: tcp is the one tunnel that is not inspected. */
    if (c->relay != NULL && c->protocol != PH_PROTOCOL_TCP) {
        /* Nothing of the client's goes upstream before the inspection
         * passed it (TUNNEL INSPECTION in docs/pinhole-proxy.md). */
        c->inspecting = true;
        memset(&c->insp, 0, sizeof c->insp);
        px_relay_hold(c->relay, (size_t)c->w->cfg->inspect_bytes, c->w->cfg->inspect_timeout_ms,
                      inspect_gate, http_handoff, c);
    }
    if (c->relay == NULL) {
        close(ufd);
        c->end = "out_of_memory";
        px_conn_free(c);
        return;
    }
    /* The relay owns the sockets now, and the head phase goes (nothing of
     * it is pending: the head was parsed, the dial ended, the timer and
     * the client's read event are gone). */
    c->fd = -1;
    px_conn_head_free(&c->h);
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
        px_conn_refuse_for(c, reason, detail);
        return;
    }
}

/* ---- the head and the decision ------------------------------------------- */

static void decide(px_conn *c, const uint8_t *head, const ph_h1_head *req)
{
    conn_head *h = c->h;
    /* The guard decides (authority, grant, list) on one policy version. */
    const ph_h1_field *auth = req->proxy_auth_field >= 0 ? &req->fields[req->proxy_auth_field]
                                                         : NULL;
    const char *value = auth != NULL ? (const char *)head + auth->value.off : NULL;
    size_t vlen = auth != NULL ? auth->value.len : 0;
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
        px_conn_refuse(c, d.http_status, d.reason, d.client_detail);
        snprintf(h->detail, sizeof h->detail, "%s", d.log_detail);
        return;
    }
    h->has_rule = d.verdict.has_rule;
    c->protocol = (uint8_t)d.verdict.rule_protocol;
    c->rule_line = d.verdict.has_rule ? d.verdict.rule_line : 0;
    snprintf(h->rule_file, sizeof h->rule_file, "%s", d.verdict.rule_file);

    /* Kept for rechecks after a reload (px_conn_recheck_all): the head's
     * bytes stay until the tunnel packs its own copy. */
    h->token = value != NULL ? value : "";
    h->token_len = vlen;

    /* The lease slot, then exactly this name resolved for this port (the
     * answer comes from the loop). */
    ph_reason why;
    const char *detail;
    if ((c->up = px_upstream_start_in(h->up_room, c->w, &d, upstream_cb, c, &why, &detail)) ==
        NULL) {
        px_conn_refuse_for(c, why, detail);
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
    struct bufferevent *b = px_conn_client_bev(c);
    struct px_fwd *f = b ? px_forward_start(&fwd_hooks, c, c->w, b, c->id, c->peer) : NULL;
    if (f == NULL) {
        c->end = "out_of_memory";
        px_conn_free(c);
        return;
    }
    /* The client is forward.c's now; the head phase goes (the bytes read
     * so far are in the client's input, the read event went with
     * client_bev, nothing else of it is pending). */
    c->h->client = NULL;
    px_conn_head_free(&c->h);
    c->fwd = f;
    c->state = ST_FORWARD;
    px_forward_run(f); /* never frees c within the call (forward.h) */
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

static void head_timeout_cb(evutil_socket_t fd, short what, void *arg);

/* The head phase, made at the first read with in[0..n) (the head_scratch)
 * in it and room for cap bytes, its timer running until the head deadline
 * (header_timeout_ms from accept). NULL when out of memory. */
static conn_head *head_start(px_conn *c, const uint8_t *in, size_t n, size_t cap)
{
    size_t room = px_upstream_room();
    conn_head *h = malloc(sizeof *h + PX_EVENT_SLOT + room + cap);
    if (h == NULL)
        return NULL;
    memset(h, 0, sizeof *h);
    h->timer = (struct event *)(unsigned char *)h->store;
    h->up_room = (unsigned char *)h->store + PX_EVENT_SLOT;
    h->head_buf = (uint8_t *)h->store + PX_EVENT_SLOT + room;
    memcpy(h->head_buf, in, n);
    h->head_got = n;
    evtimer_assign(h->timer, c->w->base, head_timeout_cb, c);
    int64_t left = c->w->cfg->header_timeout_ms - (ph_monotonic_ns() - c->started_ns) / 1000000;
    if (left < 0)
        left = 0;
    struct timeval tv = { (time_t)(left / 1000), (suseconds_t)(left % 1000 * 1000) };
    evtimer_add(h->timer, &tv);
    c->h = h;
    return h;
}

/* Parses the head read so far (in[0..n): head_buf, or the first read in
 * head_scratch, which is then kept in the head phase's head_buf: of its own
 * size when the head is complete, HEAD_READ_MAX when the rest is still to
 * come): decides a complete head, refuses a bad one, waits for more of an
 * incomplete one. */
static void head_parse(px_conn *c, const uint8_t *in, size_t n)
{
    /* A head arriving in pieces is parsed only when ph_h1_head_scan says a
     * line worth deciding ended, or at the cap; the scan resumes where it
     * stopped (head_len holds its mark until the head is parsed), so a
     * head sent a byte at a time costs time linear in its size. */
    conn_head *h = c->h;
    ph_h1_head req;
    ph_h1_result st = PH_H1_INCOMPLETE;
    size_t mark = h != NULL ? h->head_len : 0;
    bool parse = ph_h1_head_scan(in, n, &mark) || n >= PH_H1_REQUEST_HEAD_MAX;
    if (parse) {
        px_metrics_head_parse();
        st = ph_h1_parse_request(in, n, &req);
    }
    if (h == NULL &&
        (h = head_start(c, in, n, st == PH_H1_INCOMPLETE ? HEAD_READ_MAX : n)) == NULL) {
        c->end = "out_of_memory";
        px_conn_free(c);
        return;
    }
    h->head_len = mark;
    const uint8_t *head = h->head_buf;
    if (px_forward_wants(head, h->head_got)) {
        forward_handoff(c);
        return;
    }
    /* From here the head starts with "CONNECT ": its method is CONNECT, its
     * target authority-form, and it has no body (http1.h). */
    switch (st) {
    case PH_H1_INCOMPLETE:
        if (h->head_ev == NULL) {
            h->head_ev = event_new(c->w->base, c->fd, EV_READ | EV_PERSIST, head_ev_cb, c);
            if (h->head_ev == NULL || event_add(h->head_ev, NULL) != 0) {
                c->end = "out_of_memory";
                px_conn_free(c);
            }
        }
        return;
    case PH_H1_REFUSED: {
        char detail[PH_DIAG_MESSAGE_MAX];
        snprintf(detail, sizeof detail, "%s (byte %zu)", req.message, req.error_offset);
        px_conn_refuse_for(c, req.reason, detail);
        return;
    }
    case PH_H1_DONE:
        break;
    }
    evtimer_del(h->timer);
    if (h->head_ev != NULL) {
        event_free(h->head_ev);
        h->head_ev = NULL;
    }
    px_conn_leave_head(c);
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
    size_t got = h != NULL ? h->head_got : 0;
    uint8_t *to = h != NULL ? h->head_buf + got : head_scratch;
    ssize_t r = recv(c->fd, to, HEAD_READ_MAX - got, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        if (h == NULL)
            head_parse(c, head_scratch, 0); /* nothing yet: arms the read event */
        return;
    }
    if (r <= 0) {
        c->end = r == 0 ? "client_closed" : "client_error";
        px_conn_free(c);
        return;
    }
    if (h == NULL) {
        head_parse(c, head_scratch, (size_t)r); /* may free c */
        /* Copied into the head phase (or refused): the grant goes. */
        OPENSSL_cleanse(head_scratch, (size_t)r);
        return;
    }
    h->head_got += (size_t)r;
    head_parse(c, h->head_buf, h->head_got);
}

static void head_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_conn_refuse_for(arg, PH_REASON_HTTP_HEAD_TIMEOUT, "request head not complete in time");
}

void px_conn_accept(px_worker *w, int fd, const struct sockaddr *peer, int64_t accepted_ns)
{
    px_conn *c = px_conn_new(w, fd, peer);
    if (c == NULL)
        return;
    /* One deadline from accept (head_start): a PROXY header read first
     * spent some of it. fd is non-blocking already (accepted with
     * SOCK_NONBLOCK). */
    if (accepted_ns != 0)
        c->started_ns = accepted_ns;
    head_read(c); /* may free c */
}
