/* text_escape.c - the text form of a byte string (pinhole/utf8.h): what a
 * terminal, a log line or a text field shows of a name a sandbox chose, so
 * no name can start a new line, move the cursor or carry bytes that are not
 * UTF-8, and the bytes can still be read back. */
#include "pinhole/utf8.h"

#include <stdint.h>
#include <stdlib.h>

#include "pinhole/hex.h"

char *ph_text_escape(const char *s, size_t len)
{
    if (len > (SIZE_MAX - 1) / 4)
        return NULL;
    bool utf8 = ph_utf8_valid(s, len);
    char *out = malloc(4 * len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        bool c1 = utf8 && c == 0xC2 && i + 1 < len && (unsigned char)s[i + 1] <= 0x9F;
        if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
            out[o++] = '\\';
            out[o++] = c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8) || c1) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = ph_hex_digit(c >> 4);
            out[o++] = ph_hex_digit(c);
            if (c1) { /* the second byte of a C1 control too */
                c = (unsigned char)s[++i];
                out[o++] = '\\';
                out[o++] = 'x';
                out[o++] = ph_hex_digit(c >> 4);
                out[o++] = ph_hex_digit(c);
            }
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return out;
}
