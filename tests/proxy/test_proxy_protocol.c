/* test_proxy_protocol.c - the PROXY protocol v2 header reader
 * (proxy/src/proxy_protocol.c): headers as HAProxy and cloud balancers send
 * them (IPv4, IPv6, LOCAL, UNSPEC, with TLVs) read whole, cut at every
 * byte and with the connection's bytes after them; every length field off
 * by one either way refused; and each strict case of proxy_protocol.h. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy_protocol.h"
#include "test_support.h"

static const uint8_t SIG[12] = { 0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d,
                                 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a };

static ph_pp_header H;
static uint8_t B[PH_PP_HEADER_MAX + 64];

/* A header into B: version/command byte, family byte, then body[0..n);
 * the length field says n. Returns the header's length. */
static size_t v2(uint8_t ver_cmd, uint8_t fam, const uint8_t *body, size_t n)
{
    memcpy(B, SIG, 12);
    B[12] = ver_cmd;
    B[13] = fam;
    B[14] = (uint8_t)(n >> 8);
    B[15] = (uint8_t)n;
    memcpy(B + 16, body, n);
    return 16 + n;
}

/* The address block of TCP over IPv4: 203.0.113.7:51234 -> 127.0.0.1:3128. */
static size_t inet_block(uint8_t *o)
{
    inet_pton(AF_INET, "203.0.113.7", o);
    inet_pton(AF_INET, "127.0.0.1", o + 4);
    o[8] = 51234 >> 8, o[9] = 51234 & 0xff, o[10] = 3128 >> 8, o[11] = 3128 & 0xff;
    return 12;
}

static size_t inet6_block(uint8_t *o)
{
    inet_pton(AF_INET6, "2001:db8::7", o);
    inet_pton(AF_INET6, "::1", o + 16);
    o[32] = 51234 >> 8, o[33] = 51234 & 0xff, o[34] = 3128 >> 8, o[35] = 3128 & 0xff;
    return 36;
}

static size_t tlv(uint8_t *o, uint8_t type, const char *v)
{
    size_t n = strlen(v);
    o[0] = type;
    o[1] = (uint8_t)(n >> 8);
    o[2] = (uint8_t)n;
    memcpy(o + 3, v, n);
    return 3 + n;
}

static void client_is(const char *addr, unsigned port)
{
    char text[INET6_ADDRSTRLEN];
    assert_true(H.has_client);
    if (H.client.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&H.client;
        inet_ntop(AF_INET, &s4->sin_addr, text, sizeof text);
        assert_int_equal(ntohs(s4->sin_port), port);
        assert_int_equal(H.client_len, sizeof *s4);
    } else {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&H.client;
        assert_int_equal(H.client.ss_family, AF_INET6);
        inet_ntop(AF_INET6, &s6->sin6_addr, text, sizeof text);
        assert_int_equal(ntohs(s6->sin6_port), port);
        assert_int_equal(H.client_len, sizeof *s6);
    }
    assert_string_equal(text, addr);
}

/* B[0..n) is a whole header: read whole, with a request after it, and cut
 * at every byte (each prefix incomplete, needing more than it has, at
 * most the header's length). */
static void reads_whole_and_cut(size_t n)
{
    ph_pp_header whole;
    assert_int_equal(ph_pp_parse(B, n, &whole), PH_PP_DONE);
    assert_int_equal(whole.len, n);
    static const char req[] = "CONNECT ok.example:443 HTTP/1.1\r\n\r\n";
    memcpy(B + n, req, sizeof req - 1);
    assert_int_equal(ph_pp_parse(B, n + sizeof req - 1, &H), PH_PP_DONE);
    assert_int_equal(H.len, n);
    assert_memory_equal(&H.client, &whole.client, sizeof H.client);
    for (size_t cut = 0; cut < n; cut++) {
        assert_int_equal(ph_pp_parse(B, cut, &H), PH_PP_INCOMPLETE);
        assert_true(H.need > cut && H.need <= n);
    }
    H = whole;
}

