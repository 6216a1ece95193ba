/* http1.c - fuzzer for the proxy's one HTTP/1.1 parser (proxy/src/http1.c):
 * CONNECT and forwarded request heads, response heads, chunked bodies. The
 * first byte picks the part: 'q' a request head (a CONNECT's too: the seeds
 * connect_* are what tunnel.c reads), 'r' a response head (odd second byte:
 * the response to a HEAD), anything else a chunked body; the rest is the
 * input. Invariants beyond "no crash":
 *   - a refusal has a framing reason (never "allowed"; parse_error only for
 *     a CONNECT's request line, the guard's reason for a malformed
 *     authority), a one-line message and an offset inside the input;
 *   - DONE: the head is inside the input and its limit, ends in CRLF CRLF,
 *     every span lies inside it, the method is a token, the target within
 *     PH_H1_TARGET_MAX, a Content-Length is exactly its field's digits
 *     (leading zeros aside: a value that wrapped around would differ) and
 *     within PH_H1_LENGTH_MAX, the body kind agrees with the fields;
 *   - the parser never looks past the head: the head alone, and the head
 *     with more bytes after it, parse the same;
 *   - incremental: every prefix of a complete head is INCOMPLETE, and a
 *     refused input stays refused, with the same reason, when more bytes
 *     follow (what a connection delivering it byte by byte would see); fed
 *     a byte at a time and parsed only when ph_h1_head_scan says so (as
 *     tunnel.c and forward.c do), a complete head is found the same, with
 *     at most two parses;
 *   - requests: the target's form follows from the method and its first
 *     byte; a CONNECT (authority-form) has no body and no framing field;
 *     proxy_auth_field is the one Proxy-Authorization field; a CONNECT
 *     rebuilt from its target and grant field parses to the same ones;
 *   - chunked: decoding in one piece and byte by byte gives the same data
 *     and the same result; the data is never longer than the input; data
 *     re-encoded as one chunk decodes to the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http1.h"

/* Not assert(): the invariants must hold in release builds too. */
#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool framing_reason(ph_reason r)
{
    return (r >= PH_REASON_HTTP_CL_TE && r <= PH_REASON_HTTP_BAD_REQUEST_LINE) ||
           r == PH_REASON_UPSTREAM_BAD_RESPONSE;
}

static ph_h1_result parse(bool request, bool was_head, const uint8_t *d, size_t n, ph_h1_head *h)
{
    return request ? ph_h1_parse_request(d, n, h) : ph_h1_parse_response(d, n, was_head, h);
}

static void in_head(ph_h1_span s, size_t head_len)
{
    CHECK((size_t)s.off + s.len <= head_len);
}

/* A request head's form, its CONNECT rules and its grant field (h parsed
 * DONE from d). */
static void check_request(const uint8_t *d, const ph_h1_head *h)
{
    const uint8_t *t = d + h->target.off;
    bool connect = h->method.len == 7 && memcmp(d, "CONNECT", 7) == 0;
    CHECK(h->form == (connect                              ? PH_H1_FORM_AUTHORITY
                      : t[0] == '/'                        ? PH_H1_FORM_ORIGIN
                      : h->target.len == 1 && t[0] == '*' ? PH_H1_FORM_ASTERISK
                                                           : PH_H1_FORM_ABSOLUTE));
    int auth = -1;
    for (unsigned i = 0; i < h->nfields; i++) {
        const ph_h1_field *f = &h->fields[i];
        if (ph_h1_name_is(d + f->name.off, f->name.len, "proxy-authorization")) {
            CHECK(auth < 0);
            auth = (int)i;
        }
        if (connect)
            CHECK(!ph_h1_name_is(d + f->name.off, f->name.len, "content-length") &&
                  !ph_h1_name_is(d + f->name.off, f->name.len, "transfer-encoding"));
    }
    CHECK(h->proxy_auth_field == auth);
    if (!connect)
        return;
    CHECK(h->body == PH_H1_BODY_NONE && !h->has_content_length);

    /* Round trip through the canonical CONNECT: the same target and grant. */
    ph_h1_span av = auth >= 0 ? h->fields[auth].value : (ph_h1_span){ 0, 0 };
    size_t cap = h->target.len + av.len + 64, n = 0;
    uint8_t *c = malloc(cap);
    CHECK(c != NULL);
    memcpy(c + n, "CONNECT ", 8), n += 8;
    memcpy(c + n, t, h->target.len), n += h->target.len;
    memcpy(c + n, " HTTP/1.1\r\n", 11), n += 11;
    if (auth >= 0) {
        memcpy(c + n, "Proxy-Authorization: ", 21), n += 21;
        memcpy(c + n, d + av.off, av.len), n += av.len;
        memcpy(c + n, "\r\n", 2), n += 2;
    }
    memcpy(c + n, "\r\n", 2), n += 2;
    static ph_h1_head k;
    if (n <= PH_H1_REQUEST_HEAD_MAX) {
        CHECK(ph_h1_parse_request(c, n, &k) == PH_H1_DONE && k.head_len == n);
        CHECK(k.form == PH_H1_FORM_AUTHORITY && k.target.len == h->target.len &&
              memcmp(c + k.target.off, t, h->target.len) == 0);
        CHECK(k.proxy_auth_field == (auth >= 0 ? 0 : -1));
        if (auth >= 0)
            CHECK(k.fields[0].value.len == av.len &&
                  memcmp(c + k.fields[0].value.off, d + av.off, av.len) == 0);
    }
    free(c);
}

