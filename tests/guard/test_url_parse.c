/* test_url_parse.c - the strict URL / CONNECT authority parser beyond the
 * verdict table: result fields, diagnostics, input handling, formatting. */
#include "test_support.h"

#include <string.h>

#include "pinhole/url.h"

static ph_status parse(const char *s, ph_url *u, ph_diag *d)
{
    return ph_url_parse(s, strlen(s), u, d);
}

static void test_result_fields(void **state)
{
    (void)state;
    ph_url u;
    const char *s = "HTTPS://Api.Example.COM:8443/v1/x?q=1#frag";
    assert_int_equal(parse(s, &u, NULL), PH_OK);
    assert_int_equal(u.reason, PH_REASON_ALLOWED);
    assert_int_equal(u.scheme, PH_SCHEME_HTTPS);
    assert_string_equal(u.host, "api.example.com");
    assert_int_equal(u.host_len, strlen("api.example.com"));
    assert_int_equal(u.port, 8443);
    assert_true(u.port_explicit);
    assert_int_equal(u.path_offset, strlen("HTTPS://Api.Example.COM:8443"));
    assert_int_equal(u.path_len, strlen("/v1/x?q=1"));
    assert_memory_equal(s + u.path_offset, "/v1/x?q=1", u.path_len);

    assert_int_equal(parse("http://example.com", &u, NULL), PH_OK);
    assert_int_equal(u.scheme, PH_SCHEME_HTTP);
    assert_int_equal(u.port, 80);
    assert_false(u.port_explicit);
    assert_int_equal(u.path_offset, strlen("http://example.com"));
    assert_int_equal(u.path_len, 0);

    assert_int_equal(parse("https://example.com/#only-fragment", &u, NULL), PH_OK);
    assert_int_equal(u.port, 443);
    assert_int_equal(u.path_len, 1);
}

/* Input is a pointer and a length: bytes past len are never read, and an
 * embedded NUL inside len is refused rather than ending the string early. */
static void test_length_bounded_input(void **state)
{
    (void)state;
    ph_url u;
    const char buf[] = "http://example.com@evil.com";
    assert_int_equal(ph_url_parse(buf, strlen("http://example.com"), &u, NULL), PH_OK);
    assert_string_equal(u.host, "example.com");
    const char nul[] = "http://example.com\0.evil.com";
    ph_diag d = {0};
    assert_int_equal(ph_url_parse(nul, sizeof nul - 1, &u, &d), PH_E_INVAL);
    assert_int_equal(d.offset, strlen("http://example.com"));
    assert_non_null(strstr(d.message, "NUL"));
}

/* The byte test reads whole words: every byte value, at every offset of a
 * URL longer than three words (so in every lane of a word and in the tail),
 * is refused exactly when it is not printable ASCII or is '\\', at its own
 * offset; and a host of any length folds every letter, wherever it falls
 * in a word. */
static void test_every_byte_at_every_offset(void **state)
{
    (void)state;
    const char base[] = "http://h1.example.net/0123456789abcdef";
    char buf[sizeof base];
    for (size_t at = 0; at < sizeof base - 1; at++) {
        for (unsigned c = 0; c < 256; c++) {
            memcpy(buf, base, sizeof base);
            buf[at] = (char)c;
            bool forbidden = c <= 0x20 || c >= 0x7f || c == '\\';
            ph_url u;
            ph_diag d = {0};
            ph_status st = ph_url_parse(buf, sizeof base - 1, &u, &d);
            if (forbidden) {
                if (st != PH_E_INVAL || d.offset != at || strstr(d.message, "not allowed") == NULL)
                    fail_msg("byte 0x%02x at %zu: status %d offset %zu \"%s\"", c, at, st,
                             d.offset, d.message);
            } else if (at > 21 && st != PH_OK) { /* after the '/': any allowed byte */
                fail_msg("allowed byte 0x%02x in the path at %zu refused: %s", c, at, d.message);
            }
        }
    }
    char url[PH_HOST_MAX + 32] = "http://";
    char want[PH_HOST_MAX + 1];
    for (size_t n = 1; n <= 40; n++) {
        size_t at = strlen("http://");
        for (size_t i = 0; i < n; i++) {
            url[at + i] = (char)((i % 2 ? 'A' : 'a') + (int)(i % 26));
            want[i] = (char)ph_ascii_lower((unsigned char)url[at + i]);
        }
        memcpy(url + at + n, ".Example.COM/", sizeof ".Example.COM/");
        memcpy(want + n, ".example.com", sizeof ".example.com");
        ph_url u;
        assert_int_equal(parse(url, &u, NULL), PH_OK);
        assert_string_equal(u.host, want);
    }
}

