/* conn.c - a client connection's life (conn-int.h): admitted at accept
 * under the overall, descriptor, per-peer and request-head caps, in its
 * worker's list until it ends, answered a refusal while in its head phase,
 * logged once at its end (a forwarded connection logs each request
 * instead), its slots released. What it serves is tunnel.c's or
 * forward.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "conn-int.h"
#include "conn.h"
#include "evbuffer_wipe.h"
#include "forward.h"
#include "log_json.h"
#include "metrics.h"
#include "pinhole/clock.h"
#include "proxy_limits.h"
#include "reply.h"
#include "sockaddr.h"

struct bufferevent *px_conn_client_bev(px_conn *c)
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

static void reply_written_cb(struct bufferevent *b, void *arg)
{
    (void)b;
    px_conn_free(arg);
}

static void reply_event_cb(struct bufferevent *b, short what, void *arg)
{
    (void)b;
    (void)what;
    px_conn_free(arg);
}

static void reply_unbuffered_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_conn_free(arg);
}

void px_conn_refuse(px_conn *c, int status, ph_reason reason, const char *detail)
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
    px_conn_leave_head(c);
    c->state = ST_REPLY;
    evtimer_del(h->timer);
    if (c->up != NULL)
        px_upstream_stop(&c->up);
    struct bufferevent *b = px_conn_client_bev(c);
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

void px_conn_refuse_for(px_conn *c, ph_reason reason, const char *detail)
{
    px_conn_refuse(c, ph_reason_http_status(reason), reason, detail);
}

static double elapsed(const px_conn *c)
{
    return (double)(ph_monotonic_ns() - c->started_ns) / 1e9;
}

void px_conn_strings(const px_conn *c, const char *str[CS_COUNT], size_t *token_len)
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

conn_tunnel *px_conn_tunnel_pack(const char *const str[CS_COUNT], size_t token_len,
                                 px_upstream **up)
{
    size_t len[CS_COUNT], total = 0;
    for (int k = 0; k < CS_COUNT; k++) {
        len[k] = str[k] == NULL ? 0 : (k == CS_TOKEN ? token_len : strlen(str[k]));
        total += str[k] == NULL ? 0 : len[k] + 1;
    }
    /* Bounded by the head (PH_H1_REQUEST_HEAD_MAX) and the fields' own caps. */
    if (total >= CS_ABSENT)
        return NULL;
    /* The upstream's compact form after the strings, aligned. */
    size_t at = (sizeof(conn_tunnel) + total + sizeof(max_align_t) - 1) / sizeof(max_align_t) *
                sizeof(max_align_t);
    size_t room = up != NULL && *up != NULL ? px_upstream_compact_size(*up) : 0;
    conn_tunnel *t = malloc(room > 0 ? at + room : sizeof *t + total);
    if (t == NULL)
        return NULL;
    size_t pos = 0;
    for (int k = 0; k < CS_COUNT; k++) {
        if (str[k] == NULL) {
            t->off[k] = CS_ABSENT;
            continue;
        }
        t->off[k] = (uint16_t)pos;
        memcpy(t->s + pos, str[k], len[k]);
        t->s[pos + len[k]] = '\0';
        pos += len[k] + 1;
    }
    t->token_len = (uint16_t)len[CS_TOKEN];
    if (room > 0)
        px_upstream_stop_in(up, (unsigned char *)t + at);
    return t;
}

static void conn_log(const px_conn *c)
{
    const char *str[CS_COUNT];
    size_t token_len;
    px_conn_strings(c, str, &token_len);
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
        .sni = str[CS_SNI] != NULL ? str[CS_SNI] : c->sni_is_host ? str[CS_HOST] : NULL,
    };
    px_log_connection(&r);
}

void px_conn_head_free(conn_head **hp)
{
    conn_head *h = *hp;
    if (h == NULL)
        return;
    event_del(h->timer);
    event_debug_unassign(h->timer);
    if (h->head_ev)
        event_free(h->head_ev);
    if (h->client) {
        /* Its input holds the head (px_conn_client_bev): a grant. */
        struct evbuffer *in = bufferevent_get_input(h->client);
        px_evbuffer_drain_wiped(in, evbuffer_get_length(in));
        bufferevent_free(h->client);
    }
    /* The head's bytes hold a grant: wiped, and all before them with them. */
    ph_secret_free(h, (size_t)(h->head_buf + h->head_got - (uint8_t *)h));
    *hp = NULL;
}

void px_conn_tunnel_free(conn_tunnel **tp)
{
    conn_tunnel *t = *tp;
    if (t == NULL)
        return;
    /* Wiped up to the end of its token (a grant): the strings, in order. */
    size_t end = t->off[CS_TOKEN] != CS_ABSENT ? t->off[CS_TOKEN] + (size_t)t->token_len : 0;
    ph_secret_free(t, offsetof(conn_tunnel, s) + end);
    *tp = NULL;
}

