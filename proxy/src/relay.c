/* relay.c - moves bytes both ways between client and upstream.
 *
 * The relay drives the two sockets with plain events and one evbuffer per
 * direction: a readable socket is read (recv(2) into a per-thread scratch
 * buffer, no FIONREAD probe as evbuffer_read makes) and what was read is
 * sent to the other socket at once, in the same callback; only what the
 * sink does not take is buffered. A small transaction then costs one
 * recv(2) and one send(2) per hop, with no event-loop round trip and no
 * epoll_ctl in between, and an idle tunnel holds no buffer memory; a write
 * event is armed only while the sink is not taking bytes (measured with
 * bench_proxy, see docs/pinhole-proxy.md).
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
 * and the descriptor budget are unaffected. A direction past that mark whose
 * reads turn small again (an interactive session after a download: a
 * splice read of less than SPLICE_SMALL) goes back to recv(2) and send(2)
 * once its pipe is empty (two splices and a pipe per small message cost more
 * than one copy), and to the pipe when a read fills its step again.
 *
 * Half-close: EOF from one side becomes shutdown(SHUT_WR) towards the other
 * once everything read before it has been written; the tunnel ends when both
 * directions ended, on an error, on the idle timeout or at the end of its
 * life (the caller's: the earliest of max_lifetime_s and the grant's expiry),
 * or when the caller stops it (its grant or destination was revoked).
 *
 * Hold (px_relay_hold): the client's first bytes may be held for a gate
 * (a tunnel's inspection): they are read without being sent, up to the
 * hold's cap and deadline, and the gate sees them all at each read; the
 * upstream's bytes meanwhile flow as usual (a server-speaks-first protocol
 * is not stalled). The usual first flight (a ClientHello) comes in one
 * read: the gate sees it where it was read, and PASS sends it on from
 * there, in the same pass, as an uninspected tunnel's bytes (no buffer, no
 * copy: measured with bench_proxy --counts-only). Only a first flight that
 * needs more reads (split records, a slow drip) is held in the upstream
 * buffer, the gate seeing all of it at each read. PASS flushes what was
 * held and relays as usual; END sends the gate's reply to the client and
 * ends the tunnel with nothing of the client's relayed. PASS_SOME lets
 * the first bytes go (a ClientHello, from where it was read when it came
 * in one read) and holds the rest; from then on the gate also sees the
 * upstream's bytes (the server's answer to the hello) and is asked again
 * about the client's after each read of them. The hold's deadline is the
 * relay's one timer's (no timer of its own; a PASS_SOME moves it later,
 * and the timer, armed for the earlier one, re-arms itself then).
 *
 * Callbacks: every event's argument is the relay (a socket's event tells
 * its side by its descriptor); the events live inside the relay's own
 * allocation (set up with event_assign, deleted before it is freed); done
 * runs at most once, and once it ran the relay may be freed, so every path
 * that can call finish() returns without touching r afterwards.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "config.h"
#include "event_slot.h"
#include "pinhole/clock.h"
#include "proxy_limits.h"
#include "relay.h"

/* Bytes per read(2): larger steps cut the system calls of a bulk transfer
 * (libevent's own default is 16 KiB); never more than the buffer cap. */
#define MIN_STEP 16384

/* A direction switches to splice(2) after this many bytes (a transaction's
 * few bytes never create pipes; a bulk transfer soon does). */
#define SPLICE_AFTER_BYTES (256 * 1024)
/* A splice read smaller than this sends the direction back to recv(2). */
#define SPLICE_SMALL 4096

/* One read's bytes on their way through, per worker thread: reads larger
 * than this are a bulk transfer, which soon moves to splice(2). */
#define SCRATCH_BYTES 65536
static _Thread_local unsigned char scratch[SCRATCH_BYTES];