static void balancers_headers_read_however_they_arrive(void **state)
{
    (void)state;
    uint8_t body[512];
    size_t n = inet_block(body);
    reads_whole_and_cut(v2(0x21, 0x11, body, n));
    assert_false(H.local);
    client_is("203.0.113.7", 51234);

    n = inet6_block(body);
    reads_whole_and_cut(v2(0x21, 0x21, body, n));
    client_is("2001:db8::7", 51234);

    /* HAProxy's TLVs (ALPN, authority, CRC32C, unique id, SSL), skipped. */
    n = inet_block(body);
    n += tlv(body + n, 0x01, "h2");
    n += tlv(body + n, 0x02, "ok.example");
    n += tlv(body + n, 0x04, "abcd");
    n += tlv(body + n, 0x05, "0123456789abcdef0123456789abcdef");
    n += tlv(body + n, 0x20, "");
    reads_whole_and_cut(v2(0x21, 0x11, body, n));
    client_is("203.0.113.7", 51234);

    /* LOCAL (a balancer's health check), with or without an address block:
     * no client; the connection's own source stands. */
    reads_whole_and_cut(v2(0x20, 0x00, body, 0));
    assert_true(H.local);
    assert_false(H.has_client);
    n = inet_block(body);
    reads_whole_and_cut(v2(0x20, 0x11, body, n));
    assert_true(H.local);
    assert_false(H.has_client);
    /* PROXY over UNSPEC: no client either. */
    reads_whole_and_cut(v2(0x21, 0x00, body, 0));
    assert_false(H.local);
    assert_false(H.has_client);
    /* The longest header accepted. */
    memset(body, 0, sizeof body);
    uint8_t big[PH_PP_HEADER_MAX];
    n = inet_block(big);
    size_t v = PH_PP_HEADER_MAX - 16 - n - 3;
    big[n] = 0x04, big[n + 1] = (uint8_t)(v >> 8), big[n + 2] = (uint8_t)v;
    memset(big + n + 3, 'x', v);
    reads_whole_and_cut(v2(0x21, 0x11, big, n + 3 + v));
    assert_int_equal(H.len, PH_PP_HEADER_MAX);
}

/* B[0..n) with the 16-bit field at off changed by delta. */
static ph_pp_result with_field(size_t n, size_t off, int delta, size_t extra)
{
    static uint8_t c[sizeof B];
    memcpy(c, B, n + extra);
    unsigned v = (unsigned)(c[off] << 8 | c[off + 1]);
    v = (unsigned)((int)v + delta);
    c[off] = (uint8_t)(v >> 8);
    c[off + 1] = (uint8_t)v;
    return ph_pp_parse(c, n + extra, &H);
}

static void every_length_off_by_one_is_refused(void **state)
{
    (void)state;
    uint8_t body[128];
    size_t n = inet_block(body);
    size_t t1 = n;
    n += tlv(body + n, 0x02, "ok.example");
    size_t t2 = n;
    n += tlv(body + n, 0x05, "id-1");
    size_t len = v2(0x21, 0x11, body, n);
    /* The connection's request after the header (what a balancer relays). */
    memcpy(B + len, "CONNECT a:1 HTTP/1.1\r\n\r\n", 25);
    assert_int_equal(ph_pp_parse(B, len + 25, &H), PH_PP_DONE);

    size_t fields[] = { 14, 16 + t1 + 1, 16 + t2 + 1 };
    for (size_t i = 0; i < 3; i++) {
        for (int delta = -1; delta <= 1; delta += 2) {
            ph_pp_result r = with_field(len, fields[i], delta, 25);
            if (r != PH_PP_REFUSED)
                fail_msg("length field at %zu off by %d: read as %d", fields[i], delta, (int)r);
            assert_int_equal(H.reason, PH_REASON_PROXY_PROTOCOL_MALFORMED);
        }
    }
    /* The address block's own minimum: 12 for IPv4, 36 for IPv6. */
    len = v2(0x21, 0x11, body, 11);
    assert_int_equal(ph_pp_parse(B, len, &H), PH_PP_REFUSED);
    assert_non_null(strstr(H.message, "shorter than its addresses"));
    n = inet6_block(body);
    len = v2(0x21, 0x21, body, 35);
    assert_int_equal(ph_pp_parse(B, len, &H), PH_PP_REFUSED);
    /* Exactly the block, then a lone byte or two of a TLV. */
    len = v2(0x21, 0x21, body, 36);
    assert_int_equal(ph_pp_parse(B, len, &H), PH_PP_DONE);
    for (size_t stub = 1; stub < 3; stub++) {
        len = v2(0x21, 0x21, body, 36 + stub);
        assert_int_equal(ph_pp_parse(B, len, &H), PH_PP_REFUSED);
        assert_non_null(strstr(H.message, "not a whole TLV"));
    }
    /* A length over the cap is refused as soon as the fixed part is in. */
    memcpy(B, SIG, 12);
    B[12] = 0x21, B[13] = 0x11;
    size_t over = PH_PP_HEADER_MAX - 16 + 1;
    B[14] = (uint8_t)(over >> 8), B[15] = (uint8_t)over;
    assert_int_equal(ph_pp_parse(B, 16, &H), PH_PP_REFUSED);
    assert_int_equal(H.error_offset, 14);
    B[15]--;
    assert_int_equal(ph_pp_parse(B, 16, &H), PH_PP_INCOMPLETE);
    assert_int_equal(H.need, PH_PP_HEADER_MAX);
}

