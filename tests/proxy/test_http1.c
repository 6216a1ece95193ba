/* test_http1.c - the proxy's one HTTP/1.1 parser: what it accepts (a
 * forwarded request, a CONNECT), each smuggling case's reason (and its
 * status from the guard's one table), the same limits and reasons for a
 * CONNECT head, target forms, response framing, chunked bodies whole and
 * byte by byte. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "http1.h"
#include "test_support.h"

#define REQ "GET http://ok.example/p HTTP/1.1\r\nHost: ok.example\r\n"

static ph_h1_head H;

static ph_h1_result req(const char *s)
{
    return ph_h1_parse_request((const uint8_t *)s, strlen(s), &H);
}

static void assert_refused(const char *s, ph_reason reason)
{
    ph_h1_result r = req(s);
    if (r != PH_H1_REFUSED || H.reason != reason)
        fprintf(stderr, "input: %s\ngot %d %s\n", s, r,
                r == PH_H1_REFUSED ? ph_reason_code(H.reason) : "");
    assert_int_equal(r, PH_H1_REFUSED);
    assert_int_equal(H.reason, reason);
    assert_non_null(H.message);
    /* Byte by byte: no prefix is accepted (it is incomplete or refused for
     * the same reason). */
    for (size_t n = 0; n < strlen(s); n++) {
        ph_h1_result p = ph_h1_parse_request((const uint8_t *)s, n, &H);
        assert_true(p == PH_H1_INCOMPLETE || (p == PH_H1_REFUSED && H.reason == reason));
    }
}

