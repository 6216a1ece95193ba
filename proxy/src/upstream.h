/* upstream.h - from the guard's yes to a connected, checked upstream: the
 * one path every front end (a CONNECT in tunnel.c, a forwarded request in
 * forward.c) takes after ph_decide_connect / ph_decide_url allowed it.
 *
 *   px_upstream_start   the per-lease slot (the grant's tenant and lease:
 *                       the proxy's own resource; refused at once with
 *                       limit_exceeded), then exactly the decided name
 *                       resolved for the decided port (the guard's resolver
 *                       driver, dns_async.c: every address checked, one
 *                       denied address refuses the whole answer)
 *   PX_UP_RESOLVED      the checked addresses (px_upstream_is_checked); the
 *                       front end either serves the request on a connection
 *                       of its own to one of them (forward.c's kept-alive
 *                       upstream) or calls px_upstream_dial
 *   px_upstream_dial    each checked address in answer order, each under
 *                       connect_timeout_ms, never re-resolving
 *   PX_UP_CONNECTED     px_upstream_take_fd hands over the connected socket
 *                       (px_upstream_take, the same in a bufferevent);
 *                       TCP_NODELAY set; a connect that completed inside
 *                       connect(2), as on a near upstream, is delivered at
 *                       once
 *   PX_UP_REFUSED       reason and detail: dns_failure, dns_timeout,
 *                       denied_address (the resolver's), upstream_timeout
 *                       (every address timed out), upstream_unreachable
 * The slot is held until px_upstream_free, so a front end holds it for as
 * long as the request or tunnel lives. px_upstream_lifetime is the deadline
 * both front ends apply: min(max_lifetime_s, the grant's expiry).
 *
 * Ownership: the caller owns a px_upstream (px_upstream_free). Its callback
 * runs from the worker's loop (the DNS answer, the connect events and
 * timer), or within px_upstream_dial (an address that connected at once, or
 * no address left to try); upstream.c touches nothing of the px_upstream
 * after the callback returns, so the callback may free it.
 */
#ifndef PX_UPSTREAM_H
#define PX_UPSTREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pinhole/guard.h"

struct bufferevent;
struct px_worker;
typedef struct px_upstream px_upstream;

typedef enum px_up_event {
    PX_UP_RESOLVED,  /* checked addresses ready: px_upstream_dial, or a connection of the caller's */
    PX_UP_CONNECTED, /* px_upstream_take(_fd) the connected socket */
    PX_UP_REFUSED,   /* reason and detail say why; nothing is pending any more */
} px_up_event;

/* reason and detail: PX_UP_REFUSED only (detail valid during the call). */
typedef void (*px_upstream_cb)(void *arg, px_up_event ev, ph_reason reason, const char *detail);

/* Takes the lease slot of d's grant and starts resolving d's host for its
 * port. NULL when refused at once: *reason and *detail (static) say why
 * (limit_exceeded when the lease has max_connections_per_lease already,
 * dns_failure or proxy_overloaded when out of memory; d's own reason when
 * d is not allowed, no_grant when it was made without a grant). d is
 * copied from. */
px_upstream *px_upstream_start(struct px_worker *w, const ph_decision *d, px_upstream_cb cb,
                               void *arg, ph_reason *reason, const char **detail);
/* px_upstream_start in the caller's memory: room, aligned for any type, of
 * px_upstream_room() bytes, which must outlive the live form (until
 * px_upstream_stop returned true, px_upstream_stop_in, or
 * px_upstream_free); the px_upstream is the caller's as ever
 * (px_upstream_free releases the slot and frees nothing of room). */
size_t px_upstream_room(void);
px_upstream *px_upstream_start_in(void *room, struct px_worker *w, const ph_decision *d,
                                  px_upstream_cb cb, void *arg, ph_reason *reason,
                                  const char **detail);
/* Dials the checked addresses from the first, in answer order (after
 * PX_UP_RESOLVED, or again after a connection of the caller's to them
 * failed). The callback may run within the call (module comment).
 * px_upstream_dial, _is_checked, _take, _set_dialed and _lifetime: only
 * before px_upstream_stop. */
void px_upstream_dial(px_upstream *u);
/* True when addr's address (not its port) is one of the checked ones. */
bool px_upstream_is_checked(const px_upstream *u, const struct sockaddr_storage *addr);
/* After PX_UP_CONNECTED: the connected socket (non-blocking, close on
 * exec), now the caller's; *addr (may be NULL) the address dialed. */
int px_upstream_take_fd(px_upstream *u, struct sockaddr_storage *addr);
/* px_upstream_take_fd with the socket in a new bufferevent (closing it when
 * freed), now the caller's; NULL when out of memory (the socket then stays
 * the px_upstream's, closed with it). */
struct bufferevent *px_upstream_take(px_upstream *u, struct sockaddr_storage *addr);
/* Stops resolving or dialing (the callback does not run afterwards) and
 * frees the answer, the timer and any connection being tried; the slot and
 * the log strings stay until px_upstream_free, in a compact form of its own
 * allocation that replaces *u (a long-lived tunnel keeps only that).
 * Nothing once stopped. False when out of memory for the compact form: *u
 * stays where it was (stopped, without the log's addresses), so a
 * px_upstream_start_in one still needs its room. */
bool px_upstream_stop(px_upstream **u);
/* px_upstream_stop (or, stopped already, a move) into the caller's memory:
 * room, aligned for any type, of px_upstream_compact_size(*u) bytes, which
 * must outlive *u (px_upstream_free frees nothing of it). Never fails; *u's
 * old place is the caller's to free (if it was room) once this returned. */
size_t px_upstream_compact_size(const px_upstream *u);
void px_upstream_stop_in(px_upstream **u, void *room);
/* Cancels, releases the lease slot, frees everything; *u becomes NULL. */
void px_upstream_free(px_upstream **u);

/* For the log (NULL when none): "address:port" of the connection dialed
 * (the last attempt, until every address failed), and the checked
 * addresses, space-separated, in answer order. */
const char *px_upstream_dialed(const px_upstream *u);
const char *px_upstream_checked(const px_upstream *u);
/* Sets the dialed address for the log (a connection the caller reused). */
void px_upstream_set_dialed(px_upstream *u, const struct sockaddr *addr);

/* Seconds the request or tunnel may live from now: the earliest of
 * max_lifetime_s and the grant's expiry (by this clock: the verifier's skew
 * tolerance admits a request, it does not lengthen it); *end says which
 * ("max_lifetime" or "grant_expired"). */
long px_upstream_lifetime(const px_upstream *u, const char **end);

#endif
