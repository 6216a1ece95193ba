/* test_host.c - the canonical host name rules of pinhole/host.h. */
#include "test_support.h"

#include <string.h>

#include "pinhole/host.h"

static ph_host_error check(const char *h)
{
    return ph_host_check(h, strlen(h), NULL);
}

static void test_valid_names(void **state)
{
    (void)state;
    assert_int_equal(check("example.com"), PH_HOST_OK);
    assert_int_equal(check("a.b.c.example.co.uk"), PH_HOST_OK);
    assert_int_equal(check("xn--bcher-kva.example"), PH_HOST_OK);
    assert_int_equal(check("1password.com"), PH_HOST_OK);
    assert_int_equal(check("a-b.c0"), PH_HOST_OK);
}

static void test_ip_literals_in_every_spelling(void **state)
{
    (void)state;
    const char *literals[] = {
        "127.0.0.1", "127.0.0.1.", "127.1", "2130706433", "0x7f.1", "0x7f000001",
        "017700000001", "0177.0.0.1", "a.0x10", "example.123", "0x", "::1", "[::1]",
        "::ffff:127.0.0.1", "169.254.169.254", "1.2.3.4.5", "fe80::1%eth0",
    };
    for (size_t i = 0; i < sizeof literals / sizeof *literals; i++) {
        assert_true(ph_host_is_ip_literal(literals[i], strlen(literals[i])));
        assert_int_equal(check(literals[i]), PH_HOST_IP_LITERAL);
    }
    assert_false(ph_host_is_ip_literal("0xg.example", 11));
    assert_false(ph_host_is_ip_literal("123.example", 11));
}

static void test_syntax_errors(void **state)
{
    (void)state;
    size_t at = 99;
    assert_int_equal(ph_host_check("Example.com", 11, &at), PH_HOST_UPPERCASE);
    assert_int_equal(at, 0);
    assert_int_equal(check(""), PH_HOST_EMPTY);
    assert_int_equal(check("example.com."), PH_HOST_TRAILING_DOT);
    assert_int_equal(check("a..com"), PH_HOST_EMPTY_LABEL);
    assert_int_equal(check(".a.com"), PH_HOST_EMPTY_LABEL);
    assert_int_equal(check("localhost"), PH_HOST_SINGLE_LABEL);
    assert_int_equal(check("-a.com"), PH_HOST_HYPHEN_EDGE);
    assert_int_equal(check("a-.com"), PH_HOST_HYPHEN_EDGE);
    assert_int_equal(check("ex_ample.com"), PH_HOST_BAD_CHAR);
    assert_int_equal(check("ex@ample.com"), PH_HOST_BAD_CHAR);
    assert_int_equal(check("b\xc3\xbc" "cher.de"), PH_HOST_NON_ASCII);
    assert_int_equal(ph_host_check("a\0b.com", 7, &at), PH_HOST_BAD_CHAR);
    assert_int_equal(at, 1);
}

static void test_length_limits(void **state)
{
    (void)state;
    char buf[400];
    memset(buf, 'a', 63);
    memcpy(buf + 63, ".com", 5);
    assert_int_equal(check(buf), PH_HOST_OK);
    memset(buf, 'a', 64);
    memcpy(buf + 64, ".com", 5);
    assert_int_equal(check(buf), PH_HOST_LABEL_TOO_LONG);
    /* 4 labels of 63 + 3 dots = 255 > 253 */
    size_t n = 0;
    for (int l = 0; l < 4; l++) {
        memset(buf + n, 'a', 63);
        n += 63;
        buf[n++] = '.';
    }
    buf[n - 1] = '\0';
    assert_int_equal(check(buf), PH_HOST_TOO_LONG);
    buf[253] = '\0'; /* 253 bytes, last label 61 */
    assert_int_equal(check(buf), PH_HOST_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_names),
        cmocka_unit_test(test_ip_literals_in_every_spelling),
        cmocka_unit_test(test_syntax_errors),
        cmocka_unit_test(test_length_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
