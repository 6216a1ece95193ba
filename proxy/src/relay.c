/* relay.c - moves bytes both ways between client and upstream.
 *
 * Backpressure: each direction stops reading its source when the sink's
 * output buffer passes buffer_bytes (the high watermark) and resumes when it
 * has drained below half of that, so memory per tunnel is bounded whatever
 * the speed difference of the two peers. Bytes move with evbuffer_add_buffer
 * (chains are relinked, never copied), in order, each exactly once.
 *
 * Half-close: EOF from one side becomes shutdown(SHUT_WR) towards the other
 * once everything read before it has been written; the tunnel ends when both
 * directions ended, on an error, on the idle timeout or the maximum lifetime.
 *
 * splice(2) was considered: bufferevents already avoid copies inside the
 * process, and the benchmark (bench/proxy.sh) measures the relay against a
 * direct connection; see docs/pinhole-proxy.md for the figures.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "proxy-int.h"

struct px_relay {
    struct bufferevent *bev[2]; /* 0 client, 1 upstream */
    bool eof[2];                /* side i sent EOF (its read side ended) */
    bool shut[2];               /* we shut the write side towards i */
    uint64_t *count[2];         /* bytes read from side i */
    struct event *idle, *life;
    time_t last_activity;
    long idle_s;
    size_t high;
    px_relay_done_cb done;
    void *arg;
    bool finished;
};

static time_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static int side_of(const px_relay *r, const struct bufferevent *b)
{
    return r->bev[0] == b ? 0 : 1;
}

static void finish(px_relay *r, const char *why)
{
    if (r->finished)
        return;
    r->finished = true;
    for (int i = 0; i < 2; i++)
        bufferevent_disable(r->bev[i], EV_READ | EV_WRITE);
    evtimer_del(r->idle);
    evtimer_del(r->life);
    r->done(r->arg, why);
}

static void maybe_end(px_relay *r)
{
    if (r->eof[0] && r->eof[1] &&
        evbuffer_get_length(bufferevent_get_output(r->bev[0])) == 0 &&
        evbuffer_get_length(bufferevent_get_output(r->bev[1])) == 0)
        finish(r, "closed");
}

/* Propagates EOF from side `from` once its bytes have all been written. */
static void maybe_shutdown(px_relay *r, int from)
{
    int to = !from;
    if (r->eof[from] && !r->shut[to] &&
        evbuffer_get_length(bufferevent_get_output(r->bev[to])) == 0) {
        r->shut[to] = true;
        shutdown(bufferevent_getfd(r->bev[to]), SHUT_WR);
    }
}

static void pump(px_relay *r, int from)
{
    int to = !from;
    struct evbuffer *in = bufferevent_get_input(r->bev[from]);
    struct evbuffer *out = bufferevent_get_output(r->bev[to]);
    size_t n = evbuffer_get_length(in);
    if (n == 0)
        return;
    *r->count[from] += n;
    r->last_activity = now_s();
    evbuffer_add_buffer(out, in);
    if (evbuffer_get_length(out) >= r->high)
        bufferevent_disable(r->bev[from], EV_READ);
}

static void read_cb(struct bufferevent *b, void *arg)
{
    px_relay *r = arg;
    pump(r, side_of(r, b));
}

static void write_cb(struct bufferevent *b, void *arg)
{
    px_relay *r = arg;
    int to = side_of(r, b), from = !to;
    /* Drained below the low watermark: resume the source unless it ended. */
    if (!r->eof[from] && !r->finished)
        bufferevent_enable(r->bev[from], EV_READ);
    maybe_shutdown(r, from);
    maybe_end(r);
}

static void event_cb(struct bufferevent *b, short what, void *arg)
{
    px_relay *r = arg;
    int from = side_of(r, b);
    if (what & BEV_EVENT_EOF) {
        pump(r, from); /* whatever arrived with the FIN */
        r->eof[from] = true;
        bufferevent_disable(b, EV_READ);
        maybe_shutdown(r, from);
        maybe_end(r);
        return;
    }
    if (what & BEV_EVENT_ERROR)
        finish(r, from == 0 ? "client_error" : "upstream_error");
}

static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_relay *r = arg;
    time_t quiet = now_s() - r->last_activity;
    if (quiet >= r->idle_s) {
        finish(r, "idle_timeout");
        return;
    }
    struct timeval tv = { r->idle_s - quiet, 0 };
    evtimer_add(r->idle, &tv);
}

static void life_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish(arg, "max_lifetime");
}

px_relay *px_relay_start(struct event_base *base, struct bufferevent *client,
                         struct bufferevent *upstream, const px_config *cfg, uint64_t *up,
                         uint64_t *down, px_relay_done_cb done, void *arg)
{
    px_relay *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->bev[0] = client;
    r->bev[1] = upstream;
    r->count[0] = up;
    r->count[1] = down;
    r->high = (size_t)cfg->buffer_bytes;
    r->idle_s = cfg->idle_timeout_s;
    r->done = done;
    r->arg = arg;
    r->last_activity = now_s();
    r->idle = evtimer_new(base, idle_cb, r);
    r->life = evtimer_new(base, life_cb, r);
    if (r->idle == NULL || r->life == NULL) {
        if (r->idle)
            event_free(r->idle);
        if (r->life)
            event_free(r->life);
        free(r);
        return NULL;
    }
    struct timeval idle = { cfg->idle_timeout_s, 0 }, life = { cfg->max_lifetime_s, 0 };
    evtimer_add(r->idle, &idle);
    evtimer_add(r->life, &life);
    for (int i = 0; i < 2; i++) {
        bufferevent_setcb(r->bev[i], read_cb, write_cb, event_cb, r);
        /* Read at most `high` ahead; resume writes below half of it. */
        bufferevent_setwatermark(r->bev[i], EV_READ, 0, r->high);
        bufferevent_setwatermark(r->bev[i], EV_WRITE, r->high / 2, 0);
        bufferevent_set_timeouts(r->bev[i], NULL, NULL);
        /* libevent moves at most 16 KiB per read(2)/write(2) by default;
         * larger steps cut the system calls of a bulk transfer several
         * times (measured with bench_proxy). Never more than the watermark. */
        size_t step = r->high / 2 > 16384 ? r->high / 2 : 16384;
        bufferevent_set_max_single_read(r->bev[i], step);
        bufferevent_set_max_single_write(r->bev[i], step);
        bufferevent_enable(r->bev[i], EV_READ | EV_WRITE);
    }
    /* Bytes the client sent right after its request head (before our 200). */
    pump(r, 0);
    return r;
}

void px_relay_free(px_relay **rp)
{
    px_relay *r = *rp;
    if (r == NULL)
        return;
    for (int i = 0; i < 2; i++)
        bufferevent_free(r->bev[i]);
    event_free(r->idle);
    event_free(r->life);
    free(r);
    *rp = NULL;
}
