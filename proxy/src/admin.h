/* admin.h - the admin listener: metrics, health, reload. */
#ifndef PX_ADMIN_H
#define PX_ADMIN_H

#include "pinhole/status.h"
#include "sockaddr.h"

struct event_base;

/* The admin listener and its connections (ownership: admin.c's header). */
struct px_admin;
/* Serves /metrics, /healthz, /readyz and POST /reload on the main loop, at
 * most max_connections at once (the next is answered 503 proxy_overloaded
 * and closed); *bound gets the address listened on (port 0: the kernel's
 * choice). The caller owns the result and frees it with px_admin_free
 * after the loop ended. NULL: diag says why. */
struct px_admin *px_admin_start(struct event_base *base, const char *listen_addr,
                                long max_connections, px_sockaddr *bound, ph_diag *diag);
/* Closes the listener and every admin connection; *admin becomes NULL. */
void px_admin_free(struct px_admin **admin);
void px_admin_set_draining(void);

#endif