struct px_relay {
    int fd[2];                  /* 0 client, 1 upstream; owned */
    struct evbuffer *buf[2];    /* bytes read from side i, not yet written to !i;
                                 * NULL while there are none (an idle tunnel) */
    int pipe[2][2];             /* splice(2) pipe of direction i, {-1,-1} until used */
    size_t piped[2];            /* bytes in that pipe (they follow buf[i]'s) */
    size_t pipe_cap[2];
    bool copying[2];            /* direction i left its pipe for small reads */
    struct event_base *base;
    struct event *ev[2];        /* one per socket, for what watching[i] says (in ev_store) */
    short watching[2];          /* EV_READ / EV_WRITE wanted on side i's socket */
    bool eof[2];                /* side i sent EOF (its read side ended) */
    bool shut[2];               /* we shut the write side towards i */
    uint64_t *count[2];         /* bytes read from side i */
    struct event *timer;        /* the idle timeout and the end of life, whichever is next
                                 * (in ev_store) */
    int64_t life_at;            /* when life ends (ph_monotonic_ms) */
    const char *life_end;       /* the end reason then */
    int64_t last_activity;      /* ms: the last byte read */
    int64_t idle_ms;
    size_t high, step;
    px_relay_done_cb done;
    void *arg;
    bool finished;
    /* The hold: while gate is set the client's bytes wait in buf[0]. */
    px_relay_gate_cb gate;
    px_relay_handoff_cb handoff;
    void *gate_arg;
    size_t hold_cap;
    int64_t hold_at;            /* the hold's deadline (ph_monotonic_ms) */
    long hold_ms;
    size_t hold_out;            /* bytes at buf[0]'s front a PASS_SOME let go, not yet
                                 * written (the gate sees those after them) */
    bool hold_peek;             /* after a PASS_SOME: the gate sees the upstream's bytes */
    /* ev[0], ev[1] and timer, PX_EVENT_SLOT bytes each: one allocation per
     * tunnel instead of four (an idle tunnel is mostly its events). */
    max_align_t ev_store[];
};


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
    return (r->buf[from] ? evbuffer_get_length(r->buf[from]) : 0) + r->piped[from];
}

/* Direction from's buffer, made when first needed; NULL: out of memory. */
static struct evbuffer *buffer(px_relay *r, int from)
{
    if (r->buf[from] == NULL)
        r->buf[from] = evbuffer_new();
    return r->buf[from];
}

static void finish(px_relay *r, const char *why)
{
    if (r->finished)
        return;
    r->finished = true;
    for (int i = 0; i < 2; i++)
        event_del(r->ev[i]);
    evtimer_del(r->timer);
    r->done(r->arg, why);
}

static void io_cb(evutil_socket_t fd, short what, void *arg);

/* Starts or stops watching side i's socket for `bit` (EV_READ, EV_WRITE):
 * one event per socket, its flags changed in place (the epoll changelist
 * folds the delete and the add into one change). */
static void watch(px_relay *r, int i, short bit, bool on)
{
    short f = (short)(on ? (r->watching[i] | bit) : (r->watching[i] & ~bit));
    if (f == r->watching[i])
        return;
    r->watching[i] = f;
    event_del(r->ev[i]);
    if (f == 0)
        return;
    event_assign(r->ev[i], r->base, r->fd[i], (short)(f | EV_PERSIST), io_cb, r);
    event_add(r->ev[i], NULL);
}

static bool watched(const px_relay *r, int i, short bit)
{
    return (r->watching[i] & bit) != 0;
}

/* A direction moves through a pipe with splice(2) (the bytes never enter
 * the process) once it proved a bulk transfer; small transactions never pay
 * for the pipe. Without descriptors it simply stays on the buffer path. */
