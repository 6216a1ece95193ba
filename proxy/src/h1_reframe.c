/* h1_reframe.c - HTTP/1 messages passed on over evbuffers (h1_reframe.h). */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "h1_reframe.h"
#include "http1.h"

/* What one call decodes at most, and in at most so many of in's chains. */
#define RECHUNK_BATCH 65536
#define RECHUNK_CHAINS 16

int px_h1_rechunk(struct evbuffer *in, struct evbuffer *out, ph_h1_chunked *st, bool chunked_out,
                   uint64_t *count)
{
    /* Decoded in place, chain by chain (the decoder takes its input in any
     * split): nothing is pulled up. A pullup would copy whatever follows
     * the body as well (a request pipelined behind it, with its grant) and
     * free the chains it copied from unwiped; here the chains libevent
     * frees are those the body's bytes used up. */
    struct evbuffer_iovec v[RECHUNK_CHAINS];
    int k = evbuffer_peek(in, RECHUNK_BATCH, NULL, v, RECHUNK_CHAINS);
    size_t used = 0;
    int res = 0;
    for (int i = 0; i < k && i < RECHUNK_CHAINS && res == 0 && used < RECHUNK_BATCH; i++) {
        const uint8_t *p = v[i].iov_base;
        size_t len = v[i].iov_len < RECHUNK_BATCH - used ? v[i].iov_len : RECHUNK_BATCH - used;
        size_t off = 0;
        while (off < len && res == 0) {
            ph_h1_chunk_step s;
            ph_h1_result r = ph_h1_chunked_step(st, p + off, len - off, &s);
            if (s.data_len > 0) {
                if (chunked_out)
                    evbuffer_add_printf(out, "%zx\r\n", s.data_len);
                evbuffer_add(out, p + off + s.data_off, s.data_len);
                if (chunked_out)
                    evbuffer_add(out, "\r\n", 2);
                *count += s.data_len;
            }
            off += s.consumed;
            if (r == PH_H1_DONE) {
                if (chunked_out)
                    evbuffer_add(out, "0\r\n\r\n", 5);
                res = 1;
            } else if (r == PH_H1_REFUSED) {
                res = -1;
            } else if (s.consumed == 0) {
                break;
            }
        }
        used += off;
        if (off < len)
            break;
    }
    evbuffer_drain(in, used);
    return res;
}

/* Fields a proxy removes in either direction (RFC 9110 section 7.6.1), the
 * framing fields it writes itself, and Pinhole-Reason, which only the
 * proxy's own refusals carry (an upstream must not forge one). */
static bool dropped_field(const uint8_t *buf, const ph_h1_head *h, const ph_h1_field *fl)
{
    static const char *const names[] = {
        "connection", "keep-alive",          "proxy-connection",   "te",
        "trailer",    "upgrade",             "proxy-authorization", "proxy-authenticate",
        "host",       "transfer-encoding",   "content-length",     "pinhole-reason",
    };
    const uint8_t *n = buf + fl->name.off;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (ph_h1_name_is(n, fl->name.len, names[i]))
            return true;
    return ph_h1_connection_lists(buf, h, n, fl->name.len);
}

void px_h1_copy_fields(struct evbuffer *out, const uint8_t *buf, const ph_h1_head *h)
{
    for (unsigned i = 0; i < h->nfields; i++) {
        const ph_h1_field *fl = &h->fields[i];
        if (!dropped_field(buf, h, fl))
            evbuffer_add_printf(out, "%.*s: %.*s\r\n", (int)fl->name.len,
                                (const char *)buf + fl->name.off, (int)fl->value.len,
                                (const char *)buf + fl->value.off);
    }
}

bool px_h1_method_idempotent(const char *m)
{
    static const char *const idem[] = {"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"};
    for (size_t i = 0; i < sizeof idem / sizeof idem[0]; i++)
        if (strcmp(m, idem[i]) == 0)
            return true;
    return false;
}
