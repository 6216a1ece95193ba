/* Strict UTF-8 and the invisible code points. */
#include "test_support.h"

#include <string.h>

#include "pinhole/utf8.h"

static size_t dec(const char *s, size_t len, uint32_t *cp)
{
    return ph_utf8_decode((const unsigned char *)s, len, cp);
}

static void test_valid_sequences(void **state)
{
    (void)state;
    uint32_t cp;
    assert_int_equal(dec("A", 1, &cp), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(dec("\0", 1, &cp), 1);
    assert_int_equal(cp, 0);
    assert_int_equal(dec("\xc2\x80", 2, &cp), 2);
    assert_int_equal(cp, 0x80);
    assert_int_equal(dec("\xdf\xbf", 2, &cp), 2);
    assert_int_equal(cp, 0x7ff);
    assert_int_equal(dec("\xe0\xa0\x80", 3, &cp), 3);
    assert_int_equal(cp, 0x800);
    assert_int_equal(dec("\xed\x9f\xbf", 3, &cp), 3); /* U+D7FF, below the surrogates */
    assert_int_equal(cp, 0xd7ff);
    assert_int_equal(dec("\xee\x80\x80", 3, &cp), 3); /* U+E000, above them */
    assert_int_equal(cp, 0xe000);
    assert_int_equal(dec("\xef\xbb\xbf", 3, &cp), 3);
    assert_int_equal(cp, 0xfeff);
    assert_int_equal(dec("\xf0\x90\x80\x80", 4, &cp), 4);
    assert_int_equal(cp, 0x10000);
    assert_int_equal(dec("\xf4\x8f\xbf\xbf", 4, &cp), 4);
    assert_int_equal(cp, 0x10ffff);
    assert_true(ph_utf8_valid("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80", 15));
    assert_true(ph_utf8_valid("a\0b", 3));
    assert_true(ph_utf8_valid("", 0));
}

/* Each bad sequence takes one byte and gives PH_UTF8_INVALID. */
static void expect_invalid(const char *s, size_t len)
{
    uint32_t cp = 0;
    assert_int_equal(dec(s, len, &cp), 1);
    assert_int_equal(cp, PH_UTF8_INVALID);
    assert_false(ph_utf8_valid(s, len));
    assert_int_equal(ph_utf8_first_invalid(s, len), 0);
}

static void test_invalid_sequences(void **state)
{
    (void)state;
    expect_invalid("\xc0\xaf", 2);             /* overlong '/' */
    expect_invalid("\xc1\xbf", 2);             /* overlong */
    expect_invalid("\xe0\x80\xaf", 3);         /* overlong, 3 bytes */
    expect_invalid("\xe0\x9f\xbf", 3);         /* overlong U+07FF */
    expect_invalid("\xf0\x80\x80\xaf", 4);     /* overlong, 4 bytes */
    expect_invalid("\xf0\x8f\xbf\xbf", 4);     /* overlong U+FFFF */
    expect_invalid("\xed\xa0\x80", 3);         /* U+D800, a surrogate */
    expect_invalid("\xed\xbf\xbf", 3);         /* U+DFFF */
    expect_invalid("\xf4\x90\x80\x80", 4);     /* U+110000 */
    expect_invalid("\xf5\x80\x80\x80", 4);     /* lead byte past U+10FFFF */
    expect_invalid("\xff", 1);
    expect_invalid("\x80", 1);                 /* stray continuation */
    expect_invalid("\xc3", 1);                 /* truncated */
    expect_invalid("\xe2\x82", 2);             /* truncated */
    expect_invalid("\xf0\x9f\x98", 3);         /* truncated */
    expect_invalid("\xe2\x28\xa1", 3);         /* bad continuation */
    /* The length given, not a NUL, ends the input. */
    expect_invalid("\xc3\xa9", 1);
    assert_int_equal(ph_utf8_first_invalid("ok\xc3\xa9\xed\xa0\x80", 7), 4);
}

static void test_invisible_table(void **state)
{
    (void)state;
    static const uint32_t invisible[] = {
        0x00AD, 0x034F, 0x061C, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028,
        0x2029, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2060, 0x2066, 0x2067, 0x2068,
        0x2069, 0xFE0F, 0xFEFF, 0xFFF9, 0xFFFB, 0xE0001, 0xE0041, 0xE007F, 0xFDD0, 0xFFFE,
        0x10FFFF, 0x1D173,
    };
    for (size_t i = 0; i < sizeof invisible / sizeof invisible[0]; i++)
        assert_true(ph_unicode_is_invisible(invisible[i]));
    static const uint32_t visible[] = {
        'a', ' ', '/', 0x00E9, 0x0410, 0x05D0, 0x0627, 0x200A, 0x2010, 0x2030, 0x2070,
        0x4E2D, 0xFE10, 0xFF0F, 0x1F600, 0x10000,
    };
    for (size_t i = 0; i < sizeof visible / sizeof visible[0]; i++)
        assert_false(ph_unicode_is_invisible(visible[i]));
    assert_false(ph_unicode_is_invisible(PH_UTF8_INVALID));
    /* The Trojan Source set: embeddings, overrides, isolates. */
    for (uint32_t cp = 0x202A; cp <= 0x202E; cp++)
        assert_true(ph_unicode_is_bidi_override(cp));
    for (uint32_t cp = 0x2066; cp <= 0x2069; cp++)
        assert_true(ph_unicode_is_bidi_override(cp));
    assert_false(ph_unicode_is_bidi_override(0x200E)); /* a mark reorders nothing */
    assert_false(ph_unicode_is_bidi_override(0x200B));
    assert_false(ph_unicode_is_bidi_override(0xFEFF));
    assert_false(ph_unicode_is_bidi_override('a'));
    /* Every override is invisible too. */
    for (uint32_t cp = 0; cp < 0x30000; cp++)
        if (ph_unicode_is_bidi_override(cp))
            assert_true(ph_unicode_is_invisible(cp));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_sequences),
        cmocka_unit_test(test_invalid_sequences),
        cmocka_unit_test(test_invisible_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
