/* relay.h - the bytes of a tunnel, both ways. */
#ifndef PX_RELAY_H
#define PX_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct event_base;

typedef struct px_relay px_relay;
typedef void (*px_relay_done_cb)(void *arg, const char *why);

/* Relays between two connected non-blocking sockets (no event of the
 * caller's may watch them any more) until both directions have ended (EOF
 * propagated as shutdown(SHUT_WR)), an error, the idle timeout, life_s
 * seconds from now (then done gets life_end) or px_relay_stop. On success
 * takes ownership of both sockets; on NULL (out of memory) the caller still
 * owns both. early (copied): bytes already read from the client, the first
 * to go upstream. greeting (copied) is sent to the client before any
 * upstream byte and is not counted. *up / *down count the bytes
 * client->upstream (early included) and upstream->client. Nothing moves
 * before px_relay_run. */
px_relay *px_relay_start(struct event_base *base, int client_fd, int upstream_fd,
                         const void *early, size_t early_len, const char *greeting,
                         size_t greeting_len, const px_config *cfg, long life_s,
                         const char *life_end, uint64_t *up, uint64_t *down,
                         px_relay_done_cb done, void *arg);
/* Sends the greeting and the early bytes at once and starts relaying. done
 * runs once, at the end (possibly already within this call: the caller must
 * not touch what done frees afterwards). */
void px_relay_run(px_relay *r);
/* Ends the relay now: done runs with why, within this call (and may free
 * the relay: the caller must not touch it afterwards). */
void px_relay_stop(px_relay *r, const char *why);
/* Closes both sockets; done does not run. */
void px_relay_free(px_relay **r);

#endif