static bool use_splice(px_relay *r, int from)
{
#ifdef __linux__
    if (r->pipe[from][0] >= 0)
        return !r->copying[from] || r->piped[from] > 0;
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
    if (from == 0 && r->gate != NULL) {
        /* Held: read on (up to the cap: read_side) until the gate decides;
         * what a PASS_SOME let go is written meanwhile. */
        int w = r->hold_out > 0 ? evbuffer_write_atmost(b, r->fd[to], (ev_ssize_t)r->hold_out)
                                : 0;
        if (w < 0 && !again()) {
            finish(r, side_error(to));
            return false;
        }
        r->hold_out -= w > 0 ? (size_t)w : 0;
        watch(r, to, EV_WRITE, r->hold_out > 0);
        watch(r, 0, EV_READ, !r->eof[0]);
        return true;
    }
    if (b != NULL && evbuffer_get_length(b) > 0 && evbuffer_write(b, r->fd[to]) < 0 &&
        !again()) {
        finish(r, side_error(to));
        return false;
    }
    if (b != NULL && evbuffer_get_length(b) == 0) {
        /* Drained: an idle tunnel keeps no buffer. */
        evbuffer_free(b);
        r->buf[from] = b = NULL;
    }
#ifdef __linux__
    while (b == NULL && r->piped[from] > 0) {
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
        watch(r, to, EV_WRITE, true);
        if (left >= r->high)
            watch(r, from, EV_READ, false);
        else if (!r->eof[from])
            watch(r, from, EV_READ, true);
        return true;
    }
    watch(r, to, EV_WRITE, false);
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
    } else {
        watch(r, from, EV_READ, true);
    }
    return true;
}

/* Passes n bytes read from side `from` on to the other side: sent at once
 * when nothing of that direction is waiting before them, the rest (what
 * the socket did not take) buffered in order. Returns false when the relay
 * ended (done ran: the caller must not touch r). */
static bool pass_on(px_relay *r, int from, const unsigned char *p, size_t n)
{
    int to = !from;
    size_t sent = 0;
    if (held(r, from) == 0) {
        ssize_t w = send(r->fd[to], p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && !again()) {
            finish(r, side_error(to));
            return false;
        }
        sent = w > 0 ? (size_t)w : 0;
    }
    struct evbuffer *b = sent < n ? buffer(r, from) : NULL;
    if (sent < n && (b == NULL || evbuffer_add(b, p + sent, n - sent) != 0)) {
        finish(r, "out_of_memory");
        return false;
    }
    return true;
}

static bool gate_ask(px_relay *r, px_gate_ask why, const uint8_t *fresh, size_t fresh_len);

/* Holds n client bytes behind those held already. The hold's buffer, made
 * here when first needed, has room for the whole hold in one chain: each
 * read lands after the last and the gate's view of them all
 * (evbuffer_pullup) copies nothing, so a client trickling a byte at a time
 * costs no more than one sending at once (out of memory for that room, the
 * reads still work, with copies). Returns false when the relay ended (out
 * of memory: done ran, the caller must not touch r). */
static bool hold_bytes(px_relay *r, const uint8_t *p, size_t n)
{
    struct evbuffer *b = r->buf[0];
    if (b == NULL && (b = buffer(r, 0)) != NULL)
        (void)evbuffer_expand(b, r->hold_cap);
    if (b == NULL || evbuffer_add(b, p, n) != 0) {
        finish(r, "out_of_memory");
        return false;
    }
    return true;
}

/* The client's socket is readable while its bytes are held: the gate sees
 * them with the held ones (with none held, where they were read). */
static void read_held(px_relay *r)
{
    size_t have = held(r, 0) - r->hold_out;
    size_t room = r->hold_cap > have ? r->hold_cap - have : 0;
    if (room > sizeof scratch)
        room = sizeof scratch;
    ssize_t n = room > 0 ? recv(r->fd[0], scratch, room, 0) : 0;
    if (n < 0) {
        if (!again())
            finish(r, side_error(0));
        return;
    }
    if (n == 0) {
        if (room > 0) {
            r->eof[0] = true;
            watch(r, 0, EV_READ, false);
        }
        (void)gate_ask(r, room > 0 ? PX_GATE_EOF : PX_GATE_FULL, NULL, 0);
        return;
    }
    *r->count[0] += (uint64_t)n;
    r->last_activity = ph_monotonic_ms();
    px_gate_ask why = have + (size_t)n >= r->hold_cap ? PX_GATE_FULL : PX_GATE_BYTES;
    if (held(r, 0) == 0) {
        (void)gate_ask(r, why, scratch, (size_t)n);
        return;
    }
    if (hold_bytes(r, scratch, (size_t)n))
        (void)gate_ask(r, why, NULL, 0);
}

