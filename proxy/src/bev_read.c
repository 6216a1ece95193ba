/* bev_read.c - bev_read.h. libevent 2.1's socket bufferevent keeps its read
 * event in the struct of <event2/bufferevent_struct.h> (ev_read, assigned
 * once by bufferevent_socket_new and added, deleted and re-timed by
 * bufferevent_enable/disable/set_timeouts, never re-assigned unless
 * bufferevent_setfd is called, which the proxy does only on a bufferevent it
 * frees at once): that event is given this callback, which does what
 * libevent's bufferevent_readcb does through the public interface (its
 * watermark suspension is the input buffer's own callback, which
 * evbuffer_commit_space runs), with a recv(2) into space reserved in the
 * input instead of FIONREAD + readv. */
#include <errno.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>

#include "bev_read.h"

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct bufferevent *b = arg;
    short why = BEV_EVENT_READING;
    int err = 0;
    if (what & EV_TIMEOUT) {
        why |= BEV_EVENT_TIMEOUT;
    } else {
        struct evbuffer *in = bufferevent_get_input(b);
        size_t have = evbuffer_get_length(in), low, high;
        size_t want = (size_t)bufferevent_get_max_single_read(b);
        bufferevent_getwatermark(b, EV_READ, &low, &high);
        if (high != 0) {
            /* At the mark the buffer's callback has stopped reading
             * already (bufferevent_setwatermark too): nothing to take. */
            if (have >= high)
                return;
            if (high - have < want)
                want = high - have;
        }
        /* The input's end is frozen for everyone but the reader. */
        struct evbuffer_iovec v;
        ssize_t n = -1;
        evbuffer_unfreeze(in, 0);
        if (evbuffer_reserve_space(in, (ev_ssize_t)want, &v, 1) == 1) {
            n = recv(fd, v.iov_base, want < v.iov_len ? want : v.iov_len, 0);
            err = errno;
            if (n > 0) {
                v.iov_len = (size_t)n;
                evbuffer_commit_space(in, &v, 1);
            }
        } else {
            err = ENOMEM;
        }
        evbuffer_freeze(in, 0);
        if (n > 0) {
            /* The read callback, at or above the low watermark; last, as
             * it may free b (bufferevent_trigger holds a reference). */
            bufferevent_trigger(b, EV_READ, 0);
            return;
        }
        if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
            return;
        why |= n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR;
    }
    bufferevent_disable(b, EV_READ);
    errno = err;
    bufferevent_trigger_event(b, why, 0);
}

void px_bev_read_direct(struct bufferevent *b)
{
    /* 2.1.x only: the layout of struct bufferevent is libevent's to
     * change. */
    if ((event_get_version_number() & 0xffff0000u) != 0x02010000u ||
        event_pending(&b->ev_read, EV_READ | EV_TIMEOUT, NULL))
        return;
    event_assign(&b->ev_read, bufferevent_get_base(b), bufferevent_getfd(b),
                 EV_READ | EV_PERSIST | EV_FINALIZE, read_cb, b);
}
