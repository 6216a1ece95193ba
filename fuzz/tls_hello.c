/* tls_hello.c - fuzzer for a tunnel's ClientHello reader
 * (proxy/src/tls_hello.c). The input is a tunnel's first bytes.
 * Invariants beyond "no crash":
 *   - a refusal is tls_malformed with a one-line message and an offset
 *     inside the input, and stays the same refusal when more bytes follow;
 *   - INCOMPLETE names a length past the input, and every prefix of an
 *     incomplete input is incomplete too;
 *   - DONE: the hello ends inside the input, a name is an ASCII DNS name of
 *     its stated length, the hello alone and with bytes after it read the
 *     same, every prefix (sampled) is incomplete, feeding it as a
 *     connection would (calling again only at `need`) gives the same
 *     answer, and the same message re-split into other records (2, and
 *     one per 512 bytes) gives the same name.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls_hello.h"
#include "tls_records.h"

/* Not assert(): the invariants must hold in release builds too. */
#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const ph_tls_hello *a, const ph_tls_hello *b)
{
    return a->has_sni == b->has_sni && a->has_ech == b->has_ech && a->sni_len == b->sni_len &&
           memcmp(a->sni, b->sni, sizeof a->sni) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    static ph_tls_hello h, k;
    ph_tls_result r = ph_tls_hello_parse(d, n, &h);
    CHECK(r == PH_TLS_INCOMPLETE || r == PH_TLS_DONE || r == PH_TLS_REFUSED);

    if (r == PH_TLS_REFUSED) {
        CHECK(h.reason == PH_REASON_TLS_MALFORMED);
        CHECK(h.message != NULL && strchr(h.message, '\n') == NULL);
        CHECK(h.error_offset <= n);
        uint8_t *more = malloc(n + 7);
        CHECK(more != NULL);
        memcpy(more, d, n);
        memcpy(more + n, "\x16\x03\x01\x00\x01\x01\x00", 7);
        CHECK(ph_tls_hello_parse(more, n + 7, &k) == PH_TLS_REFUSED);
        CHECK(k.message == h.message && k.error_offset == h.error_offset);
        free(more);
        return 0;
    }
    if (r == PH_TLS_INCOMPLETE) {
        CHECK(h.need > n);
        CHECK(ph_tls_hello_parse(d, n / 2, &k) == PH_TLS_INCOMPLETE);
        return 0;
    }

    CHECK(h.end >= 5 + 4 + 35 && h.end <= n);
    if (h.has_sni) {
        CHECK(h.sni_len > 0 && h.sni_len <= PH_TLS_NAME_MAX && strlen(h.sni) == h.sni_len);
        CHECK(h.sni[h.sni_len - 1] != '.');
    } else {
        CHECK(h.sni_len == 0 && h.sni[0] == '\0');
    }
    CHECK(ph_tls_hello_parse(d, h.end, &k) == PH_TLS_DONE && k.end == h.end && same(&h, &k));

    /* Every prefix (sampled) is incomplete. */
    size_t step = h.end > 64 ? h.end / 64 : 1;
    for (size_t p = 0; p < h.end; p += step)
        CHECK(ph_tls_hello_parse(d, p, &k) == PH_TLS_INCOMPLETE && k.need > p);

    /* As a connection feeds it: bytes arrive one at a time, the parser is
     * asked again only at `need`. */
    size_t need = 0;
    for (size_t got = 1; got <= h.end; got++) {
        if (got < need)
            continue;
        ph_tls_result s = ph_tls_hello_parse(d, got, &k);
        if (got < h.end) {
            CHECK(s == PH_TLS_INCOMPLETE);
            need = k.need;
        } else {
            CHECK(s == PH_TLS_DONE && same(&h, &k));
        }
    }

    /* The same message in other records reads the same. */
    uint8_t *msg = malloc(h.end), *re = malloc(h.end * 2 + 5 * 256);
    CHECK(msg != NULL && re != NULL);
    size_t m = ph_test_tls_message(d, h.end, msg);
    size_t pers[] = { m / 2 + 1, 512, PH_TLS_RECORD_MAX };
    for (size_t i = 0; i < sizeof pers / sizeof *pers; i++) {
        if ((m + pers[i] - 1) / pers[i] > PH_TLS_RECORDS_MAX)
            continue;
        size_t o = ph_test_tls_records(msg, m, 0, pers[i], re);
        CHECK(ph_tls_hello_parse(re, o, &k) == PH_TLS_DONE && k.end == o && same(&h, &k));
    }
    free(msg);
    free(re);
    return 0;
}