/* Side `from`'s socket is readable. */
static void read_side(px_relay *r, int from)
{
    if (from == 0 && r->gate != NULL) {
        read_held(r);
        return;
    }
    int fd = r->fd[from];
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
            watch(r, from, EV_READ, false);
            return;
        }
        n = splice(fd, NULL, r->pipe[from][1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (n > 0)
            r->piped[from] += (size_t)n;
        /* Small reads: back to recv(2) once the pipe is empty (flush). */
        r->copying[from] = n > 0 && (size_t)n < SPLICE_SMALL;
#else
        n = -1;
#endif
    } else {
        if (room == 0) {
            watch(r, from, EV_READ, false);
            return;
        }
        if (room > sizeof scratch)
            room = sizeof scratch;
        n = recv(fd, scratch, room, 0);
        /* A read that filled its step is bulk again: the pipe next time. */
        if (n > 0 && (size_t)n == room)
            r->copying[from] = false;
        if (n > 0 && !pass_on(r, from, scratch, (size_t)n))
            return;
        if (n > 0 && from == 1 && r->hold_peek && r->gate != NULL) {
            /* The server's answer to what a PASS_SOME let go: the gate
             * looks at it, then decides on the client's bytes again. */
            const char *end = NULL;
            const uint8_t *reply = NULL;
            size_t reply_len = 0;
            (void)r->gate(r->gate_arg, scratch, (size_t)n, PX_GATE_UPSTREAM, &end, &reply,
                          &reply_len);
            *r->count[1] += (uint64_t)n;
            r->last_activity = ph_monotonic_ms();
            if (gate_ask(r, PX_GATE_BYTES, NULL, 0))
                (void)flush(r, 1);
            return;
        }
    }
    if (n < 0) {
        if (again())
            return;
        finish(r, side_error(from));
        return;
    }
    if (n == 0) {
        r->eof[from] = true;
        watch(r, from, EV_READ, false);
    } else {
        *r->count[from] += (uint64_t)n;
        r->last_activity = ph_monotonic_ms();
    }
    (void)flush(r, from);
}

static void io_cb(evutil_socket_t fd, short what, void *arg)
{
    px_relay *r = arg;
    int i = fd == r->fd[1]; /* the event watches r->fd[i] (watch) */
    /* Side i can take bytes: the direction towards it first (it may end
     * the relay, and then r is not touched again). */
    if ((what & EV_WRITE) && !flush(r, !i))
        return;
    if ((what & EV_READ) && watched(r, i, EV_READ))
        read_side(r, i);
}

/* One timer for both deadlines (an event less per tunnel): the end of life
 * first, then the idle timeout; otherwise re-armed for the nearer one. In
 * milliseconds: whole seconds would count a pause of just over half a
 * second across a second boundary as a quiet second. */
static void arm_timer(px_relay *r, int64_t now);

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_relay *r = arg;
    int64_t now = ph_monotonic_ms(), quiet = now - r->last_activity;
    if (now >= r->life_at) {
        finish(r, r->life_end);
        return;
    }
    if (r->gate != NULL && now >= r->hold_at) {
        (void)gate_ask(r, PX_GATE_DEADLINE, NULL, 0);
        return;
    }
    if (quiet >= r->idle_ms) {
        finish(r, "idle_timeout");
        return;
    }
    arm_timer(r, now);
}

/* The timer for the nearest of the idle timeout, the end of life and the
 * hold's deadline. */
static void arm_timer(px_relay *r, int64_t now)
{
    int64_t next = r->idle_ms - (now - r->last_activity);
    if (r->life_at - now < next)
        next = r->life_at - now;
    if (r->gate != NULL && r->hold_at - now < next)
        next = r->hold_at - now;
    if (next < 0)
        next = 0;
    struct timeval tv = { (time_t)(next / 1000), (suseconds_t)(next % 1000 * 1000) };
    evtimer_add(r->timer, &tv);
}

/* Asks the gate about the client's bytes: those held (after what a
 * PASS_SOME let go), or (fresh != NULL, nothing held) fresh[0..fresh_len),
 * just read, which PASS (PASS_SOME: its part) sends on from where they are
 * and WAIT holds; a last ask (EOF, full, deadline) that gets WAIT ends the
 * tunnel as END would. Returns false when the relay ended (done ran: the
 * caller must not touch r). */