static void check_head(bool request, bool was_head, const uint8_t *d, size_t n)
{
    static ph_h1_head h, k;
    ph_h1_result r = parse(request, was_head, d, n, &h);
    size_t max = request ? PH_H1_REQUEST_HEAD_MAX : PH_H1_RESPONSE_HEAD_MAX;
    CHECK(r == PH_H1_INCOMPLETE || r == PH_H1_DONE || r == PH_H1_REFUSED);

    if (r == PH_H1_REFUSED) {
        /* A CONNECT's request line is refused as a malformed authority. */
        CHECK(framing_reason(h.reason) || (request && h.reason == PH_REASON_PARSE_ERROR &&
                                           n >= 8 && memcmp(d, "CONNECT ", 8) == 0));
        CHECK(h.message != NULL && strchr(h.message, '\n') == NULL);
        CHECK(h.error_offset <= n || h.error_offset == max);
        /* More bytes after a refused prefix: still refused, same reason. */
        uint8_t *more = malloc(n + 4);
        CHECK(more != NULL);
        memcpy(more, d, n);
        memcpy(more + n, "\r\n\r\n", 4);
        CHECK(parse(request, was_head, more, n + 4, &k) == PH_H1_REFUSED && k.reason == h.reason);
        free(more);
        return;
    }
    if (r == PH_H1_INCOMPLETE) {
        CHECK(n < max);
        CHECK(parse(request, was_head, d, n / 2, &k) == PH_H1_INCOMPLETE);
        return;
    }

    CHECK(h.head_len >= 4 && h.head_len <= n && h.head_len <= max);
    CHECK(memcmp(d + h.head_len - 4, "\r\n\r\n", 4) == 0);
    CHECK(h.version_minor == 0 || h.version_minor == 1);
    CHECK(h.nfields <= PH_H1_FIELDS_MAX);
    for (unsigned i = 0; i < h.nfields; i++) {
        in_head(h.fields[i].name, h.head_len);
        in_head(h.fields[i].value, h.head_len);
        CHECK(h.fields[i].name.len > 0);
        for (uint32_t j = 0; j < h.fields[i].name.len; j++)
            CHECK(ph_h1_is_tchar(d[h.fields[i].name.off + j]));
        for (uint32_t j = 0; j < h.fields[i].value.len; j++)
            CHECK(ph_h1_is_field_byte(d[h.fields[i].value.off + j]));
    }
    CHECK(h.content_length <= PH_H1_LENGTH_MAX);
    if (h.has_content_length) {
        /* The value is the field's digits, written back in decimal. */
        char dec[24];
        size_t dn = (size_t)snprintf(dec, sizeof dec, "%llu", (unsigned long long)h.content_length);
        bool found = false;
        for (unsigned i = 0; i < h.nfields; i++) {
            if (!ph_h1_name_is(d + h.fields[i].name.off, h.fields[i].name.len, "content-length"))
                continue;
            const uint8_t *fv = d + h.fields[i].value.off;
            size_t fl = h.fields[i].value.len;
            while (fl > 1 && fv[0] == '0')
                fv++, fl--;
            found = fl == dn && memcmp(fv, dec, dn) == 0;
        }
        CHECK(found);
    } else {
        CHECK(h.content_length == 0 && h.body != PH_H1_BODY_LENGTH);
    }
    if (h.host_field >= 0)
        CHECK((unsigned)h.host_field < h.nfields);
    if (request) {
        CHECK(h.method.off == 0 && h.method.len > 0);
        for (uint32_t j = 0; j < h.method.len; j++)
            CHECK(ph_h1_is_tchar(d[j]));
        CHECK(h.target.len > 0 && h.target.len <= PH_H1_TARGET_MAX);
        in_head(h.target, h.head_len);
        CHECK(h.body != PH_H1_BODY_CLOSE);
        check_request(d, &h);
    } else {
        CHECK(h.status >= 100 && h.status <= 999);
        in_head(h.reason_phrase, h.head_len);
        if (was_head || h.status < 200 || h.status == 204 || h.status == 304)
            CHECK(h.body == PH_H1_BODY_NONE);
        else
            CHECK(h.body != PH_H1_BODY_NONE);
    }

    /* The head alone, and the head with bytes after it, parse the same. */
    CHECK(parse(request, was_head, d, h.head_len, &k) == PH_H1_DONE);
    CHECK(k.head_len == h.head_len && k.nfields == h.nfields && k.body == h.body &&
          k.content_length == h.content_length && k.status == h.status);
    uint8_t *more = malloc(h.head_len + 3);
    CHECK(more != NULL);
    memcpy(more, d, h.head_len);
    memcpy(more + h.head_len, "\n\r\x01", 3);
    CHECK(parse(request, was_head, more, h.head_len + 3, &k) == PH_H1_DONE);
    CHECK(k.head_len == h.head_len && k.body == h.body);
    free(more);

    /* Byte by byte: every prefix of the head is incomplete (sampled for
     * long heads). */
    size_t step = h.head_len > 64 ? h.head_len / 64 : 1;
    for (size_t p = 0; p < h.head_len; p += step)
        CHECK(parse(request, was_head, d, p, &k) == PH_H1_INCOMPLETE);

    /* Byte by byte as a connection parses it: only when the scan says so
     * (or at the cap), the same head in at most two parses. */
    size_t mark = 0;
    unsigned parses = 0;
    ph_h1_result fr = PH_H1_INCOMPLETE;
    for (size_t i = 1; i <= h.head_len && fr == PH_H1_INCOMPLETE; i++)
        if (ph_h1_head_scan(d, i, &mark) || i >= max) {
            parses++;
            fr = parse(request, was_head, d, i, &k);
        }
    CHECK(fr == PH_H1_DONE && k.head_len == h.head_len && parses <= 2);
}