static void test_diagnostics_name_the_problem_and_its_offset(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        size_t offset;
        const char *says;
    } cases[] = {
        {"http://good.com@evil.com", 15, "userinfo"},
        {"http://evil.com#@good.com", 15, "'#'"},
        {"http://evil.com?@good.com", 16, "'@' after a '?'"},
        {"http://evil.com#x", 15, "'#'"},
        {"http:\\\\evil.com", 5, "backslash"},
        {"http://exa\tmple.com", 10, "tab"},
        {"http://example.com\r\n", 18, "carriage return"},
        {"http://ex\xc3\xa4mple.com", 9, "non-ASCII"},
        {"http://good.com%40evil.com", 15, "percent-encoding"},
        {"http://[fe80::1%25eth0]", 15, "zone"},
        {"http://[example.com]", 8, "not a valid IPv6"},
        {"http://example.com:", 19, "empty port"},
        {"http://example.com:080", 19, "leading zero"},
        {"http://example.com:018080", 19, "leading zero"}, /* before the range */
        {"http://example.com:0000000000443", 19, "leading zero"},
        {"http://example.com:180800", 24, "out of range"},
        {"http://example.com:0", 19, "port 0"},
        {"http://example.com:65536", 19, "out of range"},
        {"http://example.com:+80", 19, "not a decimal"},
        {"http://a.com:80:80", 15, "more than one ':'"},
        {"http://::1/", 7, "IPv6 address needs brackets"},
        {"http://%31%32%37.0.0.1", 7, "percent-encoding"},
        {"ftp://example.com", 0, "unsupported scheme \"ftp\""},
        {"http:example.com", 5, "missing \"//\""},
        {"http:///example.com", 7, "more than two slashes"},
        {"http://a..com", 9, "empty label"},
        {"http://a.com.", 12, "trailing dot"},
        {"http://localhost", 7, "single label"},
        {"http://127.0.0.1", 7, "IP address literal"},
        {"http://[::1]", 7, "IP address literal"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_url u;
        ph_diag d = {0};
        assert_int_not_equal(parse(cases[i].url, &u, &d), PH_OK);
        if (strstr(d.message, cases[i].says) == NULL || d.offset != cases[i].offset)
            fail_msg("%s: got \"%s\" at %zu, want \"%s\" at %zu", cases[i].url, d.message,
                     d.offset, cases[i].says, cases[i].offset);
        assert_int_equal(d.status, u.reason == PH_REASON_IP_LITERAL ? PH_E_DENIED : PH_E_INVAL);
    }
}

/* ip_literal and parse_error are different answers with different statuses. */
static void test_ip_literal_is_not_a_parse_error(void **state)
{
    (void)state;
    ph_url u;
    assert_int_equal(parse("http://0x7f.1/", &u, NULL), PH_E_DENIED);
    assert_int_equal(u.reason, PH_REASON_IP_LITERAL);
    assert_int_equal(parse("http://0x7f.1@x.com/", &u, NULL), PH_E_INVAL);
    assert_int_equal(u.reason, PH_REASON_PARSE_ERROR);
    ph_authority a;
    assert_int_equal(ph_authority_parse("[::1]:443", 9, &a, NULL), PH_E_DENIED);
    assert_int_equal(a.reason, PH_REASON_IP_LITERAL);
    assert_int_equal(ph_authority_parse("[::1%1]:443", 11, &a, NULL), PH_E_INVAL);
    assert_int_equal(a.reason, PH_REASON_PARSE_ERROR);
}

/* An "xn--" label must be a valid IDNA A-label (WHATWG refuses the URL
 * otherwise, curl passes it on): refused in URLs and CONNECT authorities,
 * pointing at the label; valid A-labels, in any case, are accepted. */