static void refusal(const void *buf, size_t n, ph_reason reason, const char *msg, size_t off)
{
    assert_int_equal(ph_pp_parse(buf, n, &H), PH_PP_REFUSED);
    assert_int_equal(H.reason, reason);
    if (strstr(H.message, msg) == NULL)
        fail_msg("message '%s' lacks '%s'", H.message, msg);
    assert_int_equal(H.error_offset, off);
}

static void strict_cases(void **state)
{
    (void)state;
    uint8_t body[300] = { 0 };
    size_t n = inet_block(body);
    /* Not a PROXY header at all: the first byte that differs. */
    refusal("CONNECT a:1 HTTP/1.1\r\n", 22, PH_REASON_PROXY_PROTOCOL_MISSING, "not a PROXY", 0);
    refusal("\r\n\r\nX", 5, PH_REASON_PROXY_PROTOCOL_MISSING, "not a PROXY", 4);
    refusal("POST ", 5, PH_REASON_PROXY_PROTOCOL_MISSING, "not a PROXY", 0);
    /* Version 1's text form: refused, once its six bytes tell it from a POST. */
    assert_int_equal(ph_pp_parse((const uint8_t *)"P", 1, &H), PH_PP_INCOMPLETE);
    assert_int_equal(ph_pp_parse((const uint8_t *)"PROXY", 5, &H), PH_PP_INCOMPLETE);
    assert_int_equal(H.need, 6);
    static const char v1[] = "PROXY TCP4 203.0.113.7 127.0.0.1 51234 3128\r\n";
    refusal(v1, sizeof v1 - 1, PH_REASON_PROXY_PROTOCOL_MALFORMED, "version 1", 0);
    /* Version, command, family, transport. */
    size_t len = v2(0x11, 0x11, body, n);
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "version is not 2", 12);
    len = v2(0x31, 0x11, body, n);
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "version is not 2", 12);
    len = v2(0x22, 0x11, body, n);
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "command", 12);
    len = v2(0x21, 0x31, body, 216); /* AF_UNIX */
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "family", 13);
    len = v2(0x21, 0x12, body, n); /* UDP over IPv4 */
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "family", 13);
    len = v2(0x21, 0x10, body, n); /* IPv4, transport UNSPEC */
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "family", 13);
    len = v2(0x21, 0x01, body, 0); /* UNSPEC family, STREAM */
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "family", 13);
    len = v2(0x21, 0x41, body, n);
    refusal(B, len, PH_REASON_PROXY_PROTOCOL_MALFORMED, "family", 13);
    /* Each refused on its fixed part alone, before the rest arrives. */
    len = v2(0x11, 0x11, body, n);
    refusal(B, 16, PH_REASON_PROXY_PROTOCOL_MALFORMED, "version is not 2", 12);

    /* What a source not allowed to send a header is refused for. */
    len = v2(0x21, 0x11, body, n);
    assert_true(ph_pp_signature(B, 12));
    assert_false(ph_pp_signature(B, 11));
    assert_true(ph_pp_signature((const uint8_t *)v1, 6));
    assert_false(ph_pp_signature((const uint8_t *)"PROXY", 5));
    assert_false(ph_pp_signature((const uint8_t *)"POST / HTTP/1.1", 15));
    assert_false(ph_pp_signature((const uint8_t *)"CONNECT a:1 HTTP/1.1", 20));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(balancers_headers_read_however_they_arrive),
        cmocka_unit_test(every_length_off_by_one_is_refused),
        cmocka_unit_test(strict_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