static bool gate_ask(px_relay *r, px_gate_ask why, const uint8_t *fresh, size_t fresh_len)
{
    const char *end = "closed";
    const uint8_t *reply = NULL;
    size_t reply_len = 0;
    size_t len = fresh != NULL ? fresh_len : held(r, 0) - r->hold_out;
    const uint8_t *p = fresh != NULL ? fresh
                       : len > 0     ? evbuffer_pullup(r->buf[0], -1)
                                     : (const uint8_t *)"";
    if (p == NULL) {
        finish(r, "out_of_memory");
        return false;
    }
    if (fresh == NULL && len > 0)
        p += r->hold_out;
    px_gate_verdict v = r->gate(r->gate_arg, p, len, why, &end, &reply, &reply_len);
    if (v == PX_GATE_PASS) {
        r->gate = NULL;
        r->hold_out = 0;
        if (fresh != NULL && !pass_on(r, 0, fresh, fresh_len))
            return false;
        return flush(r, 0);
    }
    if (v == PX_GATE_PASS_SOME && reply_len <= len) {
        /* Those bytes go (fresh: from where they were read, what the socket
         * does not take buffered as PASS would), the rest stays held; the
         * upstream's answer to them is the gate's to see. */
        if (fresh != NULL) {
            if (!pass_on(r, 0, fresh, reply_len))
                return false;
            r->hold_out = held(r, 0);
            if (reply_len < fresh_len && !hold_bytes(r, fresh + reply_len, fresh_len - reply_len))
                return false;
        } else {
            r->hold_out += reply_len;
        }
        r->hold_peek = true;
        r->hold_at = r->last_activity + r->hold_ms;
        return flush(r, 0);
    }
    /* Fresh bytes are held from here on (WAIT), or go with the handoff. */
    if (fresh != NULL && ((v == PX_GATE_WAIT && why == PX_GATE_BYTES) || v == PX_GATE_HANDOFF) &&
        !hold_bytes(r, fresh, fresh_len))
        return false;
    if (v == PX_GATE_WAIT && why == PX_GATE_BYTES) {
        watch(r, 0, EV_READ, !r->eof[0]);
        return true;
    }
    /* HANDOFF: nothing of the client's went upstream; the sockets and the
     * bytes in flight become the caller's (a pipe towards the client, only
     * made after SPLICE_AFTER_BYTES from the upstream, cannot be handed
     * over: the tunnel ends instead). */
    struct evbuffer *in = buffer(r, 0), *out = buffer(r, 1);
    if (v == PX_GATE_HANDOFF && r->handoff != NULL && r->piped[1] == 0 && in != NULL &&
        out != NULL) {
        r->finished = true;
        for (int i = 0; i < 2; i++)
            event_del(r->ev[i]);
        evtimer_del(r->timer);
        int cfd = r->fd[0], ufd = r->fd[1];
        r->fd[0] = r->fd[1] = -1;
        r->buf[0] = r->buf[1] = NULL;
        r->handoff(r->gate_arg, cfd, ufd, in, out); /* may free r */
        return false;
    }
    if (v == PX_GATE_HANDOFF)
        end = "protocol_not_allowed";
    /* END: what the upstream sent the client so far (the 200 first) goes
     * if the socket takes it now, then the reply; nothing of the client's
     * is relayed. */
    if (r->buf[1] != NULL && evbuffer_get_length(r->buf[1]) > 0)
        (void)evbuffer_write(r->buf[1], r->fd[0]);
    if (reply_len > 0 && (r->buf[1] == NULL || evbuffer_get_length(r->buf[1]) == 0))
        (void)send(r->fd[0], reply, reply_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    finish(r, end);
    return false;
}

static void relay_release(px_relay *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->pipe[i][0] >= 0)
            px_limits_pipe_release();
        for (int k = 0; k < 2; k++)
            if (r->pipe[i][k] >= 0)
                close(r->pipe[i][k]);
        if (r->buf[i])
            evbuffer_free(r->buf[i]);
    }
    struct event *ev[3] = { r->ev[0], r->ev[1], r->timer };
    for (int k = 0; k < 3; k++) {
        event_del(ev[k]);
        event_debug_unassign(ev[k]);
    }
    free(r);
}

