/* test_tls_hello.c - a tunnel's ClientHello reader over the hellos real
 * clients on this machine sent (fuzz/corpus/tls_hello/, captured by
 * scripts/capture_client_hellos.py): each read whole, cut at every byte,
 * fed a byte at a time, re-split over 2 records and padded past one record
 * (as post-quantum hellos are) gives the same name; and the strict cases,
 * each refused (or read) as tls_hello.h says. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tls_hello.h"
#include "tls_records.h"

#define NAME "allowed.test"

static const char *const captured[] = { "curl", "curl_tls12", "openssl", "python_ssl", "node" };

static ph_tls_hello H;

static uint8_t *load(const char *client, size_t *len)
{
    char rel[128];
    snprintf(rel, sizeof rel, "fuzz/corpus/tls_hello/%s.hello", client);
    uint8_t *d = (uint8_t *)ph_test_read_file(ph_test_source_path(rel), len);
    assert_non_null(d);
    return d;
}

static void assert_name(const uint8_t *d, size_t n, const char *name)
{
    ph_tls_result r = ph_tls_hello_parse(d, n, &H);
    if (r != PH_TLS_DONE)
        fprintf(stderr, "result %d: %s at %zu\n", r, H.message ? H.message : "", H.error_offset);
    assert_int_equal(r, PH_TLS_DONE);
    assert_int_equal(H.end, n);
    assert_true(H.has_sni);
    assert_string_equal(H.sni, name);
}

static void real_hellos_read_the_same_however_they_arrive(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof captured / sizeof *captured; c++) {
        size_t n;
        uint8_t *d = load(captured[c], &n);
        assert_name(d, n, NAME);
        /* Every cut: the bytes so far are incomplete, never refused. */
        for (size_t p = 0; p < n; p++) {
            assert_int_equal(ph_tls_hello_parse(d, p, &H), PH_TLS_INCOMPLETE);
            assert_true(H.need > p && H.need <= n);
        }
        /* One byte at a time, asked again only at `need`: the same name,
         * and the parser ran once per record header and record. */
        size_t need = 0, calls = 0;
        for (size_t got = 1; got <= n; got++) {
            if (got < need)
                continue;
            calls++;
            if (ph_tls_hello_parse(d, got, &H) == PH_TLS_INCOMPLETE)
                need = H.need;
        }
        assert_string_equal(H.sni, NAME);
        assert_true(calls <= 2 * 2);
        /* The message over 2 records, cut at every byte. */
        uint8_t *msg = malloc(n), *re = malloc(n + 10);
        assert_true(msg != NULL && re != NULL);
        size_t m = ph_test_tls_message(d, n, msg);
        for (size_t cut = 1; cut < m; cut++) {
            size_t o = ph_test_tls_records(msg, m, cut, PH_TLS_RECORD_MAX, re);
            assert_int_equal(o, m + 10);
            assert_name(re, o, NAME);
            /* and the second record's bytes cut at a few points */
            for (size_t p = 5 + cut; p < o; p += 97)
                assert_int_equal(ph_tls_hello_parse(re, p, &H), PH_TLS_INCOMPLETE);
        }
        printf("%s: %zu bytes, read whole, at %zu cuts, in %zu calls a byte at a time, over 2 "
               "records cut at %zu places\n",
               captured[c], n, n, calls, m - 1);
        free(msg);
        free(re);
        free(d);
    }
}

/* ---- hellos built by hand ------------------------------------------------ */

typedef struct buf {
    uint8_t b[70000];
    size_t n;
} buf;

