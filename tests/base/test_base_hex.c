/* Lowercase hex: round trips, one spelling, every bad input refused with
 * its offset. */
#include "test_support.h"

#include <string.h>

#include "pinhole/hex.h"

static void test_round_trip_all_bytes(void **state)
{
    (void)state;
    unsigned char in[256], back[256];
    char hex[513];
    for (int i = 0; i < 256; i++)
        in[i] = (unsigned char)i;
    ph_hex_encode(in, sizeof in, hex);
    assert_int_equal(strlen(hex), 512);
    assert_memory_equal(hex, "000102", 6);
    assert_string_equal(hex + 500, "fafbfcfdfeff");
    size_t bad = 99;
    assert_true(ph_hex_decode(hex, 512, back, &bad));
    assert_int_equal(bad, 99); /* untouched on success */
    assert_memory_equal(in, back, sizeof in);
    ph_hex_encode(NULL, 0, hex);
    assert_string_equal(hex, "");
    assert_true(ph_hex_decode("", 0, back, NULL));
}

static void test_bad_input(void **state)
{
    (void)state;
    unsigned char out[8];
    size_t bad = 0;
    assert_false(ph_hex_decode("abc", 3, out, &bad)); /* odd length */
    assert_int_equal(bad, 3);
    assert_false(ph_hex_decode("AB", 2, out, &bad)); /* uppercase: not our spelling */
    assert_int_equal(bad, 0);
    assert_false(ph_hex_decode("0g", 2, out, &bad));
    assert_int_equal(bad, 1);
    assert_false(ph_hex_decode("00 1", 4, out, &bad));
    assert_int_equal(bad, 2);
    assert_false(ph_hex_decode("0\0", 2, out, &bad));
    assert_int_equal(bad, 1);
    assert_false(ph_hex_decode("-1", 2, out, NULL));
    assert_false(ph_hex_decode("\xff" "0", 2, out, NULL));
}

static void test_digits(void **state)
{
    (void)state;
    for (unsigned v = 0; v < 16; v++) {
        char c = ph_hex_digit(v);
        assert_int_equal(ph_hex_value((unsigned char)c), (int)v);
        assert_int_equal(ph_hex_digit(v + 16), c);
    }
    assert_int_equal(ph_hex_value('A'), -1);
    assert_int_equal(ph_hex_value('g'), -1);
    assert_int_equal(ph_hex_value(0), -1);
    assert_int_equal(ph_hex_value(0xff), -1);
}

/* Random ids: the asked number of bytes as lowercase hex, a fresh value
 * each call, out-of-range lengths refused with "" written. */
static void test_random(void **state)
{
    (void)state;
    char a[2 * PH_HEX_RANDOM_MAX + 1], b[2 * PH_HEX_RANDOM_MAX + 1];
    unsigned char raw[PH_HEX_RANDOM_MAX];
    for (size_t len = 1; len <= PH_HEX_RANDOM_MAX; len *= 2) {
        memset(a, 'x', sizeof a);
        assert_true(ph_hex_random(len, a));
        assert_int_equal(strlen(a), 2 * len);
        assert_true(ph_hex_decode(a, 2 * len, raw, NULL)); /* lowercase digits only */
    }
    assert_true(ph_hex_random(16, a));
    assert_true(ph_hex_random(16, b));
    assert_string_not_equal(a, b); /* 128 bits: equal only if the RNG is broken */
    memset(a, 'x', sizeof a);
    assert_false(ph_hex_random(0, a));
    assert_string_equal(a, "");
    memset(a, 'x', sizeof a);
    assert_false(ph_hex_random(PH_HEX_RANDOM_MAX + 1, a));
    assert_string_equal(a, "");
}

static void test_percent_encoding(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(ph_percent_encode("aZ09-._~", 8, NULL, out, sizeof out), 8);
    assert_string_equal(out, "aZ09-._~");
    assert_int_equal(ph_percent_encode("a b/c%\xff\0", 8, NULL, out, sizeof out), 18);
    assert_string_equal(out, "a%20b%2Fc%25%FF%00");
    assert_int_equal(ph_percent_encode("a/b!", 4, "/!", out, sizeof out), 4);
    assert_string_equal(out, "a/b!");
    /* Exactly full (NUL included) fits; one byte less does not. */
    assert_int_equal(ph_percent_encode(" ", 1, NULL, out, 4), 3);
    assert_string_equal(out, "%20");
    assert_int_equal(ph_percent_encode(" ", 1, NULL, out, 3), PH_PERCENT_TOO_LONG);
    assert_string_equal(out, "");
    assert_int_equal(ph_percent_encode("", 0, NULL, out, 1), 0);
    assert_int_equal(ph_percent_encode("", 0, NULL, out, 0), PH_PERCENT_TOO_LONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_all_bytes),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_percent_encoding),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
