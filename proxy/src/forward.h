/* forward.h - plain-HTTP forwarding (absolute-form requests) for the
 * connection that owns the client (conn-int.h's px_conn, accepted by
 * tunnel.c), reached back only through the hooks it hands over.
 *
 * A client connection whose first request is not a CONNECT is handed to
 * forward.c, which then owns the client's bufferevent and everything of its
 * requests (upstream connections, DNS queries, timers, lease slots); the
 * px_conn stays the connection's entry in the worker's list (for
 * the limits, drain and shutdown) and frees the forwarder with it.
 *
 * Ownership: a px_fwd is freed only by px_forward_free, which only its
 * owner calls (conn.c's px_conn_free). forward.c never frees anything
 * synchronously inside one of its callbacks: to end the connection it marks
 * itself dead and activates its reap event, whose callback (from the loop)
 * calls the owner's end hook. Every callback of forward.c therefore finds
 * its px_fwd alive for the whole call.
 */
#ifndef PX_FORWARD_H
#define PX_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/guard.h"

struct bufferevent;
struct px_fwd;
struct px_worker;

/* What forward.c asks of the connection that owns it (owner: its
 * argument). */
typedef struct px_fwd_owner {
    /* The connection's first request head is complete: it leaves the
     * request-head limit (max_head_connections). */
    void (*head_done)(void *owner);
    /* Ends the connection (which frees its px_fwd with px_forward_free);
     * called from the loop, never inside a call into forward.c. */
    void (*end)(void *owner, const char *end);
} px_fwd_owner;

/* True when buf[0..len), the start of a connection's first request, cannot
 * be a CONNECT (so forward.c answers it); false while it still may be. */
bool px_forward_wants(const uint8_t *buf, size_t len);

/* Takes over the client (its bufferevent and the bytes it has read) of the
 * connection owner (hooks, conn_id and peer are the owner's, borrowed for
 * its life). NULL when out of memory (the caller still owns client).
 * Nothing happens before px_forward_run. */
struct px_fwd *px_forward_start(const px_fwd_owner *hooks, void *owner, struct px_worker *w,
                                struct bufferevent *client, uint64_t conn_id, const char *peer);
/* A CONNECT tunnel whose client speaks HTTP/1 in clear (tunnel.c, after
 * the inspection said so): forward.c serves it like a forwarding
 * connection, except that requests are origin-form (or absolute-form),
 * each is decided with the grant the CONNECT carried (token), and each
 * must name the tunnel's host and port in its Host field (and its
 * absolute-form authority), else 403 host_mismatch and the connection
 * ends. Everything here is copied, except upstream: the tunnel's connected
 * upstream (taken; NULL for none), kept for the first request that is
 * decided for the same checked address, with tenant, lease and list the
 * grant's. */
typedef struct px_fwd_tunnel {
    const char *host; /* canonical */
    uint16_t port;
    const char *token; /* the CONNECT's Proxy-Authorization value */
    size_t token_len;
    const char *tenant, *lease, *list;
    /* The CONNECT's rule and policy id (NULL: none), which with its grant
     * stand for the last decision until a request is decided. */
    const char *rule_file;
    uint32_t rule_line;
    const char *policy_id;
    struct bufferevent *upstream;
} px_fwd_tunnel;

/* px_forward_start for a tunnel (px_fwd_tunnel). NULL when out of memory
 * (the caller still owns client and t->upstream). */
struct px_fwd *px_forward_start_tunnel(const px_fwd_owner *hooks, void *owner,
                                       struct px_worker *w, struct bufferevent *client,
                                       uint64_t conn_id, const char *peer,
                                       const px_fwd_tunnel *t);
/* Starts reading requests (the bytes already read first). */
void px_forward_run(struct px_fwd *f);
/* Frees everything of f (closes the client and any upstream, cancels its
 * lookup, releases its lease slot); a request in flight gets its log line
 * with end. NULLs *f. */
void px_forward_free(struct px_fwd **f, const char *end);
/* True while f waits for a request or reads its head (drain closes such
 * connections, as it closes CONNECT connections still sending their head). */
bool px_forward_idle(const struct px_fwd *f);
/* After a reload (tunnel.c decides every open connection again): what
 * the next request of f would be decided on, into r: a tunnel's host, port
 * and CONNECT token, or the host, port and Proxy-Authorization of the last
 * request decided (borrowed from f until its next request); *in_tunnel
 * says f serves a tunnel, whose next request is also refused when its rule
 * says tls (forward_decide.c). False, r untouched, when there is nothing
 * to decide again: f is ending, or no request of it was decided yet (its
 * first is decided when it comes). r->now is the caller's. */
bool px_forward_recheck_target(const struct px_fwd *f, ph_recheck_request *r, bool *in_tunnel);
/* Ends f, which that decision refused: end is the ending's code
 * ("policy_revoked", "lease_revoked", ...), reason the refusal's, detail
 * the log's. A request in flight is logged with them (its one line), and,
 * when nothing of its response was sent yet, answered reason's status
 * first (as a CONNECT still resolving or dialing is); a connection between
 * requests, which has no request to log, gets one line of its own now
 * (event "connection", status 0: nothing was answered; the destination,
 * grant, rule and policy id of its last decision, a tunnel's CONNECT's
 * before its first request). Ended from the loop, as every end of
 * forward.c's: nothing is freed within the call. */
void px_forward_revoke(struct px_fwd *f, const char *end, ph_reason reason, const char *detail);

#endif
