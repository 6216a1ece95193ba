/* test_request_parse.c - the strict CONNECT request-head parser: what it
 * accepts, each refusal's HTTP status, limits, and incremental input. */
#include <stdio.h>
#include <string.h>

#include "http1.h"
#include "proxy_request.h"
#include "test_support.h"

static ph_preq_result parse(const char *s, ph_proxy_request *r)
{
    return ph_proxy_request_parse((const uint8_t *)s, strlen(s), r);
}

/* Refused for reason, which the guard's one table answers with status. */
static void assert_refused(const char *s, ph_reason reason, int status)
{
    ph_proxy_request r;
    ph_preq_result res = parse(s, &r);
    if (res != PH_PREQ_REFUSED || r.reason != reason)
        fprintf(stderr, "input: %s\n", s);
    assert_int_equal(res, PH_PREQ_REFUSED);
    assert_int_equal(r.reason, reason);
    assert_int_equal(ph_reason_http_status(r.reason), status);
    assert_non_null(r.message);
}

static void test_minimal_connect_is_accepted(void **state)
{
    (void)state;
    const char *s = "CONNECT api.github.com:443 HTTP/1.1\r\n\r\n";
    ph_proxy_request r;
    assert_int_equal(parse(s, &r), PH_PREQ_DONE);
    assert_int_equal(r.head_len, strlen(s));
    assert_int_equal(r.target.len, strlen("api.github.com:443"));
    assert_memory_equal(s + r.target.off, "api.github.com:443", r.target.len);
    assert_int_equal(r.has_authorization, 0);
}

/* What Python's http.client (pip, urllib3, requests) sends. */
static void test_http_1_0_connect_is_accepted(void **state)
{
    (void)state;
    const char *s = "CONNECT pypi.org:443 HTTP/1.0\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\r\n";
    ph_proxy_request r;
    assert_int_equal(parse(s, &r), PH_PREQ_DONE);
    assert_int_equal(r.head_len, strlen(s));
    assert_memory_equal(s + r.target.off, "pypi.org:443", r.target.len);
    assert_int_equal(r.has_authorization, 1);
}

static void test_authorization_is_extracted_and_trimmed(void **state)
{
    (void)state;
    const char *s = "CONNECT a.example.com:443 HTTP/1.1\r\nHost: a.example.com:443\r\n"
                    "proxy-AUTHORIZATION: \t Basic Zm9vOmJhcg== \t\r\nUser-Agent: x\r\n\r\nTLS";
    ph_proxy_request r;
    assert_int_equal(parse(s, &r), PH_PREQ_DONE);
    assert_int_equal(r.has_authorization, 1);
    assert_int_equal(r.authorization.len, strlen("Basic Zm9vOmJhcg=="));
    assert_memory_equal(s + r.authorization.off, "Basic Zm9vOmJhcg==", r.authorization.len);
    /* Bytes after the head are left alone. */
    assert_int_equal(r.head_len, strlen(s) - 3);
}

static void test_every_prefix_is_incomplete(void **state)
{
    (void)state;
    const char *s = "CONNECT a.example.com:443 HTTP/1.1\r\nProxy-Authorization: Bearer t\r\n\r\n";
    ph_proxy_request r;
    for (size_t n = 0; n < strlen(s); n++)
        assert_int_equal(ph_proxy_request_parse((const uint8_t *)s, n, &r), PH_PREQ_INCOMPLETE);
    assert_int_equal(ph_proxy_request_parse((const uint8_t *)s, strlen(s), &r), PH_PREQ_DONE);
}

