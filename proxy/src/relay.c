/* relay.c - moves bytes both ways between client and upstream.
 *
 * The relay takes the two sockets out of their bufferevents and drives them
 * with plain events and one evbuffer per direction: a readable socket is
 * read and what was read is written to the other socket at once, in the
 * same callback. A small transaction then costs one read(2) and one write(2)
 * per hop, with no event-loop round trip and no epoll_ctl in between; a
 * write event is armed only while the sink is not taking bytes (measured
 * with bench_proxy against the bufferevent relay it replaced, see
 * docs/pinhole-proxy.md).
 *
 * Backpressure: a direction stops reading its source while its buffer holds
 * buffer_bytes (the reads never go past it) and resumes as soon as the sink
 * took bytes, so memory per tunnel is bounded whatever the speed difference
 * of the two peers. Bytes move in order, each exactly once.
 *
 * Bulk: once a direction has moved SPLICE_AFTER_BYTES, it switches to a pipe
 * and splice(2) (socket -> pipe -> socket, the bytes never enter the
 * process); bytes already buffered go out first, the pipe counts against the
 * same cap, and a direction that cannot get a pipe (no descriptors, or none
 * to spare beside the connections' reserve: px_limits_pipe_acquire) stays
 * on the buffer path. Small transactions never create pipes, so idle tunnels
 * and the descriptor budget are unaffected.
 *
 * Half-close: EOF from one side becomes shutdown(SHUT_WR) towards the other
 * once everything read before it has been written; the tunnel ends when both
 * directions ended, on an error, on the idle timeout or at the end of its
 * life (the caller's: the earliest of max_lifetime_s and the grant's expiry),
 * or when the caller stops it (its grant or destination was revoked).
 *
 * Callbacks: every event's argument is the relay (or one of its sides);
 * done runs at most once, and once it ran the relay may be freed, so every
 * path that can call finish() returns without touching r afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "pinhole/clock.h"
#include "proxy-int.h"

/* Bytes per read(2): larger steps cut the system calls of a bulk transfer
 * (libevent's own default is 16 KiB); never more than the buffer cap. */
#define MIN_STEP 16384

/* A direction switches to splice(2) after this many bytes (a transaction's
 * few bytes never create pipes; a bulk transfer soon does). */
#define SPLICE_AFTER_BYTES (256 * 1024)

typedef struct relay_side {
    struct px_relay *r;
    int i;
} relay_side;

struct px_relay {
    relay_side side[2];         /* the events' argument */
    int fd[2];                  /* 0 client, 1 upstream; owned */
    struct evbuffer *buf[2];    /* bytes read from side i, not yet written to !i */
    int pipe[2][2];             /* splice(2) pipe of direction i, {-1,-1} until used */
    size_t piped[2];            /* bytes in that pipe (they follow buf[i]'s) */
    size_t pipe_cap[2];
    struct event *rd[2], *wr[2];
    bool eof[2];                /* side i sent EOF (its read side ended) */
    bool shut[2];               /* we shut the write side towards i */
    uint64_t *count[2];         /* bytes read from side i */
    struct event *idle, *life;
    const char *life_end;       /* the end reason when life fires */
    time_t last_activity;
    long idle_s;
    size_t high, step;
    px_relay_done_cb done;
    void *arg;
    bool finished;
};

static time_t now_s(void)
{
    return (time_t)(ph_monotonic_ms() / 1000);
}

static const char *side_error(int side)
{
    return side == 0 ? "client_error" : "upstream_error";
}

