/* base64.c - strict, canonical base64 (standard with padding, and
 * base64url without): pinhole/base64.h. */
#include "pinhole/base64.h"

static const char STD_ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char URL_ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t ph_b64_encoded_len(size_t n, ph_b64_alphabet a)
{
    if (a == PH_B64_STD_PAD)
        return (n + 2) / 3 * 4;
    return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

size_t ph_b64_encode(const uint8_t *in, size_t n, ph_b64_alphabet a, char *out, size_t cap)
{
    const char *alpha = a == PH_B64_STD_PAD ? STD_ALPHABET : URL_ALPHABET;
    size_t need = ph_b64_encoded_len(n, a);
    if (cap < need + 1)
        return 0;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = alpha[v >> 18 & 63];
        out[o++] = alpha[v >> 12 & 63];
        out[o++] = alpha[v >> 6 & 63];
        out[o++] = alpha[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = alpha[v >> 18 & 63];
        out[o++] = alpha[v >> 12 & 63];
        if (a == PH_B64_STD_PAD) {
            out[o++] = '=';
            out[o++] = '=';
        }
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = alpha[v >> 18 & 63];
        out[o++] = alpha[v >> 12 & 63];
        out[o++] = alpha[v >> 6 & 63];
        if (a == PH_B64_STD_PAD)
            out[o++] = '=';
    }
    out[o] = '\0';
    return o;
}

/* Value of c in the alphabet, or -1. Explicit ranges: no locale, no table
 * that could be indexed by a negative char. */
static int b64_value(unsigned char c, ph_b64_alphabet a)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (a == PH_B64_STD_PAD) {
        if (c == '+')
            return 62;
        if (c == '/')
            return 63;
    } else {
        if (c == '-')
            return 62;
        if (c == '_')
            return 63;
    }
    return -1;
}

bool ph_b64_decode(const char *in, size_t n, ph_b64_alphabet a, uint8_t *out, size_t cap,
                   size_t *out_len)
{
    size_t data = n;
    if (a == PH_B64_STD_PAD) {
        if (n == 0 || n % 4 != 0)
            return false;
        if (in[n - 1] == '=')
            data--;
        if (in[n - 2] == '=') {
            if (data != n - 1)
                return false; /* "=x" at the end */
            data--;
        }
    } else if (n % 4 == 1) {
        return false; /* one leftover character carries no whole byte */
    }
    size_t outn = data / 4 * 3 + (data % 4 == 0 ? 0 : data % 4 - 1);
    if (outn > cap)
        return false;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < data; i++) {
        int v = b64_value((unsigned char)in[i], a);
        if (v < 0)
            return false;
        acc = (acc << 6 | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    /* Canonical: the bits left over after the last whole byte are zero. */
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
        return false;
    if (out_len != NULL)
        *out_len = o;
    return true;
}
