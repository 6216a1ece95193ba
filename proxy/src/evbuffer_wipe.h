/* evbuffer_wipe.h - a client's bytes wiped where the proxy consumes them.
 *
 * A request head carries its Proxy-Authorization: a grant, a bearer token.
 * libevent frees an evbuffer's chains (evbuffer_drain, evbuffer_pullup's
 * copies, evbuffer_free) without wiping them, so whoever consumes a
 * client's bytes wipes them first: the bytes a drain gives up and what is
 * left in an input about to be freed (px_evbuffer_drain_wiped), and the
 * chains a pullup copies from (px_evbuffer_pullup_wiped). Writable chains only: an input
 * the bufferevent filled, or the proxy with evbuffer_add (never
 * evbuffer_add_reference). */
#ifndef PX_EVBUFFER_WIPE_H
#define PX_EVBUFFER_WIPE_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/* evbuffer_drain(b, n), the n bytes wiped (OPENSSL_cleanse) first. */
void px_evbuffer_drain_wiped(struct evbuffer *b, size_t n);
/* evbuffer_pullup(b, n) (n of at most PH_H1_RESPONSE_HEAD_MAX) leaving no
 * copy of those bytes in the chains it frees; NULL when out of memory (b
 * unchanged). A head in one chain, the usual case, is not copied. */
const uint8_t *px_evbuffer_pullup_wiped(struct evbuffer *b, size_t n);

#endif