static bool again(void)
{
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

/* Bytes direction `from` holds: read from its source, not yet written. */
static size_t held(const px_relay *r, int from)
{
    return evbuffer_get_length(r->buf[from]) + r->piped[from];
}

static void finish(px_relay *r, const char *why)
{
    if (r->finished)
        return;
    r->finished = true;
    for (int i = 0; i < 2; i++) {
        event_del(r->rd[i]);
        event_del(r->wr[i]);
    }
    evtimer_del(r->idle);
    evtimer_del(r->life);
    r->done(r->arg, why);
}

/* A direction moves through a pipe with splice(2) (the bytes never enter
 * the process) once it proved a bulk transfer; small transactions never pay
 * for the pipe. Without descriptors it simply stays on the buffer path. */
static bool use_splice(px_relay *r, int from)
{
#ifdef __linux__
    if (r->pipe[from][0] >= 0)
        return true;
    if (*r->count[from] < SPLICE_AFTER_BYTES || !px_limits_pipe_acquire())
        return false;
    if (pipe2(r->pipe[from], O_NONBLOCK | O_CLOEXEC) != 0) {
        r->pipe[from][0] = r->pipe[from][1] = -1;
        px_limits_pipe_release();
        return false;
    }
    /* The pipe is part of the per-direction cap, never beyond it. */
    (void)fcntl(r->pipe[from][1], F_SETPIPE_SZ, (int)r->high);
    int cap = fcntl(r->pipe[from][1], F_GETPIPE_SZ);
    r->pipe_cap[from] = cap > 0 ? (size_t)cap : 65536;
    return true;
#else
    (void)r, (void)from;
    return false;
#endif
}

/* Writes what direction `from` holds to the other side (buffered bytes
 * first, then piped ones), then arms exactly the events still needed.
 * Returns false when the relay ended: done ran and r may be freed, so the
 * caller must not touch it. */
static bool flush(px_relay *r, int from)
{
    int to = !from;
    struct evbuffer *b = r->buf[from];
    if (evbuffer_get_length(b) > 0 && evbuffer_write(b, r->fd[to]) < 0 && !again()) {
        finish(r, side_error(to));
        return false;
    }
#ifdef __linux__
    while (evbuffer_get_length(b) == 0 && r->piped[from] > 0) {
        ssize_t n = splice(r->pipe[from][0], NULL, r->fd[to], NULL, r->piped[from],
                           SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n < 0 && again())
            break;
        if (n <= 0) {
            finish(r, side_error(to));
            return false;
        }
        r->piped[from] -= (size_t)n;
    }
#endif
    size_t left = held(r, from);
    if (left > 0) {
        if (!event_pending(r->wr[to], EV_WRITE, NULL))
            event_add(r->wr[to], NULL);
        if (left >= r->high)
            event_del(r->rd[from]);
        else if (!r->eof[from] && !event_pending(r->rd[from], EV_READ, NULL))
            event_add(r->rd[from], NULL);
        return true;
    }
    if (event_pending(r->wr[to], EV_WRITE, NULL))
        event_del(r->wr[to]);
    if (r->eof[from]) {
        /* Both ways ended and drained: close(2) sends the last FIN. */
        if (r->eof[to] && held(r, to) == 0) {
            finish(r, "closed");
            return false;
        }
        if (!r->shut[to]) {
            r->shut[to] = true;
            shutdown(r->fd[to], SHUT_WR);
        }
    } else if (!event_pending(r->rd[from], EV_READ, NULL)) {
        event_add(r->rd[from], NULL);
    }
    return true;
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    relay_side *s = arg;
    px_relay *r = s->r;
    int from = s->i;
    size_t have = held(r, from);
    size_t room = have < r->high ? r->high - have : 0;
    if (room > r->step)
        room = r->step;
    ssize_t n;
    if (use_splice(r, from)) {
#ifdef __linux__
        size_t pipe_room = r->pipe_cap[from] - r->piped[from];
        if (room > pipe_room)
            room = pipe_room;
        if (room == 0) {
            event_del(r->rd[from]);
            return;
        }
        n = splice(fd, NULL, r->pipe[from][1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0)
            r->piped[from] += (size_t)n;
#else
        n = -1;
#endif
    } else {
        if (room == 0) {
            event_del(r->rd[from]);
            return;
        }
        n = evbuffer_read(r->buf[from], fd, (int)room);
    }
    if (n < 0) {
        if (again())
            return;
        finish(r, side_error(from));
        return;
    }
    if (n == 0) {
        r->eof[from] = true;
        event_del(r->rd[from]);
    } else {
        *r->count[from] += (uint64_t)n;
        r->last_activity = now_s();
    }
    (void)flush(r, from);
}

static void write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    relay_side *s = arg;
    (void)flush(s->r, !s->i); /* side i can take bytes: the direction towards it */
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
    px_relay *r = arg;
    finish(r, r->life_end);
}

/* Takes the socket out of a bufferevent and frees it (the socket stays
 * open); what it had read moves to *in. */
static void take_socket(struct bufferevent *b, struct evbuffer *in)
{
    evbuffer_add_buffer(in, bufferevent_get_input(b));
    bufferevent_disable(b, EV_READ | EV_WRITE);
    bufferevent_setfd(b, -1);
    bufferevent_free(b);
}

static void relay_release(px_relay *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->pipe[i][0] >= 0)
            px_limits_pipe_release();
        for (int k = 0; k < 2; k++)
            if (r->pipe[i][k] >= 0)
                close(r->pipe[i][k]);
        if (r->rd[i])
            event_free(r->rd[i]);
        if (r->wr[i])
            event_free(r->wr[i]);
        if (r->buf[i])
            evbuffer_free(r->buf[i]);
    }
    if (r->idle)
        event_free(r->idle);
    if (r->life)
        event_free(r->life);
    free(r);
}

