/* accept_proxied.c - the PROXY protocol header of a balancer's connection,
 * read before the connection is the client's (accept_proxied.h).
 *
 * The header is read with MSG_PEEK and only its own bytes are then taken
 * from the socket, so the request behind it stays in the socket for the
 * head reader (tunnel.c) exactly as on a listener without balancer: the
 * header never enters the head's buffer and nothing here knows HTTP. A
 * header not complete at accept waits in a px_proxied (the bytes taken so
 * far, a read event, the deadline), in its worker's list so a drain closes
 * it; the bytes peeked while incomplete are all header bytes and are taken
 * at once, so a level-triggered read event never fires twice on the same
 * bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "accept_proxied.h"
#include "config.h"
#include "conn-int.h"
#include "conn.h"
#include "log_json.h"
#include "pinhole/clock.h"
#include "proxy_protocol.h"
#include "sockaddr.h"
#include "worker.h"

/* A balancer's connection whose header is still arriving. Owned by its
 * worker's list (w->proxied); its events have it as their argument and go
 * with it (proxied_free). */
typedef struct px_proxied {
    px_worker *w;
    struct px_proxied *prev, *next;
    int fd;                       /* -1 once handed over or closed */
    int64_t accepted_ns;
    struct event *ev;             /* the socket is readable */
    struct event *timer;          /* the head deadline */
    px_sockaddr source;           /* the balancer */
    char key[PX_PEER_KEY_MAX];    /* the balancer's per-peer key: its slots */
    size_t got;                   /* header bytes taken from the socket */
    uint8_t buf[PH_PP_HEADER_MAX];
} px_proxied;

typedef enum step_result { STEP_DONE, STEP_WAIT, STEP_REFUSED, STEP_CLOSED } step_result;

/* Reads on from buf[0..*got): peeks at what the socket holds, parses, and
 * takes from the socket the header bytes among them (all of them while
 * the header is incomplete, the header's remainder once complete, none on
 * a refusal). */
static step_result step(int fd, uint8_t *buf, size_t *got, ph_pp_header *hdr)
{
    ssize_t r = recv(fd, buf + *got, PH_PP_HEADER_MAX - *got, MSG_PEEK);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return STEP_WAIT;
    if (r <= 0)
        return STEP_CLOSED;
    ph_pp_result st = ph_pp_parse(buf, *got + (size_t)r, hdr);
    if (st == PH_PP_REFUSED)
        return STEP_REFUSED;
    size_t take = st == PH_PP_DONE ? hdr->len - *got : (size_t)r;
    /* The bytes are in the socket (peeked): the read takes them whole. */
    if (recv(fd, buf + *got, take, 0) != (ssize_t)take)
        return STEP_CLOSED;
    *got += take;
    return st == PH_PP_DONE ? STEP_DONE : STEP_WAIT;
}

static bool trusted(const px_config *cfg, const struct sockaddr *sa)
{
    for (int i = 0; i < cfg->proxy_protocol_count; i++)
        if (px_prefix_contains(&cfg->proxy_protocol[i], sa))
            return true;
    return false;
}

/* Refuses the connection on fd (from source, accepted at accepted_ns; 0:
 * now) for reason. */
static void refuse(int fd, const struct sockaddr *source, ph_reason reason, const char *why,
                   int64_t accepted_ns)
{
    char who[PX_ADDR_MAX];
    ph_sockaddr_text(source, who, sizeof who);
    px_conn_refuse_at_accept(fd, who, reason, why, accepted_ns);
}

/* Closes fd (from source) without an answer: its log line says why (end). */
static void closed(int fd, const struct sockaddr *source, const char *end, int64_t accepted_ns)
{
    char who[PX_ADDR_MAX];
    ph_sockaddr_text(source, who, sizeof who);
    px_log_record r = { .peer = who, .end = end,
                        .duration_s = (double)(ph_monotonic_ns() - accepted_ns) / 1e9 };
    px_log_connection(&r);
    close(fd);
}

/* The header is complete: the connection is the client's from here on. */
static void hand_over(px_worker *w, int fd, const struct sockaddr *source, const ph_pp_header *hdr,
                      int64_t accepted_ns)
{
    const struct sockaddr *client =
        hdr->has_client ? (const struct sockaddr *)&hdr->client : source;
    px_conn_accept(w, fd, client, accepted_ns);
}

/* Frees p and releases its slots; closes its socket unless handed over. */
static void proxied_free(px_proxied *p)
{
    px_worker *w = p->w;
    if (p->prev)
        p->prev->next = p->next;
    else
        w->proxied = p->next;
    if (p->next)
        p->next->prev = p->prev;
    if (p->ev)
        event_free(p->ev);
    if (p->timer)
        event_free(p->timer);
    if (p->fd >= 0)
        close(p->fd);
    px_conn_slots_release(p->key);
    free(p);
}

/* Ends p without a header: refused for reason, or (reason ALLOWED) closed
 * and logged with end. */
static void proxied_end(px_proxied *p, ph_reason reason, const char *why, const char *end)
{
    const struct sockaddr *source = (const struct sockaddr *)&p->source.ss;
    if (reason != PH_REASON_ALLOWED) {
        refuse(p->fd, source, reason, why, p->accepted_ns);
    } else {
        closed(p->fd, source, end, p->accepted_ns);
    }
    p->fd = -1;
    proxied_free(p);
}

