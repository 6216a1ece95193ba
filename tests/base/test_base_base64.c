/* Canonical base64: round trips in both alphabets, one spelling per value. */
#include "test_support.h"

#include <string.h>

#include "pinhole/base64.h"

static void test_round_trips(void **state)
{
    (void)state;
    uint8_t in[64], back[64];
    char enc[100];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (uint8_t)(i * 37 + 11);
    for (int a = 0; a < 2; a++) {
        ph_b64_alphabet alpha = a ? PH_B64_STD_PAD : PH_B64_URL_NOPAD;
        for (size_t n = 1; n <= sizeof in; n++) {
            size_t e = ph_b64_encode(in, n, alpha, enc, sizeof enc);
            assert_int_equal(e, ph_b64_encoded_len(n, alpha));
            assert_int_equal(strlen(enc), e);
            size_t got = 0;
            assert_true(ph_b64_decode(enc, e, alpha, back, sizeof back, &got));
            assert_int_equal(got, n);
            assert_memory_equal(in, back, n);
        }
    }
    assert_int_equal(ph_b64_encode((const uint8_t *)"\xfb\xff", 2, PH_B64_STD_PAD, enc, sizeof enc), 4);
    assert_string_equal(enc, "+/8=");
    assert_int_equal(ph_b64_encode((const uint8_t *)"\xfb\xff", 2, PH_B64_URL_NOPAD, enc, sizeof enc), 3);
    assert_string_equal(enc, "-_8");
    /* No bytes: "" (and decoding "" is for the caller to allow). */
    strcpy(enc, "junk");
    assert_int_equal(ph_b64_encode(NULL, 0, PH_B64_STD_PAD, enc, sizeof enc), 0);
    assert_string_equal(enc, "");
    /* Too small a buffer: 0 and nothing written. */
    strcpy(enc, "keep");
    assert_int_equal(ph_b64_encode(in, 3, PH_B64_STD_PAD, enc, 4), 0);
    assert_string_equal(enc, "keep");
}

static void test_non_canonical_and_bad_input(void **state)
{
    (void)state;
    uint8_t out[16];
    size_t n = 0;
    const char *bad_std[] = {"", "YQ", "YR==", "YQ=A", "Y===", "YQ =", "YQ==\n", "-_8=", "YQ==YQ=="};
    for (size_t i = 0; i < sizeof bad_std / sizeof bad_std[0]; i++)
        assert_false(ph_b64_decode(bad_std[i], strlen(bad_std[i]), PH_B64_STD_PAD, out, sizeof out, &n));
    const char *bad_url[] = {"+/8", "-_8=", "-_9", "A", "YQ=="};
    for (size_t i = 0; i < sizeof bad_url / sizeof bad_url[0]; i++)
        assert_false(ph_b64_decode(bad_url[i], strlen(bad_url[i]), PH_B64_URL_NOPAD, out, sizeof out, &n));
    assert_false(ph_b64_decode("YWJj", 4, PH_B64_STD_PAD, out, 2, &n)); /* no room */
    assert_true(ph_b64_decode("YWJj", 4, PH_B64_STD_PAD, out, 3, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(out, "abc", 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_non_canonical_and_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
