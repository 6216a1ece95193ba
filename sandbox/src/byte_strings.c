/* byte_strings.c - file names and outputs are byte strings (a workspace is
 * sandbox-controlled: any byte but NUL and '/' can be in a name), yet JSON
 * carries Unicode text and a terminal reads control characters. One
 * encoding for each, used by every place that prints one (docs/sandbox.md):
 *  - JSON: the bytes as a string under the text key when they are valid
 *    UTF-8 (json_stringn decides; ph_utf8_valid, which the text form and
 *    the spec checks use, accepts exactly what it accepts: RFC 3629, no
 *    overlong, surrogate or value above U+10FFFF) without a NUL, else
 *    their standard base64 under the base64 key. A NUL would go out as \u0000, which a reader without
 *    JSON_ALLOW_NUL (ours included) refuses: binary output would break the
 *    whole frame.
 *    Never dropped: jansson returns NULL for invalid UTF-8 and
 *    json_pack/json_object_set_new with that NULL fail quietly.
 *  - text: ph_text_escape (pinhole/utf8.h, in the base library, so the
 *    artifact store records an exported path the same way): printable
 *    bytes as they are, a backslash doubled, controls and the bytes of a
 *    string that is not UTF-8 escaped. Reversible, and no name can start a
 *    new line. */
#include "sandbox-int.h"

#include "pinhole/base64.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

json_t *ph_json_b64(const void *data, size_t len)
{
    if (len > SIZE_MAX / 4 * 3 - 4)
        return NULL;
    size_t cap = ph_b64_encoded_len(len, PH_B64_STD_PAD) + 1;
    char *b64 = malloc(cap);
    if (b64 == NULL)
        return NULL;
    ph_b64_encode(data, len, PH_B64_STD_PAD, b64, cap);
    json_t *v = json_string(b64);
    free(b64);
    return v;
}

int ph_json_set_bytes(struct json_t *obj, const char *text_key, const char *b64_key,
                      const void *data, size_t len)
{
    bool text = len == 0 || memchr(data, '\0', len) == NULL;
    json_t *v = text ? json_stringn(len ? (const char *)data : "", len) : NULL;
    const char *key = text_key;
    if (v == NULL) {
        v = ph_json_b64(data, len);
        key = b64_key;
    }
    return v == NULL ? -1 : json_object_set_new(obj, key, v);
}
