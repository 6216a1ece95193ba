/* filename_normalize.c - NFC and NFKC for the filename rules
 * (filename_rules-int.h). The normalization tables are libunistring's
 * (u8_normalize), never a copy of them here. */
#include <stdlib.h>
#include <string.h>

#include <uninorm.h>
#include <unistr.h>

#include "filename_rules-int.h"
#include "pinhole/utf8.h"

/* NFKC of one code point never exceeds 18 code points (U+FDFA), at most
 * 3 bytes each; anything longer still works through the malloc path. */
#define ONE_CHAR_NFKC_MAX 64

char *ph_fn_normalize(bool compat, const char *s, size_t len, char *buf, size_t cap, size_t *n)
{
    if (len == 0) {
        *n = 0;
        return buf;
    }
    size_t out_len = cap;
    uint8_t *r = u8_normalize(compat ? UNINORM_NFKC : UNINORM_NFC, (const uint8_t *)s, len,
                              (uint8_t *)buf, &out_len);
    if (r == NULL)
        return NULL;
    *n = out_len;
    return (char *)r;
}

/* Decodes NFKC(cp0) into cps (at most max code points, *count of them).
 * False when memory ran out: the caller then treats cp0 as unsafe. */
static bool nfkc_of(uint32_t cp0, uint32_t *cps, size_t max, size_t *count)
{
    uint8_t in[4];
    int k = u8_uctomb(in, cp0, sizeof in);
    if (k <= 0)
        return false;
    char small[ONE_CHAR_NFKC_MAX];
    size_t n;
    char *r = ph_fn_normalize(true, (const char *)in, (size_t)k, small, sizeof small, &n);
    if (r == NULL)
        return false;
    size_t c = 0;
    for (size_t i = 0; i < n && c < max;) {
        uint32_t cp;
        i += ph_utf8_decode((const unsigned char *)r + i, n - i, &cp);
        cps[c++] = cp;
    }
    if (r != small)
        free(r);
    *count = c;
    return c > 0;
}

bool ph_fn_compat_is_unsafe(uint32_t cp)
{
    if (cp < 0x80)
        return false; /* ASCII is its own NFKC; the plain rules judge it */
    uint32_t cps[ONE_CHAR_NFKC_MAX];
    size_t count = 0;
    if (!nfkc_of(cp, cps, ONE_CHAR_NFKC_MAX, &count))
        return true;
    for (size_t i = 0; i < count; i++)
        if (ph_fn_is_separator(cps[i]) || ph_fn_is_forbidden_punct(cps[i]) ||
            ph_fn_is_control(cps[i]) || ph_unicode_is_invisible(cps[i]) ||
            cps[i] == PH_UTF8_INVALID)
            return true;
    return false;
}

void ph_fn_compat_ends(uint32_t cp, uint32_t *first, uint32_t *last)
{
    *first = *last = cp;
    if (cp < 0x80)
        return;
    uint32_t cps[ONE_CHAR_NFKC_MAX];
    size_t count = 0;
    if (nfkc_of(cp, cps, ONE_CHAR_NFKC_MAX, &count)) {
        *first = cps[0];
        *last = cps[count - 1];
    }
}
