/* h1_reframe.h - HTTP/1 messages as a proxy passes them on, over
 * evbuffers: header fields copied without the hop-by-hop ones, chunked
 * bodies decoded and re-framed, the methods a proxy may send again. The
 * framing itself is parsed by http1.h. */
#ifndef PX_H1_REFRAME_H
#define PX_H1_REFRAME_H

#include <stdbool.h>
#include <stdint.h>

#include "http1.h"

struct evbuffer;

/* Decodes chunked bytes from in and writes their data to out, as chunks
 * (chunked_out) or as plain bytes; *count grows by the data bytes. 1: the
 * body ended, 0: more to come, -1: malformed (st->reason). */
int px_h1_rechunk(struct evbuffer *in, struct evbuffer *out, ph_h1_chunked *st, bool chunked_out,
                  uint64_t *count);
/* Appends head h's fields (in buf) to out, less the fields a proxy removes
 * in either direction (RFC 9110 section 7.6.1, and the ones Connection
 * lists), the framing fields it writes itself, and Pinhole-Reason. */
void px_h1_copy_fields(struct evbuffer *out, const uint8_t *buf, const ph_h1_head *h);
/* RFC 9110 9.2.2: the idempotent methods, the only ones a proxy may send
 * again by itself. */
bool px_h1_method_idempotent(const char *m);

#endif
