/* proxy_protocol.c - fuzzer for the PROXY protocol v2 header reader
 * (proxy/src/proxy_protocol.c). The input is a connection's first bytes.
 * Invariants beyond "no crash":
 *   - a refusal is proxy_protocol_missing or _malformed with a one-line
 *     message and an offset inside the input, and stays the same refusal
 *     when more bytes follow;
 *   - INCOMPLETE names a length past the input (at most PH_PP_HEADER_MAX),
 *     and every prefix of an incomplete input is incomplete too;
 *   - DONE: the header ends inside the input, within PH_PP_HEADER_MAX, and
 *     its length is the one its fixed part states; the header alone and
 *     with bytes after it read the same; every prefix is incomplete;
 *     feeding it a byte at a time, asking again only at `need`, gives the
 *     same answer; a client address is AF_INET or AF_INET6 and the one the
 *     bytes hold, and only a PROXY command over INET/INET6 has one.
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_protocol.h"

/* Not assert(): the invariants must hold in release builds too. */
#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const ph_pp_header *a, const ph_pp_header *b)
{
    return a->len == b->len && a->local == b->local && a->has_client == b->has_client &&
           a->client_len == b->client_len && memcmp(&a->client, &b->client, a->client_len) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static ph_pp_header h, k;
    ph_pp_result r = ph_pp_parse(d, n, &h);
    CHECK(r == PH_PP_INCOMPLETE || r == PH_PP_DONE || r == PH_PP_REFUSED);

    if (r == PH_PP_REFUSED) {
        CHECK(h.reason == PH_REASON_PROXY_PROTOCOL_MISSING ||
              h.reason == PH_REASON_PROXY_PROTOCOL_MALFORMED);
        CHECK(h.message != NULL && strchr(h.message, '\n') == NULL);
        CHECK(h.error_offset <= n);
        uint8_t *more = malloc(n + 4);
        CHECK(more != NULL);
        memcpy(more, d, n);
        memcpy(more + n, "\x21\x11\x00\x0c", 4);
        CHECK(ph_pp_parse(more, n + 4, &k) == PH_PP_REFUSED);
        CHECK(k.reason == h.reason && k.message == h.message && k.error_offset == h.error_offset);
        free(more);
        return 0;
    }
    if (r == PH_PP_INCOMPLETE) {
        CHECK(h.need > n && h.need <= PH_PP_HEADER_MAX);
        CHECK(ph_pp_parse(d, n / 2, &k) == PH_PP_INCOMPLETE);
        return 0;
    }

    CHECK(h.len >= PH_PP_FIXED_LEN && h.len <= n && h.len <= PH_PP_HEADER_MAX);
    CHECK(h.len == PH_PP_FIXED_LEN + ((size_t)d[14] << 8 | d[15]));
    CHECK(ph_pp_signature(d, n));
    CHECK(ph_pp_parse(d, h.len, &k) == PH_PP_DONE && same(&h, &k));
    if (h.has_client) {
        CHECK(!h.local && (d[12] & 0x0f) == 1);
        if (h.client.ss_family == AF_INET) {
            const struct sockaddr_in *s4 = (const struct sockaddr_in *)&h.client;
            CHECK(d[13] == 0x11 && h.client_len == sizeof *s4);
            CHECK(memcmp(&s4->sin_addr, d + 16, 4) == 0 && memcmp(&s4->sin_port, d + 24, 2) == 0);
        } else {
            const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&h.client;
            CHECK(h.client.ss_family == AF_INET6 && d[13] == 0x21);
            CHECK(h.client_len == sizeof *s6);
            CHECK(memcmp(&s6->sin6_addr, d + 16, 16) == 0 &&
                  memcmp(&s6->sin6_port, d + 48, 2) == 0);
        }
    } else {
        CHECK(h.local || d[13] == 0x00);
    }

    for (size_t p = 0; p < h.len; p++)
        CHECK(ph_pp_parse(d, p, &k) == PH_PP_INCOMPLETE && k.need > p);

    size_t need = 0;
    for (size_t got = 1; got <= h.len; got++) {
        if (got < need)
            continue;
        ph_pp_result s = ph_pp_parse(d, got, &k);
        if (got < h.len) {
            CHECK(s == PH_PP_INCOMPLETE);
            need = k.need;
        } else {
            CHECK(s == PH_PP_DONE && same(&h, &k));
        }
    }
    return 0;
}