static void test_requests_are_framed(void **state)
{
    (void)state;
    const char *s = REQ "Content-Length: 5\r\nConnection: keep-alive, X-Hop\r\n"
                        "Expect: 100-Continue\r\n\r\nhello";
    assert_int_equal(req(s), PH_H1_DONE);
    assert_int_equal(H.head_len, strlen(s) - 5);
    assert_int_equal(H.body, PH_H1_BODY_LENGTH);
    assert_int_equal(H.content_length, 5);
    assert_true(H.conn_keep_alive && !H.conn_close && H.expect_continue);
    assert_int_equal(H.host_field, 0);
    assert_memory_equal(s + H.target.off, "http://ok.example/p", H.target.len);
    assert_true(ph_h1_connection_lists((const uint8_t *)s, &H, (const uint8_t *)"x-hop", 5));
    assert_false(ph_h1_connection_lists((const uint8_t *)s, &H, (const uint8_t *)"host", 4));

    assert_int_equal(req(REQ "Transfer-Encoding: CHUNKED\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_CHUNKED);
    assert_int_equal(req(REQ "\r\n"), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_NONE);
    assert_int_equal(req("GET http://a/ HTTP/1.0\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(H.version_minor, 0);
    assert_int_equal(req(REQ "X-A: 1\r\n"), PH_H1_INCOMPLETE);
}

static void test_smuggling_is_refused_with_a_stable_reason(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        ph_reason reason;
    } cases[] = {
        { REQ "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", PH_REASON_HTTP_CL_TE },
        { REQ "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", PH_REASON_HTTP_CL_TE },
        { REQ "Content-Length: 1, 1\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: 1\r\nContent-Length: 1\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: +1\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: -1\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: 1 0\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: \r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: 0x10\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: 99999999999999999999\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: 4611686018427387904\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        /* 2^64 + 1 and 2^64 + 8: must not wrap around to 1 and 8. */
        { REQ "Content-Length: 18446744073709551617\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Content-Length: 18446744073709551624\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { REQ "Transfer-Encoding: gzip, chunked\r\n\r\n", PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { REQ "Transfer-Encoding: chunked, chunked\r\n\r\n", PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { REQ "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
          PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { REQ "Transfer-Encoding: identity\r\n\r\n", PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { REQ "Transfer-Encoding: xchunked\r\n\r\n", PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { REQ "Transfer-Encoding: \"chunked\"\r\n\r\n", PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { "POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
          PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { REQ "X-A: 1\r\n folded\r\n\r\n", PH_REASON_HTTP_OBS_FOLD },
        { REQ "X-A: 1\r\n\tfolded\r\n\r\n", PH_REASON_HTTP_OBS_FOLD },
        { REQ "X-A: 1\rX-B: 2\r\n\r\n", PH_REASON_HTTP_BARE_CR },
        { "GET http://a/ HTTP/1.1\r\r\n\r\n", PH_REASON_HTTP_BARE_CR },
        { REQ "X-A: 1\n\r\n", PH_REASON_HTTP_BARE_LF },
        { "GET http://a/ HTTP/1.1\n\n", PH_REASON_HTTP_BARE_LF },
        { REQ "Content-Length : 1\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "X-A\t: 1\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "X@A: 1\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ ": 1\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "X-A 1\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "X-A: a\x01" "b\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "X-A: a\x7f" "b\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "Host: b\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { REQ "Proxy-Authorization: Bearer a\r\nproxy-authorization: Bearer b\r\n\r\n",
          PH_REASON_HTTP_BAD_FIELD },
        { "GET http://a/ HTTP/1.2\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
        { "GET http://a/ HTTP/2\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
        { "GET  http://a/ HTTP/1.1\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
        { "G(T http://a/ HTTP/1.1\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
        { "\r\nGET http://a/ HTTP/1.1\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_refused(cases[i].in, cases[i].reason);
        /* The smuggling cases are answered 400 (the guard's table). */
        assert_int_equal(ph_reason_http_status(cases[i].reason), 400);
    }
    /* A NUL is a control byte too (strlen would stop at it). */
    static const char nul[] = REQ "X-A: a\0b\r\n\r\n";
    assert_int_equal(ph_h1_parse_request((const uint8_t *)nul, sizeof nul - 1, &H), PH_H1_REFUSED);
    assert_int_equal(H.reason, PH_REASON_HTTP_BAD_FIELD);
}

static void test_limits(void **state)
{
    (void)state;
    static char buf[PH_H1_REQUEST_HEAD_MAX + 64];
    /* A target over the limit is refused before its line ends. */
    size_t n = (size_t)snprintf(buf, sizeof buf, "GET http://a/");
    memset(buf + n, 'a', PH_H1_TARGET_MAX);
    buf[n + PH_H1_TARGET_MAX] = '\0';
    assert_refused(buf, PH_REASON_HTTP_TARGET_TOO_LONG);
    assert_int_equal(ph_reason_http_status(PH_REASON_HTTP_TARGET_TOO_LONG), 414);
    /* A head over 8 KiB. */
    n = (size_t)snprintf(buf, sizeof buf, REQ "X-A: ");
    memset(buf + n, 'a', sizeof buf - n - 1);
    buf[sizeof buf - 1] = '\0';
    assert_int_equal(req(buf), PH_H1_REFUSED);
    assert_int_equal(H.reason, PH_REASON_HTTP_HEAD_TOO_LARGE);
    assert_int_equal(ph_reason_http_status(PH_REASON_HTTP_HEAD_TOO_LARGE), 431);
    /* Over 100 fields. */
    n = (size_t)snprintf(buf, sizeof buf, "GET http://a/ HTTP/1.1\r\n");
    for (int i = 0; i <= PH_H1_FIELDS_MAX; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "X: %d\r\n", i);
    snprintf(buf + n, sizeof buf - n, "\r\n");
    assert_int_equal(req(buf), PH_H1_REFUSED);
    assert_int_equal(H.reason, PH_REASON_HTTP_HEAD_TOO_LARGE);
    /* The largest Content-Length. */
    assert_int_equal(req(REQ "Content-Length: 4611686018427387903\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(H.content_length, PH_H1_LENGTH_MAX);
}

#define CON "CONNECT a.example.com:443 HTTP/1.1\r\n"

/* A CONNECT is a request head like any other: its target authority-form,
 * handed raw to the guard; no body; the grant's field found. */
static void test_connect_heads(void **state)
{
    (void)state;
    const char *s = CON "\r\n";
    assert_int_equal(req(s), PH_H1_DONE);
    assert_int_equal(H.head_len, strlen(s));
    assert_int_equal(H.form, PH_H1_FORM_AUTHORITY);
    assert_int_equal(H.body, PH_H1_BODY_NONE);
    assert_int_equal(H.proxy_auth_field, -1);
    assert_memory_equal(s + H.target.off, "a.example.com:443", H.target.len);
    /* *out is overwritten whole: a refusal's reason does not outlive it. */
    assert_int_equal(req("CONNECT a b c\r\n\r\n"), PH_H1_REFUSED);
    assert_int_equal(req(s), PH_H1_DONE);
    assert_int_equal(H.reason, PH_REASON_ALLOWED);
    assert_null(H.message);

    /* What Python's http.client (pip, urllib3, requests) sends. */
    s = "CONNECT pypi.org:443 HTTP/1.0\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\r\n";
    assert_int_equal(req(s), PH_H1_DONE);
    assert_int_equal(H.version_minor, 0);
    assert_int_equal(H.proxy_auth_field, 0);

    /* The value trimmed, the name in any case; bytes after the head (the
     * tunnel's, sent early) left alone. */
    s = CON "Host: a.example.com:443\r\nproxy-AUTHORIZATION: \t Basic Zm9vOmJhcg== \t\r\n"
            "User-Agent: x\r\n\r\nTLS";
    assert_int_equal(req(s), PH_H1_DONE);
    assert_int_equal(H.head_len, strlen(s) - 3);
    assert_int_equal(H.proxy_auth_field, 1);
    const ph_h1_field *a = &H.fields[H.proxy_auth_field];
    assert_int_equal(a->value.len, strlen("Basic Zm9vOmJhcg=="));
    assert_memory_equal(s + a->value.off, "Basic Zm9vOmJhcg==", a->value.len);

    /* Every prefix is incomplete. */
    s = CON "Proxy-Authorization: Bearer t\r\n\r\n";
    for (size_t n = 0; n < strlen(s); n++)
        assert_int_equal(ph_h1_parse_request((const uint8_t *)s, n, &H), PH_H1_INCOMPLETE);

    /* The parser judges no destination: the guard does. */
    assert_int_equal(req("CONNECT 127.0.0.1:22 HTTP/1.1\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(req("CONNECT [::1]:443 HTTP/1.1\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(req("CONNECT x HTTP/1.1\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(H.form, PH_H1_FORM_AUTHORITY);
}

/* One set of reasons: a CONNECT's fields are refused for what a forwarded
 * head's are, with the same reason, and a CONNECT carries no body. Its
 * request line is its destination: whatever breaks it is the guard's
 * parse_error, as ph_decide_connect says of a malformed authority (the
 * guard/proxy parity); a forwarded request line's defects keep
 * http_bad_request_line and the line-end reasons. */
static void test_connect_refusals_are_every_heads(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        ph_reason reason;
    } cases[] = {
        { CON "Proxy-Authorization: Bearer a\r\nProxy-Authorization: Bearer b\r\n\r\n",
          PH_REASON_HTTP_BAD_FIELD },
        { CON "\n", PH_REASON_HTTP_BARE_LF },
        { CON "X: 1\n\r\n", PH_REASON_HTTP_BARE_LF },
        { CON "X: a\rb\r\n\r\n", PH_REASON_HTTP_BARE_CR },
        { CON "X : y\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { CON "NoColon\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { CON "X: a\x7f\r\n\r\n", PH_REASON_HTTP_BAD_FIELD },
        { CON "X: y\r\n z\r\n\r\n", PH_REASON_HTTP_OBS_FOLD },
        { CON "Content-Length: 5\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { CON "Content-Length: 0\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { CON "Transfer-Encoding: chunked\r\n\r\n", PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        /* The request line: the destination's. */
        { "CONNECT a.example.com:443 HTTP/1.1\n\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.example.com:443 HTTP/1.1\r\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT  a.example.com:443 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.example.com:443  HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.example.com:443 HTTP/1.2\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.example.com:443 HTTP/0.9\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.example.com:443 http/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.example.com:443\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT a.exam\x01ple.com:443 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT ex\xc3\xa4mple.com:443 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT exa\tmple.com:80 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT example.com\r\nHost: evil.com:80 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        { "CONNECT example.com/\nx:80 HTTP/1.1\r\n\r\n", PH_REASON_PARSE_ERROR },
        /* The same line with another method is framed as any request. */
        { "GET a.example.com:443 HTTP/1.2\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
        { "GET ex\xc3\xa4mple.com:443 HTTP/1.1\r\n\r\n", PH_REASON_HTTP_BAD_REQUEST_LINE },
        { "GET a.example.com:443 HTTP/1.1\n\n", PH_REASON_HTTP_BARE_LF },
        { "CONNECTX a.example.com:443 HTTP/1.1\n\n", PH_REASON_HTTP_BARE_LF },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_refused(cases[i].in, cases[i].reason);
        assert_int_equal(ph_reason_http_status(cases[i].reason), 400);
    }
    /* A NUL in a value: refused at its byte. */
    static const char nul[] = CON "X: a\0b\r\n\r\n";
    assert_int_equal(ph_h1_parse_request((const uint8_t *)nul, sizeof nul - 1, &H), PH_H1_REFUSED);
    assert_int_equal(H.reason, PH_REASON_HTTP_BAD_FIELD);
    assert_int_equal(H.error_offset, strlen(CON "X: a"));
}

/* One set of limits: 8 KiB, 100 fields, a 4096-byte target, for a CONNECT
 * as for any head. */
static void test_connect_limits_are_every_heads(void **state)
{
    (void)state;
    static char buf[PH_H1_REQUEST_HEAD_MAX + 64];
    /* 100 fields pass, 101 are 431. */
    size_t n = (size_t)snprintf(buf, sizeof buf, CON);
    for (int i = 0; i < PH_H1_FIELDS_MAX; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "X%d: y\r\n", i);
    snprintf(buf + n, sizeof buf - n, "\r\n");
    assert_int_equal(req(buf), PH_H1_DONE);
    assert_int_equal(H.nfields, PH_H1_FIELDS_MAX);
    snprintf(buf + n, sizeof buf - n, "X: y\r\n\r\n");
    assert_refused(buf, PH_REASON_HTTP_HEAD_TOO_LARGE);
    assert_int_equal(ph_reason_http_status(PH_REASON_HTTP_HEAD_TOO_LARGE), 431);

    /* A head of exactly 8 KiB passes; one byte more is 431 at the cap. */
    n = (size_t)snprintf(buf, sizeof buf, CON "X: ");
    size_t fill = PH_H1_REQUEST_HEAD_MAX - n - 4;
    memset(buf + n, 'a', fill);
    memcpy(buf + n + fill, "\r\n\r\n", 5);
    assert_int_equal(req(buf), PH_H1_DONE);
    assert_int_equal(H.head_len, PH_H1_REQUEST_HEAD_MAX);
    memset(buf + n, 'a', sizeof buf - n - 1);
    buf[sizeof buf - 1] = '\0';
    assert_int_equal(ph_h1_parse_request((const uint8_t *)buf, PH_H1_REQUEST_HEAD_MAX - 1, &H),
                     PH_H1_INCOMPLETE);
    assert_int_equal(ph_h1_parse_request((const uint8_t *)buf, PH_H1_REQUEST_HEAD_MAX, &H),
                     PH_H1_REFUSED);
    assert_int_equal(H.reason, PH_REASON_HTTP_HEAD_TOO_LARGE);

    /* A 4096-byte target is the guard's to refuse (longer than any
     * authority: parse_error there); one byte more is refused here, before
     * its line ends, as the guard would refuse it (a forwarded target: 414,
     * test_limits). */
    n = (size_t)snprintf(buf, sizeof buf, "CONNECT ");
    memset(buf + n, 'a', PH_H1_TARGET_MAX);
    snprintf(buf + n + PH_H1_TARGET_MAX, sizeof buf - n - PH_H1_TARGET_MAX, " HTTP/1.1\r\n\r\n");
    assert_int_equal(req(buf), PH_H1_DONE);
    assert_int_equal(H.target.len, PH_H1_TARGET_MAX);
    memset(buf + n, 'a', PH_H1_TARGET_MAX + 1);
    buf[n + PH_H1_TARGET_MAX + 1] = '\0';
    assert_refused(buf, PH_REASON_PARSE_ERROR);
    /* A request line not ended within the head's limit: the same. */
    n = (size_t)snprintf(buf, sizeof buf, "CONNECT a.example.com:443 HTTP/1.1");
    memset(buf + n, 'a', sizeof buf - n - 1);
    assert_int_equal(ph_h1_parse_request((const uint8_t *)buf, PH_H1_REQUEST_HEAD_MAX, &H),
                     PH_H1_REFUSED);
    assert_int_equal(H.reason, PH_REASON_PARSE_ERROR);
}

/* The target's form, from the grammar alone (RFC 9112 section 3.2): what
 * an absolute-form target holds, its scheme included, is the guard's. */
static void test_target_forms(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        ph_h1_form form;
    } cases[] = {
        { "GET http://a/ HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
        { "GET https://a/ HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
        { "GET ftp://a/ HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
        { "GET a.example.com:80 HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
        { "GET / HTTP/1.1\r\n\r\n", PH_H1_FORM_ORIGIN },
        { "GET /a?b HTTP/1.1\r\n\r\n", PH_H1_FORM_ORIGIN },
        { "OPTIONS * HTTP/1.1\r\n\r\n", PH_H1_FORM_ASTERISK },
        { "OPTIONS *x HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
        { "CONNECT a:1 HTTP/1.1\r\n\r\n", PH_H1_FORM_AUTHORITY },
        { "CONNECT /a HTTP/1.1\r\n\r\n", PH_H1_FORM_AUTHORITY },
        /* Methods are case-sensitive (RFC 9110 section 9.1). */
        { "connect a:1 HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
        { "CONNECTX a:1 HTTP/1.1\r\n\r\n", PH_H1_FORM_ABSOLUTE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (req(cases[i].in) != PH_H1_DONE || H.form != cases[i].form)
            fprintf(stderr, "input: %s\n", cases[i].in);
        assert_int_equal(req(cases[i].in), PH_H1_DONE);
        assert_int_equal(H.form, cases[i].form);
    }
    /* Only a CONNECT is refused a body. */
    assert_int_equal(req("connect a:1 HTTP/1.1\r\nContent-Length: 1\r\n\r\n"), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_LENGTH);
}

static ph_h1_result resp(const char *s, bool was_head)
{
    return ph_h1_parse_response((const uint8_t *)s, strlen(s), was_head, &H);
}

static void test_responses_are_framed_as_strictly(void **state)
{
    (void)state;
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_LENGTH);
    assert_int_equal(H.status, 200);
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_NONE);
    assert_true(H.has_content_length);
    assert_int_equal(resp("HTTP/1.1 200 OK\r\n\r\n", false), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_CLOSE);
    assert_int_equal(resp("HTTP/1.1 204 \r\n\r\n", false), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_NONE);
    assert_int_equal(resp("HTTP/1.1 304 Not Modified\r\n\r\n", false), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_NONE);
    assert_int_equal(resp("HTTP/1.1 100 Continue\r\n\r\n", false), PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_NONE);
    assert_int_equal(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false),
                     PH_H1_DONE);
    assert_int_equal(H.body, PH_H1_BODY_CHUNKED);

    static const struct {
        const char *in;
        ph_reason reason;
    } bad[] = {
        { "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n",
          PH_REASON_HTTP_CL_TE },
        { "HTTP/1.1 200 OK\r\nContent-Length: 8, 8\r\n\r\n", PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551624\r\n\r\n",
          PH_REASON_HTTP_BAD_CONTENT_LENGTH },
        { "HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\n\r\n", PH_REASON_HTTP_OBS_FOLD },
        { "HTTP/1.1 200 OK\nContent-Length: 1\n\n", PH_REASON_HTTP_BARE_LF },
        { "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
          PH_REASON_HTTP_BAD_TRANSFER_ENCODING },
        { "HTTP/1.1 20 OK\r\n\r\n", PH_REASON_UPSTREAM_BAD_RESPONSE },
        { "HTTP/1.1 099 OK\r\n\r\n", PH_REASON_UPSTREAM_BAD_RESPONSE },
        { "HTTP/2 200 OK\r\n\r\n", PH_REASON_UPSTREAM_BAD_RESPONSE },
        { "ICY 200 OK\r\n\r\n", PH_REASON_UPSTREAM_BAD_RESPONSE },
        { "HTTP/1.1 200OK\r\n\r\n", PH_REASON_UPSTREAM_BAD_RESPONSE },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (resp(bad[i].in, false) != PH_H1_REFUSED || H.reason != bad[i].reason)
            fprintf(stderr, "response: %s\n", bad[i].in);
        assert_int_equal(resp(bad[i].in, false), PH_H1_REFUSED);
        assert_int_equal(H.reason, bad[i].reason);
    }
    assert_int_equal(ph_reason_http_status(PH_REASON_UPSTREAM_BAD_RESPONSE), 502);
}

/* Decodes s in pieces of at most piece bytes; the data into out. */
static ph_h1_result chunks(const char *s, size_t len, size_t piece, char *out, size_t *out_len,
                           ph_h1_chunked *c)
{
    ph_h1_chunked_init(c);
    size_t pos = 0;
    *out_len = 0;
    ph_h1_result r = PH_H1_INCOMPLETE;
    while (pos < len && r == PH_H1_INCOMPLETE) {
        size_t n = len - pos < piece ? len - pos : piece;
        ph_h1_chunk_step st;
        r = ph_h1_chunked_step(c, (const uint8_t *)s + pos, n, &st);
        memcpy(out + *out_len, s + pos + st.data_off, st.data_len);
        *out_len += st.data_len;
        pos += st.consumed;
    }
    return r;
}

static void test_chunked_bodies(void **state)
{
    (void)state;
    static const char good[] = "5\r\nhello\r\n1;ext=\"a b\"\r\n \r\nA  ;x\r\n0123456789\r\n"
                               "0\r\nX-T: 1\r\nX-U:\r\n\r\nNEXT";
    char out[64];
    size_t len;
    ph_h1_chunked c;
    for (size_t piece = 1; piece <= sizeof good; piece++) {
        assert_int_equal(chunks(good, sizeof good - 1, piece, out, &len, &c), PH_H1_DONE);
        assert_int_equal(len, 16);
        assert_memory_equal(out, "hello 0123456789", 16);
    }
    static const char *const bad[] = {
        "fffffffffffffffff\r\n",           /* overflows */
        "g\r\n",                           /* not hex */
        "\r\n",                            /* no size */
        ";x\r\n",                          /* no size */
        "5\nhello\r\n0\r\n\r\n",           /* bare LF */
        "5\r\nhelloXX0\r\n\r\n",           /* data not followed by CRLF */
        "5 5\r\nhello\r\n0\r\n\r\n",       /* space inside the size */
        "1;a\x01\r\nx\r\n0\r\n\r\n",       /* control byte in an extension */
        "0\r\nX-T: 1\r\n folded\r\n\r\n",  /* obs-fold in the trailers */
        "0\r\nX T: 1\r\n\r\n",             /* bad trailer name */
        "0\r\n\r\r",                       /* bare CR at the end */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (chunks(bad[i], strlen(bad[i]), 64, out, &len, &c) != PH_H1_REFUSED)
            fprintf(stderr, "chunked: %s\n", bad[i]);
        assert_int_equal(chunks(bad[i], strlen(bad[i]), 64, out, &len, &c), PH_H1_REFUSED);
        assert_int_equal(c.reason, PH_REASON_HTTP_BAD_CHUNK);
        assert_int_equal(chunks(bad[i], strlen(bad[i]), 1, out, &len, &c), PH_H1_REFUSED);
    }
    /* A chunk-size line over the limit (a long extension). */
    static char longext[PH_H1_CHUNK_LINE_MAX + 16];
    memset(longext, 'a', sizeof longext - 1);
    memcpy(longext, "1;", 2);
    assert_int_equal(chunks(longext, sizeof longext - 1, 64, out, &len, &c), PH_H1_REFUSED);
    /* Trailers over the limit. */
    static char trailers[PH_H1_TRAILERS_MAX + 64];
    size_t n = (size_t)snprintf(trailers, sizeof trailers, "0\r\n");
    while (n + 12 < sizeof trailers)
        n += (size_t)snprintf(trailers + n, sizeof trailers - n, "X: 1234567\r\n");
    assert_int_equal(chunks(trailers, n, 64, out, &len, &c), PH_H1_REFUSED);
}

/* Heads fed a byte at a time, parsed only when ph_h1_head_scan says so (as
 * forward.c and admin.c do): each ends as when parsed whole, request and
 * response, with at most two parses (the first line's end, then the end or
 * the refused byte), never one per byte. */
static ph_h1_result fed(const char *s, bool response, unsigned *parses, ph_h1_head *out)
{
    size_t len = strlen(s), mark = 0, max = response ? PH_H1_RESPONSE_HEAD_MAX
                                                     : PH_H1_REQUEST_HEAD_MAX;
    ph_h1_result r = PH_H1_INCOMPLETE;
    *parses = 0;
    for (size_t n = 1; n <= len && r == PH_H1_INCOMPLETE; n++) {
        if (!ph_h1_head_scan((const uint8_t *)s, n, &mark) && n < max)
            continue;
        (*parses)++;
        r = response ? ph_h1_parse_response((const uint8_t *)s, n, false, out)
                     : ph_h1_parse_request((const uint8_t *)s, n, out);
    }
    return r;
}

static void test_heads_in_pieces_are_scanned_once(void **state)
{
    (void)state;
    static const char *const reqs[] = {
        REQ "\r\n",
        REQ "Content-Length: 3\r\n\r\nabc",
        REQ "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        REQ "X-A: 1\r\n folded\r\n\r\n",
        REQ "X-A: 1\rX-B: 2\r\n\r\n",
        REQ "X-A: 1\n\r\n",
        REQ "X-A: a\x01b\r\n\r\n",
        REQ "Host: a\r\nHost: b\r\n\r\n",
        "GET http://ok.example/ HTTP/1.2\r\n\r\n",
        "\r\n\r\n",
        CON "\r\n",
        "CONNECT a.example.com:443 HTTP/1.0\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\n\r\nTLS",
        "CONNECT a.example.com:443 HTTP/1.1\n\n",
        CON "\n",
        CON "X: a\rb\r\n\r\n",
        "CONNECT  a.example.com:443 HTTP/1.1\r\n\r\n",
        CON "X : y\r\n\r\n",
        CON "Content-Length: 5\r\n\r\n",
        CON "Proxy-Authorization: a\r\nProxy-Authorization: b\r\n\r\n",
        "CONNECT a.exam\x01ple.com:443 HTTP/1.1\r\n\r\n",
    };
    static const char *const resps[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi",
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\nContent-Length: 2\n\n",
        "HTTP/2 200 OK\r\n\r\n",
    };
    for (int which = 0; which < 2; which++) {
        const char *const *set = which ? resps : reqs;
        size_t count = which ? sizeof resps / sizeof *resps : sizeof reqs / sizeof *reqs;
        for (size_t i = 0; i < count; i++) {
            ph_h1_head whole, piecewise;
            size_t len = strlen(set[i]);
            ph_h1_result w = which ? ph_h1_parse_response((const uint8_t *)set[i], len, false,
                                                          &whole)
                                   : ph_h1_parse_request((const uint8_t *)set[i], len, &whole);
            unsigned parses;
            ph_h1_result f = fed(set[i], which, &parses, &piecewise);
            if (f != w)
                fprintf(stderr, "input: %s\n", set[i]);
            assert_int_equal(f, w);
            if (w == PH_H1_DONE) {
                assert_int_equal(piecewise.head_len, whole.head_len);
                assert_int_equal(piecewise.target.off, whole.target.off);
                assert_int_equal(piecewise.proxy_auth_field, whole.proxy_auth_field);
            } else {
                assert_int_equal(piecewise.reason, whole.reason);
                assert_int_equal(piecewise.error_offset, whole.error_offset);
            }
            assert_true(parses <= 2);
        }
    }
    /* A response head of 30 KiB sent a byte at a time: two parses. */
    static char big[PH_H1_RESPONSE_HEAD_MAX];
    int n = snprintf(big, sizeof big, "HTTP/1.1 200 OK\r\nX-Pad: ");
    memset(big + n, 'a', 30000);
    memcpy(big + n + 30000, "\r\n\r\n", 5);
    unsigned parses;
    ph_h1_head h;
    assert_int_equal(fed(big, true, &parses, &h), PH_H1_DONE);
    assert_int_equal(h.head_len, strlen(big));
    assert_int_equal(parses, 2);

    /* A CONNECT head near the cap, as tunnel.c receives one a byte at a
     * time: parsed at its first line's end and at its end. Many short
     * fields: the same, the end found with CRLF CRLF split across pieces. */
    static char con[PH_H1_REQUEST_HEAD_MAX + 1];
    n = snprintf(con, sizeof con, CON "X: ");
    size_t fill = PH_H1_REQUEST_HEAD_MAX - 200 - (size_t)n - 4;
    memset(con + n, 'a', fill);
    memcpy(con + n + fill, "\r\n\r\n", 5);
    assert_int_equal(fed(con, false, &parses, &h), PH_H1_DONE);
    assert_int_equal(h.head_len, strlen(con));
    assert_int_equal(parses, 2);
    size_t m = (size_t)snprintf(con, sizeof con, CON);
    for (int i = 0; i < PH_H1_FIELDS_MAX; i++)
        m += (size_t)snprintf(con + m, sizeof con - m, "X-Field-%02d: %050d\r\n", i, i);
    snprintf(con + m, sizeof con - m, "\r\n");
    assert_true(strlen(con) < PH_H1_REQUEST_HEAD_MAX);
    assert_int_equal(fed(con, false, &parses, &h), PH_H1_DONE);
    assert_int_equal(h.head_len, strlen(con));
    assert_int_equal(parses, 2);
    /* No end: refused at the cap, after the first line's parse and that. */
    memset(con + n, 'a', sizeof con - (size_t)n - 1);
    con[sizeof con - 1] = '\0';
    assert_int_equal(fed(con, false, &parses, &h), PH_H1_REFUSED);
    assert_int_equal(h.reason, PH_REASON_HTTP_HEAD_TOO_LARGE);
    assert_int_equal(parses, 2);
    /* A bad request line: refused at its end, before any field. */
    const char *bad = "CONNECT a.example.com:443 HTTP/1.2\r\nX: y\r\n";
    assert_int_equal(fed(bad, false, &parses, &h), PH_H1_REFUSED);
    assert_int_equal(parses, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_are_framed),
        cmocka_unit_test(test_smuggling_is_refused_with_a_stable_reason),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_connect_heads),
        cmocka_unit_test(test_connect_refusals_are_every_heads),
        cmocka_unit_test(test_connect_limits_are_every_heads),
        cmocka_unit_test(test_target_forms),
        cmocka_unit_test(test_responses_are_framed_as_strictly),
        cmocka_unit_test(test_chunked_bodies),
        cmocka_unit_test(test_heads_in_pieces_are_scanned_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
