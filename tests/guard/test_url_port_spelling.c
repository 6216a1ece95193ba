/* test_url_port_spelling.c - a port's spelling is named before its range:
 * "018080" is a leading zero however many digits follow, in URLs and in
 * CONNECT authorities alike. */
#include "test_support.h"

#include <string.h>

#include "pinhole/url.h"

static void test_leading_zero_is_named_before_the_range(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        size_t offset;
        const char *says;
    } cases[] = {
        {"http://example.com:018080", 19, "port has a leading zero"},
        {"http://example.com:0000000000443", 19, "port has a leading zero"},
        {"http://example.com:00", 19, "port has a leading zero"},
        {"http://example.com:0", 19, "port 0 is not allowed"},
        {"http://example.com:180800", 24, "port out of range"},
        {"http://example.com:65536", 19, "port out of range"},
        {"http://example.com:0x50", 20, "not a decimal"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_url u;
        ph_diag d = {0};
        assert_int_equal(ph_url_parse(cases[i].url, strlen(cases[i].url), &u, &d), PH_E_INVAL);
        if (strstr(d.message, cases[i].says) == NULL || d.offset != cases[i].offset)
            fail_msg("%s: got \"%s\" at %zu, want \"%s\" at %zu", cases[i].url, d.message,
                     d.offset, cases[i].says, cases[i].offset);
        assert_int_equal(u.reason, PH_REASON_PARSE_ERROR);
    }
    ph_authority a;
    ph_diag d = {0};
    assert_int_equal(ph_authority_parse("example.com:018080", 18, &a, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "port has a leading zero"));
    assert_int_equal(ph_authority_parse("example.com:18080", 17, &a, &d), PH_OK);
    assert_int_equal(a.port, 18080);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leading_zero_is_named_before_the_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