static void put(buf *b, const void *p, size_t n)
{
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void u8(buf *b, unsigned v) { b->b[b->n++] = (uint8_t)v; }
static void u16(buf *b, unsigned v)
{
    u8(b, v >> 8);
    u8(b, v & 0xff);
}

/* An extension of type t holding p[0..n). */
static void ext(buf *b, unsigned t, const void *p, size_t n)
{
    u16(b, t);
    u16(b, (unsigned)n);
    put(b, p, n);
}

/* A server_name extension with one name. */
static void sni(buf *b, const char *name)
{
    b->n += ph_test_tls_sni_ext(name, b->b + b->n);
}

/* A ClientHello message around the extension block exts (NULL: none),
 * wrapped in one record (or more when it is over 2^14). */
static size_t hello(const buf *exts, uint8_t *out)
{
    static uint8_t m[sizeof(buf) + 64];
    size_t n = ph_test_tls_hello_message(exts ? exts->b : NULL, exts ? exts->n : 0,
                                         exts != NULL, m);
    return ph_test_tls_records(m, n, 0, PH_TLS_RECORD_MAX, out);
}

static uint8_t OUT[80000];

static void assert_refused(const buf *exts, const char *what)
{
    size_t n = hello(exts, OUT);
    ph_tls_result r = ph_tls_hello_parse(OUT, n, &H);
    if (r != PH_TLS_REFUSED)
        fprintf(stderr, "%s: not refused (%d)\n", what, r);
    assert_int_equal(r, PH_TLS_REFUSED);
    assert_int_equal(H.reason, PH_REASON_TLS_MALFORMED);
    assert_string_equal(ph_reason_code(H.reason), "tls_malformed");
    assert_int_equal(ph_reason_http_status(H.reason), 400);
    assert_true(H.error_offset <= n);
    if (strstr(H.message, what) == NULL)
        fprintf(stderr, "wanted \"%s\", got \"%s\"\n", what, H.message);
    assert_non_null(strstr(H.message, what));
}

static void strict_cases(void **state)
{
    (void)state;
    static buf e;
    size_t n;

    /* Accepted: a name, in any case as sent (the caller compares). */
    e.n = 0;
    sni(&e, "Allowed.TEST");
    n = hello(&e, OUT);
    assert_name(OUT, n, "Allowed.TEST");
    assert_false(H.has_ech);

    /* No extensions, or none naming a server: read, no name. */
    n = hello(NULL, OUT);
    assert_int_equal(ph_tls_hello_parse(OUT, n, &H), PH_TLS_DONE);
    assert_false(H.has_sni);
    e.n = 0;
    ext(&e, 0x002b, "\x02\x03\x04", 3);
    n = hello(&e, OUT);
    assert_int_equal(ph_tls_hello_parse(OUT, n, &H), PH_TLS_DONE);
    assert_false(H.has_sni);

    /* ECH (RFC 9849's codepoint, a draft's, ESNI's): the outer name is the
     * one read, and has_ech says another may be encrypted. */
    static const unsigned ech_types[] = { 0xfe0d, 0xfe08, 0xfe0c, 0xffce };
    for (size_t i = 0; i < sizeof ech_types / sizeof *ech_types; i++) {
        e.n = 0;
        sni(&e, "public.cdn.test");
        ext(&e, ech_types[i], "\x00\x00\x01\x00\x01\x00", 6);
        n = hello(&e, OUT);
        assert_name(OUT, n, "public.cdn.test");
        assert_true(H.has_ech);
    }
    e.n = 0; /* a neighbour of those is another extension */
    sni(&e, "public.cdn.test");
    ext(&e, 0xfe07, "\x00", 1);
    n = hello(&e, OUT);
    assert_name(OUT, n, "public.cdn.test");
    assert_false(H.has_ech);

    /* Padded past one record (a post-quantum key share's size). */
    e.n = 0;
    static uint8_t pad[20000];
    ext(&e, 0x0015, pad, sizeof pad);
    sni(&e, NAME);
    n = hello(&e, OUT);
    assert_true(n > PH_TLS_RECORD_MAX + 10);
    assert_name(OUT, n, NAME);

    e.n = 0;
    sni(&e, NAME);
    sni(&e, "evil.test");
    assert_refused(&e, "present twice");

    /* Every type once, in whichever part of the 16-bit space: types that
     * share their low byte are distinct (read), any type twice is refused,
     * however far apart the two are. */
    static const unsigned types[] = { 0x0010, 0x0110, 0x1010, 0xff10, 0x00ff, 0xffff, 0x0a0a,
                                      0xfafa, 0xfe0d, 0xff01, 0x4469, 0x8000 };
    const size_t nt = sizeof types / sizeof *types;
    e.n = 0;
    sni(&e, NAME);
    for (size_t i = 0; i < nt; i++)
        ext(&e, types[i], "", 0);
    n = hello(&e, OUT);
    assert_name(OUT, n, NAME);
    for (size_t dup = 0; dup < nt; dup++) {
        e.n = 0;
        for (size_t i = 0; i < nt; i++)
            ext(&e, types[i], "", 0);
        sni(&e, NAME);
        ext(&e, types[dup], "", 0);
        assert_refused(&e, "present twice");
    }

    e.n = 0; /* two names in one list */
    u16(&e, 0);
    u16(&e, 2 + 2 * (3 + 4));
    u16(&e, 2 * (3 + 4));
    u8(&e, 0);
    u16(&e, 4);
    put(&e, "a.te", 4);
    u8(&e, 0);
    u16(&e, 4);
    put(&e, "b.te", 4);
    assert_refused(&e, "several server names");

    const char *bad_names[] = { "allowed.test.", ".allowed.test", "a..test", "all owed.test",
                                "allowed.test\x01", "\xc3\xa9.test", "10.0.0.1:443" };
    for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; i++) {
        e.n = 0;
        sni(&e, bad_names[i]);
        assert_refused(&e, "not an ASCII DNS name");
    }
    char longlabel[80];
    memset(longlabel, 'a', 64);
    strcpy(longlabel + 64, ".test");
    e.n = 0;
    sni(&e, longlabel);
    assert_refused(&e, "not an ASCII DNS name");

    e.n = 0; /* name type other than host_name */
    u16(&e, 0);
    u16(&e, 2 + 3 + 4);
    u16(&e, 3 + 4);
    u8(&e, 1);
    u16(&e, 4);
    put(&e, "a.te", 4);
    assert_refused(&e, "not host_name");

    e.n = 0; /* the list longer than its extension */
    u16(&e, 0);
    u16(&e, 9);
    u16(&e, 8);
    u8(&e, 0);
    u16(&e, 4);
    put(&e, "a.te", 4);
    assert_refused(&e, "server_name list length");

    e.n = 0; /* an extension longer than its block */
    u16(&e, 0x002b);
    u16(&e, 9);
    put(&e, "\x02\x03\x04", 3);
    assert_refused(&e, "extension length exceeds");

    /* Records: not a handshake, empty, over 2^14, an alert between. */
    e.n = 0;
    sni(&e, NAME);
    n = hello(&e, OUT);
    OUT[0] = 0x17;
    assert_int_equal(ph_tls_hello_parse(OUT, n, &H), PH_TLS_REFUSED);
    OUT[0] = 0x16;
    OUT[3] = 0x40;
    OUT[4] = 0x01;
    assert_int_equal(ph_tls_hello_parse(OUT, n, &H), PH_TLS_REFUSED);
    assert_non_null(strstr(H.message, "record length"));
    static const uint8_t empty[] = { 0x16, 3, 1, 0, 0 };
    assert_int_equal(ph_tls_hello_parse(empty, sizeof empty, &H), PH_TLS_REFUSED);
    /* An SSLv2-style hello is not a TLS record. */
    static const uint8_t v2[] = { 0x80, 0x2e, 0x01, 0x00, 0x02, 0x00 };
    assert_int_equal(ph_tls_hello_parse(v2, sizeof v2, &H), PH_TLS_REFUSED);
    /* A hello whose record also holds another message's bytes. */
    n = hello(&e, OUT);
    OUT[4]++;
    OUT[n] = 0;
    assert_int_equal(ph_tls_hello_parse(OUT, n + 1, &H), PH_TLS_REFUSED);
    assert_non_null(strstr(H.message, "another message"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(real_hellos_read_the_same_however_they_arrive),
        cmocka_unit_test(strict_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
