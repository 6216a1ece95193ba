/* relay.h - the bytes of a tunnel, both ways. */
#ifndef PX_RELAY_H
#define PX_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

struct event_base;
struct evbuffer;

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
/* The verdict of a hold's gate (px_relay_hold) on the client's bytes so far. */
typedef enum px_gate_verdict {
    PX_GATE_WAIT = 0, /* more bytes are needed */
    PX_GATE_PASS = 1, /* relay everything held, and the rest as usual */
    PX_GATE_END = 2,  /* end the tunnel: send reply to the client, relay nothing */
    PX_GATE_HANDOFF = 3, /* the relay ends and hands both sockets and their bytes
                          * to the hold's handoff callback */
    PX_GATE_PASS_SOME = 4, /* relay the first *reply_len bytes the gate saw; the rest
                            * stay held, and from now on the gate also sees the
                            * upstream's bytes (PX_GATE_UPSTREAM) */
} px_gate_verdict;

/* Why the gate is asked: bytes arrived, or the last time (the client sent
 * EOF, the hold is full or its deadline passed: WAIT then counts as END). */
typedef enum px_gate_ask {
    PX_GATE_BYTES = 0,
    PX_GATE_EOF = 1,
    PX_GATE_FULL = 2,
    PX_GATE_DEADLINE = 3,
    /* After a PASS_SOME: held[0..len) are bytes the upstream sent (relayed
     * to the client as usual; the gate only looks at them, its verdict is
     * not used). The gate is then asked about the client's bytes again. */
    PX_GATE_UPSTREAM = 4,
} px_gate_ask;

/* Gate: sees held[0..len) (the client's bytes so far, early bytes first,
 * less those a PASS_SOME let go); on END sets *end (the relay's end
 * reason, static) and may set *reply (static or the gate's own, valid
 * until done runs) to bytes sent to the client before the tunnel closes;
 * on PASS_SOME sets *reply_len to the bytes that go (at most len). A
 * PASS_SOME starts the hold's deadline again. */
typedef px_gate_verdict (*px_relay_gate_cb)(void *arg, const uint8_t *held, size_t len,
                                            px_gate_ask why, const char **end,
                                            const uint8_t **reply, size_t *reply_len);

/* HANDOFF: the relay stops (done does not run) and gives the caller its
 * two sockets (now the caller's), the client's held bytes (held) and what
 * it has not yet sent the client (to_client), each an evbuffer the caller
 * now owns (never NULL). The caller then frees the relay with px_relay_free
 * (which closes nothing any more), within the callback or later; the relay
 * touches nothing of itself after the callback returns. */
typedef void (*px_relay_handoff_cb)(void *arg, int client_fd, int upstream_fd,
                                    struct evbuffer *held, struct evbuffer *to_client);

/* Before px_relay_run: nothing the client sends goes upstream until gate
 * says PASS (or PASS_SOME, for the bytes it names); the client's bytes are
 * held (at most cap bytes, for at most timeout_ms from now) while the
 * upstream's are relayed at once. handoff (may be NULL: HANDOFF is then
 * END) serves a gate's HANDOFF. */
void px_relay_hold(px_relay *r, size_t cap, long timeout_ms, px_relay_gate_cb gate,
                   px_relay_handoff_cb handoff, void *arg);

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
