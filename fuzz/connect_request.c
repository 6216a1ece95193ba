/* connect_request.c - fuzzer for the proxy's CONNECT request-head parser
 * (proxy/src/request_parse.c). Invariants beyond "no crash":
 *   - a verdict is one of the three results; a refusal has one of the two
 *     documented reasons and a message;
 *   - DONE: the head is within the input and 8 KiB, ends in CRLF CRLF,
 *     starts with "CONNECT ", and its spans lie inside it;
 *   - the parser never looks past the head: parsing exactly the head gives
 *     the same spans;
 *   - prefix-closed: a prefix of an incomplete input is incomplete;
 *   - fed a byte at a time with ph_h1_head_scan deciding when to parse, a
 *     complete head is found the same, with at most two parses;
 *   - round trip: a canonical request rebuilt from the spans parses to the
 *     same target and credentials.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http1.h"
#include "proxy_request.h"

/* Not assert(): the invariants must hold in release builds too. */
#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ph_proxy_request r;
    ph_preq_result res = ph_proxy_request_parse(data, size, &r);
    CHECK(res == PH_PREQ_INCOMPLETE || res == PH_PREQ_DONE || res == PH_PREQ_REFUSED);

    if (res == PH_PREQ_REFUSED) {
        CHECK(r.reason == PH_REASON_PARSE_ERROR || r.reason == PH_REASON_HTTP_HEAD_TOO_LARGE);
        CHECK(r.message != NULL && strchr(r.message, '\n') == NULL);
        return 0;
    }
    if (res == PH_PREQ_INCOMPLETE) {
        CHECK(size < PH_PREQ_HEAD_MAX);
        ph_proxy_request p;
        CHECK(ph_proxy_request_parse(data, size / 2, &p) == PH_PREQ_INCOMPLETE);
        return 0;
    }

    CHECK(r.head_len >= 4 && r.head_len <= size && r.head_len <= PH_PREQ_HEAD_MAX);
    CHECK(memcmp(data + r.head_len - 4, "\r\n\r\n", 4) == 0);
    CHECK(memcmp(data, "CONNECT ", 8) == 0);
    CHECK(r.target.len > 0 && r.target.len <= PH_PREQ_TARGET_MAX);
    CHECK(r.target.off + r.target.len <= r.head_len);
    for (size_t i = 0; i < r.target.len; i++)
        CHECK(data[r.target.off + i] > 0x20 && data[r.target.off + i] < 0x7f);
    if (r.has_authorization)
        CHECK(r.authorization.off + r.authorization.len <= r.head_len);

    ph_proxy_request h;
    CHECK(ph_proxy_request_parse(data, r.head_len, &h) == PH_PREQ_DONE);
    CHECK(h.head_len == r.head_len && h.target.off == r.target.off &&
           h.target.len == r.target.len && h.has_authorization == r.has_authorization);

    /* Fed a byte at a time and parsed only when ph_h1_head_scan says so (as
     * tunnel.c does): the same head, found with at most two parses. */
    size_t mark = 0;
    unsigned parses = 0;
    ph_preq_result fr = PH_PREQ_INCOMPLETE;
    ph_proxy_request f;
    for (size_t i = 1; i <= r.head_len && fr == PH_PREQ_INCOMPLETE; i++)
        if (ph_h1_head_scan(data, i, &mark) || i >= PH_PREQ_HEAD_MAX) {
            parses++;
            fr = ph_proxy_request_parse(data, i, &f);
        }
    CHECK(fr == PH_PREQ_DONE && f.head_len == r.head_len && parses <= 2);

    /* Round trip through the canonical form. */
    size_t cap = r.target.len + r.authorization.len + 64;
    uint8_t *c = malloc(cap);
    CHECK(c != NULL);
    size_t n = 0;
    memcpy(c + n, "CONNECT ", 8), n += 8;
    memcpy(c + n, data + r.target.off, r.target.len), n += r.target.len;
    memcpy(c + n, " HTTP/1.1\r\n", 11), n += 11;
    if (r.has_authorization) {
        memcpy(c + n, "Proxy-Authorization: ", 21), n += 21;
        memcpy(c + n, data + r.authorization.off, r.authorization.len), n += r.authorization.len;
        memcpy(c + n, "\r\n", 2), n += 2;
    }
    memcpy(c + n, "\r\n", 2), n += 2;
    ph_proxy_request k;
    ph_preq_result kr = ph_proxy_request_parse(c, n, &k);
    if (n <= PH_PREQ_HEAD_MAX) {
        CHECK(kr == PH_PREQ_DONE && k.head_len == n);
        CHECK(k.target.len == r.target.len &&
               memcmp(c + k.target.off, data + r.target.off, r.target.len) == 0);
        CHECK(k.has_authorization == r.has_authorization &&
               k.authorization.len == r.authorization.len &&
               memcmp(c + k.authorization.off, data + r.authorization.off, r.authorization.len) == 0);
    }
    free(c);
    return 0;
}
