/* proxy_limits.h - the proxy's own resources, counted across workers. */
#ifndef PX_PROXY_LIMITS_H
#define PX_PROXY_LIMITS_H

#include <stdbool.h>

#include "pinhole/grant.h"

/* Overall connection slots (atomic): at most min(max, the descriptor cap). */
bool px_limits_conn_acquire(long max);
void px_limits_conn_release(void);
long px_limits_conn_active(void);
/* The most connections the descriptor limit allows (two descriptors each,
 * client and upstream, beside the reserve); LONG_MAX until set. */
void px_limits_set_fd_cap(long cap);
/* A splice pipe (two descriptors) for the relay, only from the room the
 * connections leave: connections + pipes stay within the descriptor cap. */
bool px_limits_pipe_acquire(void);
void px_limits_pipe_release(void);
/* Connections still sending their request head (atomic). */
bool px_limits_head_acquire(long max);
void px_limits_head_release(void);
/* Keyed slots: per tenant+lease (from the grant), and per peer (the key
 * px_conn_accept derives from who connected: the TCP source address, or the
 * unix peer's process id). Bounded tables; a full window refuses. */
#define PX_LIMIT_KEY_MAX (2 * PH_GRANT_FIELD_MAX + 2)
bool px_limits_lease_acquire(const char *tenant, const char *lease, long max);
void px_limits_lease_release(const char *tenant, const char *lease);
bool px_limits_peer_acquire(const char *peer_key, long max);
void px_limits_peer_release(const char *peer_key);
/* The peer's connections still sending their request head (so one peer's
 * slow heads cannot take the overall head slots from everyone). */
bool px_limits_peer_head_acquire(const char *peer_key, long max);
void px_limits_peer_head_release(const char *peer_key);

#endif
