/* text_escape.c - the text form of a byte string (pinhole/utf8.h): what a
 * terminal, a log line or a text field shows of a name a sandbox chose, so
 * no name can start a new line, move the cursor, carry bytes that are not
 * UTF-8 or draw as something it is not (a zero-width character, a bidi
 * override), and the bytes can still be read back. */
#include "pinhole/utf8.h"

#include <stdint.h>
#include <stdlib.h>

#include "pinhole/hex.h"

/* Appends \xNN for each of the n bytes at s. */
static size_t put_hex(char *out, size_t o, const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = ph_hex_digit(s[i] >> 4);
        out[o++] = ph_hex_digit(s[i]);
    }
    return o;
}

char *ph_text_escape(const char *s, size_t len)
{
    if (len > (SIZE_MAX - 1) / 4)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    bool utf8 = ph_utf8_valid(s, len);
    char *out = malloc(4 * len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
            out[o++] = '\\';
            out[o++] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
            i++;
            continue;
        }
        if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8)) {
            o = put_hex(out, o, u + i, 1);
            i++;
            continue;
        }
        /* One character: a C1 control or an invisible one goes as the hex
         * of all its bytes, anything else as it is. */
        uint32_t cp = c;
        size_t n = c < 0x80 ? 1 : ph_utf8_decode(u + i, len - i, &cp);
        if ((cp >= 0x80 && cp <= 0x9F) || (cp >= 0x80 && ph_unicode_is_invisible(cp))) {
            o = put_hex(out, o, u + i, n);
        } else {
            for (size_t k = 0; k < n; k++)
                out[o++] = (char)u[i + k];
        }
        i += n;
    }
    out[o] = '\0';
    return out;
}