/* pinhole-proxy forwards these (forward.c) before this parser sees them. */
static void test_other_methods_are_refused(void **state)
{
    (void)state;
    assert_refused("GET / HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("POST /x HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("connect a.example.com:443 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400); /* case-sensitive */
    assert_refused("OPTIONS * HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
}

static void test_absolute_form_is_refused(void **state)
{
    (void)state;
    assert_refused("GET http://example.com/ HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("POST https://example.com/x HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    /* The refusal comes with the request line: no need to wait for the head. */
    assert_refused("GET http://example.com/ HTTP/1.1\r\nHost: x", PH_REASON_PARSE_ERROR, 400);
}

static void test_malformed_is_400(void **state)
{
    (void)state;
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\n\n", PH_REASON_PARSE_ERROR, 400);           /* bare LF */
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\n\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT  a.example.com:443 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);      /* double SP */
    assert_refused("CONNECT a.example.com:443  HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/1.2\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/0.9\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 http/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/2.0\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nX : y\r\n\r\n", PH_REASON_PARSE_ERROR, 400);  /* SP before ':' */
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nX: y\r\n z\r\n\r\n", PH_REASON_PARSE_ERROR, 400); /* obs-fold */
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nNoColon\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nProxy-Authorization: a\r\n"
                   "Proxy-Authorization: b\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("\x16\x03\x01\x02\x00\x01", PH_REASON_PARSE_ERROR, 400); /* a TLS ClientHello, at once */
}

static void test_control_bytes_are_400(void **state)
{
    (void)state;
    const char s[] = "CONNECT a.example.com:443 HTTP/1.1\r\nX: a\0b\r\n\r\n";
    ph_proxy_request r;
    assert_int_equal(ph_proxy_request_parse((const uint8_t *)s, sizeof s - 1, &r), PH_PREQ_REFUSED);
    assert_int_equal(r.reason, PH_REASON_PARSE_ERROR);
    assert_int_equal(r.error_offset, strlen("CONNECT a.example.com:443 HTTP/1.1\r\nX: a"));
    assert_refused("CONNECT a.example.com:443 HTTP/1.1\r\nX: a\x7f\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
    assert_refused("CONNECT a.exam\x01ple.com:443 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR, 400);
}

static void test_head_over_8k_is_431(void **state)
{
    (void)state;
    static char big[PH_PREQ_HEAD_MAX + 100];
    int n = snprintf(big, sizeof big, "CONNECT a.example.com:443 HTTP/1.1\r\nX: ");
    memset(big + n, 'a', sizeof big - (size_t)n - 1);
    big[sizeof big - 1] = '\0';
    ph_proxy_request r;
    /* Still incomplete just below the limit, 431 at it. */
    assert_int_equal(ph_proxy_request_parse((const uint8_t *)big, PH_PREQ_HEAD_MAX - 1, &r),
                     PH_PREQ_INCOMPLETE);
    assert_int_equal(ph_proxy_request_parse((const uint8_t *)big, PH_PREQ_HEAD_MAX, &r),
                     PH_PREQ_REFUSED);
    assert_int_equal(r.reason, PH_REASON_HTTP_HEAD_TOO_LARGE);
}

static void test_head_of_exactly_8k_is_accepted(void **state)
{
    (void)state;
    static char buf[PH_PREQ_HEAD_MAX + 1];
    int n = snprintf(buf, sizeof buf, "CONNECT a.example.com:443 HTTP/1.1\r\nX: ");
    size_t fill = PH_PREQ_HEAD_MAX - (size_t)n - 4;
    memset(buf + n, 'a', fill);
    memcpy(buf + n + fill, "\r\n\r\n", 4);
    ph_proxy_request r;
    assert_int_equal(ph_proxy_request_parse((const uint8_t *)buf, PH_PREQ_HEAD_MAX, &r),
                     PH_PREQ_DONE);
    assert_int_equal(r.head_len, PH_PREQ_HEAD_MAX);
}

static void test_too_many_fields_is_431(void **state)
{
    (void)state;
    static char buf[4096];
    size_t n = (size_t)snprintf(buf, sizeof buf, "CONNECT a.example.com:443 HTTP/1.1\r\n");
    for (int i = 0; i <= PH_PREQ_FIELDS_MAX; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "X%d: y\r\n", i);
    snprintf(buf + n, sizeof buf - n, "\r\n");
    assert_refused(buf, PH_REASON_HTTP_HEAD_TOO_LARGE, 431);
}

static void test_target_is_passed_raw(void **state)
{
    (void)state;
    /* The parser does not judge destinations: the guard does. */
    ph_proxy_request r;
    assert_int_equal(parse("CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n", &r), PH_PREQ_DONE);
    assert_int_equal(parse("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", &r), PH_PREQ_DONE);
    const char *x = "CONNECT x HTTP/1.1\r\n\r\n";
    assert_int_equal(parse(x, &r), PH_PREQ_DONE);
    assert_memory_equal("x", &x[r.target.off], 1);
}

/* A head fed to the parser as tunnel.c feeds one arriving in pieces, here a
 * byte at a time: parsed only when ph_h1_head_scan says so (or at the cap). */
typedef struct fed {
    ph_preq_result res;
    ph_proxy_request r;
    unsigned parses;
    size_t at; /* bytes fed when it ended */
} fed;

static fed feed_bytewise(const uint8_t *s, size_t len)
{
    fed f = { .res = PH_PREQ_INCOMPLETE };
    size_t mark = 0;
    for (size_t n = 1; n <= len && f.res == PH_PREQ_INCOMPLETE; n++) {
        if (ph_h1_head_scan(s, n, &mark) || n >= PH_PREQ_HEAD_MAX) {
            f.parses++;
            f.res = ph_proxy_request_parse(s, n, &f.r);
            f.at = n;
        }
    }
    return f;
}

/* Re-parsing from byte 0 on every piece made a head sent a byte at a time
 * cost time quadratic in its size (a CPU DoS from one tenant): it is now
 * parsed at its first line's end and at its end, whatever its size. */
static void test_slow_head_is_parsed_twice_not_per_byte(void **state)
{
    (void)state;
    static char buf[PH_PREQ_HEAD_MAX + 1];
    int n = snprintf(buf, sizeof buf, "CONNECT a.example.com:443 HTTP/1.1\r\nX: ");
    size_t fill = PH_PREQ_HEAD_MAX - 200 - (size_t)n - 4;
    memset(buf + n, 'a', fill);
    memcpy(buf + n + fill, "\r\n\r\n", 4);
    size_t len = (size_t)n + fill + 4;
    fed f = feed_bytewise((const uint8_t *)buf, len);
    assert_int_equal(f.res, PH_PREQ_DONE);
    assert_int_equal(f.r.head_len, len);
    assert_int_equal(f.parses, 2);

    /* Many short fields: still two parses, the end found with the CRLF
     * CRLF split across pieces. */
    size_t m = (size_t)snprintf(buf, sizeof buf, "CONNECT a.example.com:443 HTTP/1.1\r\n");
    for (int i = 0; i < PH_PREQ_FIELDS_MAX; i++)
        m += (size_t)snprintf(buf + m, sizeof buf - m, "X-Field-%02d: %0100d\r\n", i, i);
    m += (size_t)snprintf(buf + m, sizeof buf - m, "\r\n");
    assert_true(m < PH_PREQ_HEAD_MAX);
    f = feed_bytewise((const uint8_t *)buf, m);
    assert_int_equal(f.res, PH_PREQ_DONE);
    assert_int_equal(f.r.head_len, m);
    assert_int_equal(f.parses, 2);

    /* No end: refused at the cap, after the first line's parse and that. */
    memset(buf + n, 'a', sizeof buf - (size_t)n);
    f = feed_bytewise((const uint8_t *)buf, sizeof buf);
    assert_int_equal(f.res, PH_PREQ_REFUSED);
    assert_int_equal(f.r.reason, PH_REASON_HTTP_HEAD_TOO_LARGE);
    assert_int_equal(f.at, PH_PREQ_HEAD_MAX);
    assert_int_equal(f.parses, 2);
}

/* Fed a byte at a time, a complete head ends as when parsed whole (same
 * result, reason and offset); a byte every parser refuses, and a bad
 * request line, are refused as soon as they arrive. */
static void test_pieces_end_as_the_whole(void **state)
{
    (void)state;
    static const char *const heads[] = {
        "CONNECT a.example.com:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.example.com:443 HTTP/1.0\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\r\nTLS",
        "CONNECT a.example.com:443 HTTP/1.1\n\n",
        "CONNECT a.example.com:443 HTTP/1.1\r\n\n",
        "CONNECT a.example.com:443 HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "CONNECT  a.example.com:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.example.com:443 HTTP/2.0\r\n\r\n",
        "CONNECT a.example.com:443 HTTP/1.1\r\nX : y\r\n\r\n",
        "CONNECT a.example.com:443 HTTP/1.1\r\nX: y\r\n z\r\n\r\n",
        "CONNECT a.example.com:443 HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
        "CONNECT a.example.com:443 HTTP/1.1\r\nX: a\x7f\r\n\r\n",
        "CONNECT a.exam\x01ple.com:443 HTTP/1.1\r\n\r\n",
        "\r\n\r\n",
        "GET / HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof heads / sizeof *heads; i++) {
        const uint8_t *h = (const uint8_t *)heads[i];
        size_t len = strlen(heads[i]);
        ph_proxy_request whole;
        ph_preq_result res = ph_proxy_request_parse(h, len, &whole);
        fed f = feed_bytewise(h, len);
        if (f.res != res)
            fprintf(stderr, "input %zu: %s\n", i, heads[i]);
        assert_int_equal(f.res, res);
        if (res == PH_PREQ_DONE) {
            assert_int_equal(f.r.head_len, whole.head_len);
            assert_int_equal(f.r.target.off, whole.target.off);
            assert_int_equal(f.r.authorization.len, whole.authorization.len);
        } else {
            assert_int_equal(f.r.reason, whole.reason);
            assert_int_equal(f.r.error_offset, whole.error_offset);
        }
        assert_true(f.parses <= 2);
    }
    /* A TLS ClientHello: refused at its first byte. */
    fed f = feed_bytewise((const uint8_t *)"\x16\x03\x01\x02\x00\x01", 6);
    assert_int_equal(f.res, PH_PREQ_REFUSED);
    assert_int_equal(f.at, 1);
    /* A bad request line: refused at its end, before any field. */
    const char *bad = "CONNECT a.example.com:443 HTTP/1.2\r\nX: y\r\n";
    f = feed_bytewise((const uint8_t *)bad, strlen(bad));
    assert_int_equal(f.res, PH_PREQ_REFUSED);
    assert_int_equal(f.at, strlen("CONNECT a.example.com:443 HTTP/1.2\r\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minimal_connect_is_accepted),
        cmocka_unit_test(test_http_1_0_connect_is_accepted),
        cmocka_unit_test(test_authorization_is_extracted_and_trimmed),
        cmocka_unit_test(test_every_prefix_is_incomplete),
        cmocka_unit_test(test_other_methods_are_refused),
        cmocka_unit_test(test_absolute_form_is_refused),
        cmocka_unit_test(test_malformed_is_400),
        cmocka_unit_test(test_control_bytes_are_400),
        cmocka_unit_test(test_head_over_8k_is_431),
        cmocka_unit_test(test_head_of_exactly_8k_is_accepted),
        cmocka_unit_test(test_too_many_fields_is_431),
        cmocka_unit_test(test_target_is_passed_raw),
        cmocka_unit_test(test_slow_head_is_parsed_twice_not_per_byte),
        cmocka_unit_test(test_pieces_end_as_the_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
