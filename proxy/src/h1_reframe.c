/* h1_reframe.c - HTTP/1 messages passed on over evbuffers (h1_reframe.h). */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "h1_reframe.h"
#include "http1.h"

int px_h1_rechunk(struct evbuffer *in, struct evbuffer *out, ph_h1_chunked *st, bool chunked_out,
                   uint64_t *count)
{
    size_t avail = evbuffer_get_length(in);
    if (avail > 65536)
        avail = 65536;
    const uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)avail);
    size_t used = 0;
    int res = 0;
    while (used < avail) {
        ph_h1_chunk_step s;
        ph_h1_result r = ph_h1_chunked_step(st, p + used, avail - used, &s);
        if (s.data_len > 0) {
            if (chunked_out)
                evbuffer_add_printf(out, "%zx\r\n", s.data_len);
            evbuffer_add(out, p + used + s.data_off, s.data_len);
            if (chunked_out)
                evbuffer_add(out, "\r\n", 2);
            *count += s.data_len;
        }
        used += s.consumed;
        if (r == PH_H1_DONE) {
            if (chunked_out)
                evbuffer_add(out, "0\r\n\r\n", 5);
            res = 1;
            break;
        }
        if (r == PH_H1_REFUSED) {
            res = -1;
            break;
        }
        if (s.consumed == 0)
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
