/* bev_read.c - bev_read.h. libevent 2.1's socket bufferevent keeps its read
 * event in the struct of <event2/bufferevent_struct.h> (ev_read, assigned
 * once by bufferevent_socket_new and added, deleted and re-timed by
 * bufferevent_enable/disable/set_timeouts, never re-assigned unless
 * bufferevent_setfd is called, which the proxy does only on a bufferevent it
 * frees at once): that event is given this callback, which does what
 * libevent's bufferevent_readcb does through the public interface (its
 * watermark suspension is the input buffer's own callback, which
 * evbuffer_commit_space runs), with one readv(2) into space reserved in
 * the input instead of FIONREAD + readv. */
#include <errno.h>
#include <sys/uio.h>

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
        /* The input's end is frozen for everyone but the reader. Two
         * extents, as libevent's reader reserves them: the room left in
         * the last chain and a new chain, so the bytes already there are
         * never copied into a bigger chain (whose old one would be freed
         * unwiped with a head's grant in it). */
        struct evbuffer_iovec v[2];
        ssize_t n = -1;
        evbuffer_unfreeze(in, 0);
        int nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
        if (nv > 0) {
            size_t left = want;
            for (int i = 0; i < nv; i++) {
                if (v[i].iov_len > left)
                    v[i].iov_len = left;
                left -= v[i].iov_len;
            }
            n = readv(fd, v, nv);
            err = errno;
            if (n > 0) {
                size_t got = (size_t)n;
                int used = 0;
                for (; used < nv && got > 0; used++) {
                    if (v[used].iov_len > got)
                        v[used].iov_len = got;
                    got -= v[used].iov_len;
                }
                evbuffer_commit_space(in, v, used);
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