px_relay *px_relay_start(struct event_base *base, int client_fd, int upstream_fd,
                         const void *early, size_t early_len, const char *greeting,
                         size_t greeting_len, const px_config *cfg, long life_s,
                         const char *life_end, uint64_t *up, uint64_t *down,
                         px_relay_done_cb done, void *arg)
{
    px_relay *r = calloc(1, sizeof *r + 3 * PX_EVENT_SLOT);
    if (r == NULL)
        return NULL;
    unsigned char *slot = (unsigned char *)r->ev_store;
    r->ev[0] = (struct event *)slot;
    r->ev[1] = (struct event *)(slot + PX_EVENT_SLOT);
    r->timer = (struct event *)(slot + 2 * PX_EVENT_SLOT);
    /* The sockets' events are assigned (and added) by watch(); nothing is
     * watched yet. */
    for (int i = 0; i < 2; i++)
        event_assign(r->ev[i], base, -1, 0, io_cb, r);
    evtimer_assign(r->timer, base, timer_cb, r);
    r->count[0] = up;
    r->count[1] = down;
    r->high = (size_t)cfg->buffer_bytes;
    r->step = r->high / 2 > MIN_STEP ? r->high / 2 : MIN_STEP;
    if (r->step > r->high)
        r->step = r->high;
    r->idle_ms = (int64_t)cfg->idle_timeout_s * 1000;
    r->life_end = life_end;
    r->done = done;
    r->arg = arg;
    r->last_activity = ph_monotonic_ms();
    r->base = base;
    r->life_at = r->last_activity + (life_s > 0 ? (int64_t)life_s * 1000 : 0);
    for (int i = 0; i < 2; i++)
        r->pipe[i][0] = r->pipe[i][1] = -1;
    /* On failure the caller still owns (and closes) both sockets. An empty
     * greeting or early part is not added: evbuffer_add allocates a chain
     * even for no bytes (1 KiB per idle tunnel, measured). Bytes the client
     * sent right after its request head (before our 200) are the tunnel's
     * first upstream bytes. */
    bool ok = (greeting_len == 0 ||
               (buffer(r, 1) != NULL && evbuffer_add(r->buf[1], greeting, greeting_len) == 0)) &&
              (early_len == 0 ||
               (buffer(r, 0) != NULL && evbuffer_add(r->buf[0], early, early_len) == 0));
    r->fd[0] = client_fd;
    r->fd[1] = upstream_fd;
    if (!ok) {
        relay_release(r);
        return NULL;
    }
    *r->count[0] += early_len;
    /* The timer is armed once, by px_relay_run, for the nearest of the
     * deadlines then known (a hold's among them). */
    return r;
}

void px_relay_hold(px_relay *r, size_t cap, long timeout_ms, px_relay_gate_cb gate,
                   px_relay_handoff_cb handoff, void *arg)
{
    r->gate = gate;
    r->handoff = handoff;
    r->gate_arg = arg;
    r->hold_cap = cap;
    r->hold_ms = timeout_ms;
    /* Early bytes are held already: the hold's room goes behind them (as
     * hold_bytes makes it for a first read). */
    if (r->buf[0] != NULL)
        (void)evbuffer_expand(r->buf[0], cap);
    /* From the relay's start (the 200), microseconds ago. */
    r->hold_at = r->last_activity + timeout_ms;
}

void px_relay_run(px_relay *r)
{
    arm_timer(r, r->last_activity);
    /* What is left of the greeting (queued first in the downstream buffer)
     * goes out now, without waiting for the loop; then the early bytes. */
    if (!flush(r, 1))
        return;
    if (r->gate != NULL && held(r, 0) > 0) {
        /* The early bytes may be the whole hello already, or its start
         * (then the client's socket is watched for the rest). */
        (void)gate_ask(r, held(r, 0) >= r->hold_cap ? PX_GATE_FULL : PX_GATE_BYTES, NULL, 0);
        return;
    }
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
        if (r->fd[i] >= 0)
            close(r->fd[i]);
    relay_release(r);
    *rp = NULL;
}
