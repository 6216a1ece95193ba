/* listener.h - the proxy's listening sockets (TCP with SO_REUSEPORT per
 * worker, the unix socket) and the accept loop that hands connections to
 * conn.h. */
#ifndef PX_LISTENER_H
#define PX_LISTENER_H

#include <stdbool.h>

#include "pinhole/status.h"
#include "pinhole/unix_listen.h"
#include "sockaddr.h"

struct px_worker;
typedef struct px_listener px_listener;

/* A bound, listening, non-blocking TCP socket with SO_REUSEPORT (every worker
 * binds its own, the kernel spreads connections). first: the first socket
 * of this address in this process; once bound, before listening, it fails
 * when something already accepts there (a probe connect succeeds), so a
 * second instance cannot join the port group. *addr is updated to the bound address (port 0: the kernel's
 * choice, which the other workers then bind). Returns the fd or -1. */
int px_listen_tcp(px_sockaddr *addr, bool first, ph_diag *diag);
/* A unix listening socket at path with mode, into *out (ph_unix_listen:
 * a stale socket, nothing accepting on it, is replaced; a live one is an
 * error naming its holder, SO_PEERCRED pid; a symlink or any other file is
 * an error), after the instance lock of the path (another pinhole-proxy
 * is named as such). At stop the caller removes it with
 * ph_unix_listen_unlink. Returns out->fd or -1. */
int px_listen_unix(const char *path, unsigned mode, ph_unix_listener *out, ph_diag *diag);

/* Watches fd on the worker's loop and hands each connection to the worker
 * (proxy_protocol: through accept_proxied.h, which reads a balancer's PROXY
 * header first), one per callback, each next accept(2) after the events the
 * previous connection's start queued (listener.c says when it tries one);
 * on EMFILE/ENFILE it pauses accepting for a moment and retries. The
 * listener is the worker's (w->listeners), freed by px_listener_free, which
 * closes fd when close_on_free. NULL when out of memory (fd untouched). */
px_listener *px_listener_attach(struct px_worker *w, int fd, bool close_on_free,
                                bool proxy_protocol);
/* Stops accepting and frees *lp (and its socket when close_on_free); NULLs
 * it. */
void px_listener_free(px_listener **lp);

#endif