px_relay *px_relay_start(struct event_base *base, struct bufferevent *client,
                         struct bufferevent *upstream, const char *greeting, size_t greeting_len,
                         const px_config *cfg, long life_s, const char *life_end,
                         uint64_t *up, uint64_t *down, px_relay_done_cb done, void *arg)
{
    px_relay *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->count[0] = up;
    r->count[1] = down;
    r->high = (size_t)cfg->buffer_bytes;
    r->step = r->high / 2 > MIN_STEP ? r->high / 2 : MIN_STEP;
    if (r->step > r->high)
        r->step = r->high;
    r->idle_s = cfg->idle_timeout_s;
    r->life_end = life_end;
    r->done = done;
    r->arg = arg;
    r->last_activity = now_s();
    bool ok = true;
    for (int i = 0; i < 2; i++) {
        r->side[i] = (relay_side){ r, i };
        r->pipe[i][0] = r->pipe[i][1] = -1;
        ok = ok && (r->buf[i] = evbuffer_new()) != NULL;
    }
    r->idle = evtimer_new(base, idle_cb, r);
    r->life = evtimer_new(base, life_cb, r);
    /* The client socket must stay with its bufferevent until everything is
     * allocated: on failure the caller still owns (and frees) both. An
     * empty greeting is not added: evbuffer_add allocates a chain even for
     * no bytes (1 KiB per idle tunnel, measured). */
    ok = ok && r->idle && r->life &&
         (greeting_len == 0 || evbuffer_add(r->buf[1], greeting, greeting_len) == 0);
    int fd[2] = { bufferevent_getfd(client), bufferevent_getfd(upstream) };
    for (int i = 0; ok && i < 2; i++) {
        r->fd[i] = fd[i];
        ok = (r->rd[i] = event_new(base, fd[i], EV_READ | EV_PERSIST, read_cb, &r->side[i])) &&
             (r->wr[i] = event_new(base, fd[i], EV_WRITE | EV_PERSIST, write_cb, &r->side[i]));
    }
    if (!ok) {
        relay_release(r);
        return NULL;
    }
    /* Bytes the client sent right after its request head (before our 200)
     * are the tunnel's first upstream bytes. */
    size_t early = evbuffer_get_length(bufferevent_get_input(client));
    take_socket(client, r->buf[0]);
    take_socket(upstream, r->buf[1]);
    *r->count[0] += early;
    struct timeval idle = { cfg->idle_timeout_s, 0 }, life = { life_s > 0 ? life_s : 0, 0 };
    evtimer_add(r->idle, &idle);
    evtimer_add(r->life, &life);
    return r;
}

void px_relay_run(px_relay *r)
{
    /* What is left of the greeting (queued first in the downstream buffer)
     * goes out now, without waiting for the loop; then the early bytes. */
    if (flush(r, 1))
        (void)flush(r, 0);
}

void px_relay_stop(px_relay *r, const char *why)
{
    finish(r, why);
}

void px_relay_free(px_relay **rp)
{
    px_relay *r = *rp;
    if (r == NULL)
        return;
    for (int i = 0; i < 2; i++)
        close(r->fd[i]);
    relay_release(r);
    *rp = NULL;
}