/* Decodes d[0..n) in pieces of at most piece bytes; the data goes to out
 * (cap n). Returns the final result; *used the bytes consumed. */
static ph_h1_result decode(const uint8_t *d, size_t n, size_t piece, uint8_t *out, size_t *out_len,
                           size_t *used, ph_h1_chunked *c)
{
    ph_h1_chunked_init(c);
    size_t pos = 0;
    *out_len = 0;
    ph_h1_result r = PH_H1_INCOMPLETE;
    while (pos < n) {
        size_t len = n - pos < piece ? n - pos : piece;
        ph_h1_chunk_step s;
        r = ph_h1_chunked_step(c, d + pos, len, &s);
        CHECK(s.consumed <= len);
        if (s.data_len > 0) {
            CHECK(s.data_off + s.data_len <= s.consumed);
            CHECK(*out_len + s.data_len <= n);
            memcpy(out + *out_len, d + pos + s.data_off, s.data_len);
            *out_len += s.data_len;
        }
        pos += s.consumed;
        if (r != PH_H1_INCOMPLETE)
            break;
        CHECK(s.consumed > 0);
    }
    *used = pos;
    return r;
}

static void check_chunked(const uint8_t *d, size_t n)
{
    uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
    CHECK(a != NULL && b != NULL);
    size_t alen, blen, aused, bused;
    ph_h1_chunked ca, cb;
    ph_h1_result ra = decode(d, n, n, a, &alen, &aused, &ca);
    ph_h1_result rb = decode(d, n, 1, b, &blen, &bused, &cb);
    CHECK(ra == rb && alen == blen && memcmp(a, b, alen) == 0 && aused == bused);
    CHECK(alen <= n && ca.total == alen);
    if (ra == PH_H1_REFUSED)
        CHECK(ca.reason == PH_REASON_HTTP_BAD_CHUNK && ca.message != NULL);
    if (ra == PH_H1_DONE) {
        /* After the end nothing more is consumed. */
        ph_h1_chunk_step s;
        CHECK(ph_h1_chunked_step(&ca, d, n, &s) == PH_H1_DONE && s.consumed == 0);
        /* Round trip: the data as one chunk decodes to the same bytes. */
        size_t cap = alen + 64;
        uint8_t *enc = malloc(cap), *dec = malloc(cap);
        CHECK(enc != NULL && dec != NULL);
        size_t e = 0;
        if (alen > 0) {
            e = (size_t)snprintf((char *)enc, cap, "%zx\r\n", alen);
            memcpy(enc + e, a, alen);
            e += alen;
            memcpy(enc + e, "\r\n", 2);
            e += 2;
        }
        memcpy(enc + e, "0\r\n\r\n", 5);
        e += 5;
        size_t dlen, dused;
        ph_h1_chunked cd;
        CHECK(decode(enc, e, e, dec, &dlen, &dused, &cd) == PH_H1_DONE);
        CHECK(dused == e && dlen == alen && memcmp(dec, a, alen) == 0);
        free(enc);
        free(dec);
    }
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (data[0] == 'q')
        check_head(true, false, data + 1, size - 1);
    else if (data[0] == 'r')
        check_head(false, data[1] & 1, data + 2, size - 2);
    else
        check_chunked(data + 1, size - 1);
    return 0;
}