void px_conn_free(px_conn *c)
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
    px_conn_leave_head(c);
    if (c->peer[c->key_off])
        px_limits_peer_release(c->peer + c->key_off);
    px_upstream_free(&c->up); /* releases the lease slot; before c->h and c->t, where it may live */
    if (c->fd >= 0)
        close(c->fd);
    if (c->relay) {
        px_relay_free(&c->relay); /* closes both sockets */
        px_metrics_tunnel_close();
        px_metrics_bytes(c->bytes_up, c->bytes_down);
    }
    px_conn_head_free(&c->h);
    px_conn_tunnel_free(&c->t);
    px_limits_conn_release();
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    w->nconns--;
    free(c);
    /* A draining worker's loop ends with its last connection. */
    if (w->draining && w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

void px_conn_close_all(px_worker *w)
{
    while (w->conns) {
        px_conn *c = w->conns;
        if (c->end == NULL)
            c->end = "shutdown";
        px_conn_free(c);
    }
}

void px_conn_close_idle_heads(px_worker *w)
{
    px_conn *c = w->conns, *next;
    for (; c; c = next) {
        next = c->next;
        if (c->state == ST_HEAD || (c->state == ST_FORWARD && px_forward_idle(c->fwd))) {
            c->end = "shutdown";
            px_conn_free(c);
        }
    }
}

void px_conn_refuse_at_accept(int fd, const char *peer, ph_reason reason, const char *why,
                              int64_t accepted_ns)
{
    px_refuse_socket(fd, reason, why);
    px_metrics_request(reason);
    px_log_record r = { .peer = peer, .status = ph_reason_http_status(reason), .reason = reason,
                        .detail = why };
    if (accepted_ns != 0)
        r.duration_s = (double)(ph_monotonic_ns() - accepted_ns) / 1e9;
    px_log_connection(&r);
}

void px_conn_leave_head(px_conn *c)
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
void px_conn_peer_identity(int fd, const struct sockaddr *peer, char *log, size_t log_cap,
                           char key[PX_PEER_KEY_MAX])
{
    if (peer->sa_family == AF_INET || peer->sa_family == AF_INET6) {
        char a[INET6_ADDRSTRLEN];
        ph_sockaddr_text(peer, log, log_cap);
        ph_sockaddr_addr_text(peer, a, sizeof a);
        snprintf(key, PX_PEER_KEY_MAX, "ip %s", a);
        return;
    }
    struct ucred cred = { 0 };
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
        snprintf(log, log_cap, "unix pid=%d uid=%u", (int)cred.pid, (unsigned)cred.uid);
        snprintf(key, PX_PEER_KEY_MAX, "pid %d", (int)cred.pid);
    } else {
        snprintf(log, log_cap, "unix");
        snprintf(key, PX_PEER_KEY_MAX, "unix");
    }
}

bool px_conn_slots_acquire(px_worker *w, int fd, const char *peer_log, const char *peer_key)
{
    if (!px_limits_conn_acquire(w->cfg->max_connections)) {
        px_conn_refuse_at_accept(
            fd, peer_log, PH_REASON_PROXY_OVERLOADED,
            px_limits_conn_active() >= w->cfg->max_connections
                ? "max_connections reached"
                : "descriptor reserve reached (the descriptor limit caps connections)",
            0);
        return false;
    }
    if (!px_limits_peer_acquire(peer_key, w->cfg->max_connections_per_peer)) {
        px_limits_conn_release();
        px_conn_refuse_at_accept(fd, peer_log, PH_REASON_PEER_LIMIT_EXCEEDED,
                                 "max_connections_per_peer reached for this peer", 0);
        return false;
    }
    if (!px_limits_peer_head_acquire(peer_key, w->cfg->max_head_connections_per_peer)) {
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        px_conn_refuse_at_accept(fd, peer_log, PH_REASON_PEER_HEAD_LIMIT_EXCEEDED,
                                 "max_head_connections_per_peer reached for this peer", 0);
        return false;
    }
    if (!px_limits_head_acquire(w->cfg->max_head_connections)) {
        px_limits_peer_head_release(peer_key);
        px_limits_peer_release(peer_key);
        px_limits_conn_release();
        px_conn_refuse_at_accept(fd, peer_log, PH_REASON_PROXY_OVERLOADED,
                                 "max_head_connections reached", 0);
        return false;
    }
    return true;
}

void px_conn_slots_release(const char *peer_key)
{
    px_limits_head_release();
    px_limits_peer_head_release(peer_key);
    px_limits_peer_release(peer_key);
    px_limits_conn_release();
}

px_conn *px_conn_new(px_worker *w, int fd, const struct sockaddr *peer)
{
    if (w->draining) {
        close(fd);
        return NULL;
    }
    char peer_log[64], peer_key[PX_PEER_KEY_MAX];
    px_conn_peer_identity(fd, peer, peer_log, sizeof peer_log, peer_key);
    if (!px_conn_slots_acquire(w, fd, peer_log, peer_key))
        return NULL;
    /* px_conn_peer_identity's strings fit their 64 bytes: key_off fits a byte. */
    size_t log_len = strlen(peer_log), key_len = strlen(peer_key);
    px_conn *c = calloc(1, sizeof *c + log_len + 1 + key_len + 1);
    if (c == NULL) {
        px_conn_slots_release(peer_key);
        close(fd);
        return NULL;
    }
    c->w = w;
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
    return c;
}
