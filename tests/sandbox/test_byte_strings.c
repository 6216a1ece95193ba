/* test_byte_strings.c - a byte string is text exactly when JSON can carry
 * it as text: ph_utf8_valid (the text escape, the spec checks) and
 * json_stringn (the JSON form) accept the same strings, so a name is never
 * text in one output and base64 or escapes in the other. */
#include "sandbox_test_util.h"

#include <jansson.h>
#include <string.h>

#include "pinhole/utf8.h"

static void agree(const unsigned char *s, size_t len)
{
    json_t *t = json_stringn((const char *)s, len);
    bool jansson = t != NULL;
    json_decref(t);
    if (ph_utf8_valid(s, len) != jansson)
        fail_msg("ph_utf8_valid and json_stringn disagree on %02x %02x %02x %02x (%zu bytes)",
                 s[0], len > 1 ? s[1] : 0, len > 2 ? s[2] : 0, len > 3 ? s[3] : 0, len);
}

/* Every string of one and two bytes; every three-byte string and every
 * four-byte string on a lead byte of a longer sequence (0xe0..0xff), the
 * fourth byte of the latter at the edges of the continuation range and
 * just outside it. */
static void test_utf8_agrees_with_jansson(void **state)
{
    (void)state;
    unsigned char s[4] = {0};
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        agree(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            agree(s, 2);
            if (a < 0xe0)
                continue;
            for (unsigned c = 0; c < 256; c++) {
                s[2] = (unsigned char)c;
                agree(s, 3);
                if (a < 0xf0)
                    continue;
                static const unsigned char last[] = {0x00, 0x7f, 0x80, 0xbf, 0xc0, 0xff};
                for (size_t d = 0; d < sizeof last; d++) {
                    s[3] = last[d];
                    agree(s, 4);
                }
            }
        }
    }
    agree((const unsigned char *)"a\0b", 3); /* a NUL is valid UTF-8 to both */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_agrees_with_jansson),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