/* What a step that did not complete the header means for the connection. */
static void not_done(px_proxied *p, step_result st, const ph_pp_header *hdr)
{
    if (st == STEP_REFUSED)
        proxied_end(p, hdr->reason, hdr->message, NULL);
    else if (p->got > 0)
        proxied_end(p, PH_REASON_PROXY_PROTOCOL_MALFORMED,
                    "closed before the PROXY header was complete", NULL);
    else
        proxied_end(p, PH_REASON_ALLOWED, NULL, "client_closed");
}

static void readable_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_proxied *p = arg;
    ph_pp_header hdr;
    step_result st = step(p->fd, p->buf, &p->got, &hdr);
    if (st == STEP_WAIT)
        return;
    if (st != STEP_DONE) {
        not_done(p, st, &hdr);
        return;
    }
    int conn_fd = p->fd;
    px_worker *w = p->w;
    px_sockaddr source = p->source;
    int64_t accepted_ns = p->accepted_ns;
    p->fd = -1;
    proxied_free(p); /* its slots go before px_conn_accept takes the connection's */
    hand_over(w, conn_fd, (const struct sockaddr *)&source.ss, &hdr, accepted_ns);
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    proxied_end(arg, PH_REASON_HTTP_HEAD_TIMEOUT,
                "PROXY header not complete within header_timeout_ms", NULL);
}

/* The header is not all there yet: wait for it on the loop. Until the
 * header names the client, the connection is the balancer's own and holds
 * the slots any connection of the balancer's would (px_conn_slots_acquire:
 * the overall caps and the balancer's per-peer ones): a balancer that sends
 * the header only with the client's first bytes (AWS NLB's default) hands
 * over a silent client's connection with nothing in it, and such
 * connections must not take every head slot from the other clients. */
static void wait_for_header(px_worker *w, int fd, const struct sockaddr *source,
                            const uint8_t *buf, size_t got, int64_t accepted_ns)
{
    char who[64], key[PX_PEER_KEY_MAX];
    px_conn_peer_identity(fd, source, who, sizeof who, key);
    if (!px_conn_slots_acquire(w, fd, who, key))
        return;
    px_proxied *p = calloc(1, sizeof *p);
    if (p == NULL) {
        px_conn_slots_release(key);
        close(fd);
        return;
    }
    p->w = w;
    memcpy(p->key, key, sizeof key);
    p->fd = fd;
    p->accepted_ns = accepted_ns;
    p->source.len = source->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                  : sizeof(struct sockaddr_in);
    memcpy(&p->source.ss, source, p->source.len);
    memcpy(p->buf, buf, got);
    p->got = got;
    p->next = w->proxied;
    if (w->proxied)
        w->proxied->prev = p;
    w->proxied = p;
    long ms = w->cfg->header_timeout_ms;
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    p->ev = event_new(w->base, fd, EV_READ | EV_PERSIST, readable_cb, p);
    p->timer = evtimer_new(w->base, deadline_cb, p);
    if (p->ev == NULL || p->timer == NULL || event_add(p->ev, NULL) != 0 ||
        evtimer_add(p->timer, &tv) != 0)
        proxied_end(p, PH_REASON_PROXY_OVERLOADED, "out of memory", NULL);
}

void px_proxied_accept(px_worker *w, int fd, const struct sockaddr *peer)
{
    if (!trusted(w->cfg, peer)) {
        /* Only a whole signature is refused: a client trickling "P" may be
         * sending a POST. A signature trickled in pieces reaches the head
         * parser, which refuses its bytes as no request. */
        uint8_t first[PH_PP_SIG_LEN];
        ssize_t r = recv(fd, first, sizeof first, MSG_PEEK);
        if (r > 0 && ph_pp_signature(first, (size_t)r)) {
            refuse(fd, peer, PH_REASON_PROXY_PROTOCOL_UNTRUSTED,
                   "a PROXY header from a source not in proxy_protocol", 0);
            return;
        }
        px_conn_accept(w, fd, peer, 0);
        return;
    }
    if (w->draining) {
        close(fd);
        return;
    }
    int64_t accepted_ns = ph_monotonic_ns();
    uint8_t buf[PH_PP_HEADER_MAX];
    size_t got = 0;
    ph_pp_header hdr;
    step_result st = step(fd, buf, &got, &hdr);
    if (st == STEP_DONE) {
        hand_over(w, fd, peer, &hdr, accepted_ns);
    } else if (st == STEP_WAIT) {
        wait_for_header(w, fd, peer, buf, got, accepted_ns);
    } else if (st == STEP_REFUSED) {
        refuse(fd, peer, hdr.reason, hdr.message, accepted_ns);
    } else if (got > 0) {
        refuse(fd, peer, PH_REASON_PROXY_PROTOCOL_MALFORMED,
               "closed before the PROXY header was complete", accepted_ns);
    } else {
        closed(fd, peer, "client_closed", accepted_ns);
    }
}

void px_proxied_close_all(px_worker *w)
{
    while (w->proxied)
        proxied_end(w->proxied, PH_REASON_ALLOWED, NULL, "shutdown");
}
