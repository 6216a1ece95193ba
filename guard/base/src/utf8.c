/* utf8.c - strict UTF-8 decoding (RFC 3629): no overlongs, no surrogates,
 * nothing above U+10FFFF (pinhole/utf8.h). */
#include "pinhole/utf8.h"

size_t ph_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned char b = s[0];
    size_t need;
    uint32_t v, min;
    if (b < 0x80) {
        *cp = b;
        return 1;
    } else if (b >= 0xc2 && b <= 0xdf) {
        need = 1, v = b & 0x1f, min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
        need = 2, v = b & 0x0f, min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
        need = 3, v = b & 0x07, min = 0x10000;
    } else {
        *cp = PH_UTF8_INVALID; /* a continuation byte, 0xc0, 0xc1, 0xf5.. */
        return 1;
    }
    if (len < need + 1) {
        *cp = PH_UTF8_INVALID;
        return 1;
    }
    for (size_t i = 1; i <= need; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *cp = PH_UTF8_INVALID;
            return 1;
        }
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
        *cp = PH_UTF8_INVALID;
        return 1;
    }
    *cp = v;
    return need + 1;
}

size_t ph_utf8_first_invalid(const void *s, size_t len)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t n = ph_utf8_decode(p + i, len - i, &cp);
        if (cp == PH_UTF8_INVALID)
            return i;
        i += n;
    }
    return len;
}

bool ph_utf8_valid(const void *s, size_t len)
{
    return ph_utf8_first_invalid(s, len) == len;
}
