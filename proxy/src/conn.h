/* conn.h - client connections as their worker sees them: accepted from a
 * listener, closed at drain and shutdown, decided again after a reload.
 * What a connection is and does inside is tunnel.c's (a CONNECT) and
 * forward.c's (forwarded requests). */
#ifndef PX_CONN_H
#define PX_CONN_H

#include <stdint.h>
#include <sys/socket.h>

struct px_worker;

/* A connection accepted on one of w's listeners (fd non-blocking, now the
 * connection's) from peer (the client: the socket's source, or the one a
 * balancer's PROXY header named): the caps at accept, then its head, due
 * header_timeout_ms after accepted_ns (ph_monotonic_ns() when the socket
 * was accepted; 0: now). */
void px_conn_accept(struct px_worker *w, int fd, const struct sockaddr *peer, int64_t accepted_ns);
/* Closes every connection of the worker (drain deadline, shutdown). */
void px_conn_close_all(struct px_worker *w);
/* Closes connections that are not tunnels yet (drain: no new work). */
void px_conn_close_idle_heads(struct px_worker *w);
/* After a reload: every connection past its decision is decided again
 * against the policy now in force (its grant re-verified, its lease looked
 * up in the revocation list, its destination checked again); a forwarding
 * one, idle or in a request, on what its next request would be decided
 * on. One that fails is ended: end=key_revoked when its grant no longer
 * verifies, end=grant_expired when it expired, end=lease_revoked when its
 * lease is revoked, end=policy_revoked when the destination is no longer
 * allowed (unless keep_tunnels_on_reload). */
void px_conn_recheck_all(struct px_worker *w);

#endif
