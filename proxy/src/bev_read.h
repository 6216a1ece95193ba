/* bev_read.h - a socket bufferevent that reads with one readv(2) per
 * readiness: libevent 2.1's own reader (evbuffer_read) asks
 * ioctl(FIONREAD) before every read to size it, a second system call for
 * every read of the forwarding engine's sockets (two of a kept-alive
 * request's seven). */
#ifndef PX_BEV_READ_H
#define PX_BEV_READ_H

struct bufferevent;

/* Gives b (a socket bufferevent just made, not reading yet) this reader in
 * place of libevent's: the same contract (the input's high watermark and
 * libevent's most per read, max_single_read, bound a read; the read
 * callback after new bytes at or above the low watermark; EOF, an error or
 * the read timeout stop reading and reach the event callback with
 * BEV_EVENT_READING, errno kept for EVUTIL_SOCKET_ERROR). With a libevent
 * other than 2.1, whose bufferevent layout this relies on, or a b already
 * reading, b keeps libevent's reader. */
void px_bev_read_direct(struct bufferevent *b);

#endif
