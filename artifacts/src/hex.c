/* hex.c - lowercase hex, the only encoding of binary fields in metadata.
 * Decoding accepts lowercase only so every value has one spelling. */
#include "hex-int.h"

static const char digits[] = "0123456789abcdef";

void ph_art_hex_encode(const void *in, size_t len, char *out)
{
    const unsigned char *p = in;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * len] = '\0';
}

static int nibble(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

bool ph_art_hex_decode(const char *hex, size_t hex_len, unsigned char *out)
{
    if (hex_len % 2 != 0)
        return false;
    for (size_t i = 0; i < hex_len; i += 2) {
        int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}
