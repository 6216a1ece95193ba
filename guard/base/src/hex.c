/* hex.c - lowercase hexadecimal (pinhole/hex.h). */
#include "pinhole/hex.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

static const char digits[] = "0123456789abcdef";

char ph_hex_digit(unsigned v)
{
    return digits[v & 15];
}

int ph_hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int ph_hex_value_any_case(int c)
{
    return ph_hex_value(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
}

void ph_hex_encode(const void *in, size_t len, char *out)
{
    const uint8_t *p = in;
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * len] = '\0';
}

bool ph_hex_decode(const char *hex, size_t hex_len, void *out, size_t *bad_at)
{
    uint8_t *o = out;
    for (size_t i = 0; i < hex_len; i += 2) {
        int hi = ph_hex_value((unsigned char)hex[i]);
        if (hi < 0) {
            if (bad_at)
                *bad_at = i;
            return false;
        }
        if (i + 1 == hex_len) {
            if (bad_at)
                *bad_at = hex_len;
            return false;
        }
        int lo = ph_hex_value((unsigned char)hex[i + 1]);
        if (lo < 0) {
            if (bad_at)
                *bad_at = i + 1;
            return false;
        }
        o[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

bool ph_hex_random(size_t len, char *out)
{
    uint8_t raw[PH_HEX_RANDOM_MAX];
    out[0] = '\0';
    if (len == 0 || len > sizeof raw) {
        errno = EINVAL;
        return false;
    }
    /* Up to 256 bytes come whole once the pool is seeded; a signal while
     * waiting for the seed is the one interruption. */
    ssize_t got;
    do
        got = getrandom(raw, len, 0);
    while (got < 0 && errno == EINTR);
    if (got != (ssize_t)len) {
        if (got >= 0)
            errno = EIO;
        return false;
    }
    ph_hex_encode(raw, len, out);
    return true;
}

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

size_t ph_percent_encode(const void *in, size_t len, const char *keep, char *out, size_t cap)
{
    static const char upper[] = "0123456789ABCDEF";
    const uint8_t *p = in;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = p[i];
        bool plain = unreserved(c) || (keep != NULL && c != 0 && strchr(keep, c) != NULL);
        if (o + (plain ? 1 : 3) >= cap) {
            if (cap > 0)
                out[0] = '\0';
            return PH_PERCENT_TOO_LONG;
        }
        if (plain) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = upper[c >> 4];
            out[o++] = upper[c & 15];
        }
    }
    if (cap == 0)
        return PH_PERCENT_TOO_LONG;
    out[o] = '\0';
    return o;
}