static void test_invalid_a_labels_are_refused(void **state)
{
    (void)state;
    ph_url u;
    ph_authority a;
    ph_diag d = {0};
    assert_int_equal(parse("http://api.xn--a.example/", &u, &d), PH_E_INVAL);
    assert_int_equal(u.reason, PH_REASON_PARSE_ERROR);
    assert_string_equal(u.host, "");
    assert_int_equal(d.offset, strlen("http://api."));
    assert_non_null(strstr(d.message, "A-label"));
    memset(&d, 0, sizeof d);
    assert_int_equal(ph_authority_parse("xn--1ug.example:443", 19, &a, &d), PH_E_INVAL);
    assert_int_equal(a.reason, PH_REASON_PARSE_ERROR);
    assert_int_equal(d.offset, 0);
    static const char *const refused[] = {
        "http://xn--zz.example", "http://xn--xn--bcher-kva.example", "http://xn---abc.example",
        "http://XN--BCHER-2PA.example", /* decodes to uppercase: not canonical */
        "http://a.b.xn--ls8h.example",  /* emoji: not IDNA 2008 */
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (parse(refused[i], &u, NULL) != PH_E_INVAL)
            fail_msg("%s accepted", refused[i]);
    assert_int_equal(parse("https://XN--Bcher-KVA.xn--p1ai:8443/", &u, NULL), PH_OK);
    assert_string_equal(u.host, "xn--bcher-kva.xn--p1ai");
    assert_int_equal(ph_authority_parse("xn--mnchen-3ya.de:443", 21, &a, NULL), PH_OK);
    assert_string_equal(a.host, "xn--mnchen-3ya.de");
}

static void test_null_arguments(void **state)
{
    (void)state;
    ph_url u;
    ph_authority a;
    ph_diag d = {0};
    assert_int_equal(ph_url_parse(NULL, 0, &u, &d), PH_E_INVAL);
    assert_int_equal(u.reason, PH_REASON_PARSE_ERROR);
    assert_int_equal(ph_url_parse("http://a.com", 12, NULL, NULL), PH_E_INVAL);
    assert_int_equal(ph_authority_parse(NULL, 0, &a, NULL), PH_E_INVAL);
    assert_int_equal(ph_authority_parse("a.com:1", 7, NULL, NULL), PH_E_INVAL);
    assert_int_equal(ph_authority_parse("", 0, &a, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "empty host"));
}

static void test_authority(void **state)
{
    (void)state;
    ph_authority a;
    assert_int_equal(ph_authority_parse("Example.COM:8443", 16, &a, NULL), PH_OK);
    assert_int_equal(a.reason, PH_REASON_ALLOWED);
    assert_string_equal(a.host, "example.com");
    assert_int_equal(a.host_len, 11);
    assert_int_equal(a.port, 8443);
    ph_diag d = {0};
    assert_int_equal(ph_authority_parse("example.com", 11, &a, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "port required"));
    assert_string_equal(a.host, "");
}

static void test_format_round_trips(void **state)
{
    (void)state;
    static const struct {
        const char *url, *origin, *host_port;
    } cases[] = {
        {"HTTP://Example.com:80/x", "http://example.com", "example.com:80"},
        {"https://example.com", "https://example.com", "example.com:443"},
        {"https://example.com:8443/", "https://example.com:8443", "example.com:8443"},
        {"http://example.com:443", "http://example.com:443", "example.com:443"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_url u, v;
        char buf[PH_URL_ORIGIN_MAX];
        size_t n = 0;
        assert_int_equal(parse(cases[i].url, &u, NULL), PH_OK);
        assert_int_equal(ph_url_format_origin(&u, buf, sizeof buf, &n), PH_OK);
        assert_string_equal(buf, cases[i].origin);
        assert_int_equal(n, strlen(buf));
        assert_int_equal(parse(buf, &v, NULL), PH_OK);
        assert_string_equal(v.host, u.host);
        assert_int_equal(v.port, u.port);
        assert_int_equal(v.scheme, u.scheme);

        char hp[PH_HOST_PORT_MAX];
        assert_int_equal(ph_format_host_port(u.host, u.port, hp, sizeof hp, NULL), PH_OK);
        assert_string_equal(hp, cases[i].host_port);
        ph_authority a;
        assert_int_equal(ph_authority_parse(hp, strlen(hp), &a, NULL), PH_OK);
        assert_string_equal(a.host, u.host);
        assert_int_equal(a.port, u.port);
    }
}

static void test_format_refusals(void **state)
{
    (void)state;
    ph_url u;
    char buf[PH_URL_ORIGIN_MAX];
    assert_int_equal(parse("http://127.0.0.1", &u, NULL), PH_E_DENIED);
    assert_int_equal(ph_url_format_origin(&u, buf, sizeof buf, NULL), PH_E_INVAL);
    assert_string_equal(buf, "");
    assert_int_equal(parse("https://example.com:8443", &u, NULL), PH_OK);
    char tiny[10];
    size_t n = 99;
    assert_int_equal(ph_url_format_origin(&u, tiny, sizeof tiny, &n), PH_E_LIMIT);
    assert_string_equal(tiny, "");
    assert_int_equal(n, 0);
    assert_int_equal(ph_format_host_port("127.0.0.1", 80, buf, sizeof buf, NULL), PH_E_INVAL);
    assert_int_equal(ph_format_host_port("Example.com", 80, buf, sizeof buf, NULL), PH_E_INVAL);
    assert_int_equal(ph_format_host_port("example.com", 0, buf, sizeof buf, NULL), PH_E_INVAL);
    assert_int_equal(ph_format_host_port("example.com", 1, NULL, 0, NULL), PH_E_LIMIT);
}

static void test_scheme_helpers(void **state)
{
    (void)state;
    assert_string_equal(ph_scheme_name(PH_SCHEME_HTTP), "http");
    assert_string_equal(ph_scheme_name(PH_SCHEME_HTTPS), "https");
    assert_string_equal(ph_scheme_name(PH_SCHEME_NONE), "");
    assert_int_equal(ph_scheme_default_port(PH_SCHEME_HTTP), 80);
    assert_int_equal(ph_scheme_default_port(PH_SCHEME_HTTPS), 443);
    assert_int_equal(ph_scheme_default_port(PH_SCHEME_NONE), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_fields),
        cmocka_unit_test(test_length_bounded_input),
        cmocka_unit_test(test_every_byte_at_every_offset),
        cmocka_unit_test(test_diagnostics_name_the_problem_and_its_offset),
        cmocka_unit_test(test_ip_literal_is_not_a_parse_error),
        cmocka_unit_test(test_invalid_a_labels_are_refused),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_authority),
        cmocka_unit_test(test_format_round_trips),
        cmocka_unit_test(test_format_refusals),
        cmocka_unit_test(test_scheme_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
