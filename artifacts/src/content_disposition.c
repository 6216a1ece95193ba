/* content_disposition.c - the Content-Disposition value of an artifact
 * download (RFC 6266): an ASCII quoted-string fallback for old agents and
 * the exact UTF-8 name in RFC 8187 ext-value form. Both halves come from the
 * sanitized name, so neither can carry a quote, a backslash, a CR/LF or a
 * path. */
#include <string.h>

#include "pinhole/artifact_name.h"
#include "pinhole/hex.h"
#include "pinhole/utf8.h"

/* RFC 8187 attr-char: ALPHA / DIGIT / "!" / "#" / "$" / "&" / "+" / "-" /
 * "." / "^" / "_" / "`" / "|" / "~" */
/* RFC 5987 attr-char: ALPHA DIGIT "!#$&+-.^_`|~", the RFC 3986 unreserved
 * set and these. */
static const char ATTR_CHAR_MORE[] = "!#$&+^`|";

size_t ph_content_disposition(const void *name, size_t len, const char *artifact_id,
                              char out[static PH_CONTENT_DISPOSITION_MAX + 1])
{
    char safe[PH_FILENAME_SAFE_MAX + 1], ascii[PH_FILENAME_SAFE_MAX + 1];
    size_t n = ph_filename_sanitize(name, len, artifact_id, safe);
    /* ASCII fallback: one '_' per non-ASCII character; '%' too, because some
     * agents percent-decode the plain filename parameter. */
    size_t a = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += ph_utf8_decode((const unsigned char *)safe + i, n - i, &cp);
        ascii[a++] = (cp >= 0x20 && cp < 0x7f && cp != '%') ? (char)cp : '_';
    }
    char fallback_name[PH_FILENAME_SAFE_MAX + 1];
    size_t f = ph_filename_sanitize(ascii, a, artifact_id, fallback_name);

    size_t o = 0;
    static const char head[] = "attachment; filename=\"";
    memcpy(out + o, head, sizeof head - 1);
    o += sizeof head - 1;
    memcpy(out + o, fallback_name, f);
    o += f;
    static const char mid[] = "\"; filename*=UTF-8''";
    memcpy(out + o, mid, sizeof mid - 1);
    o += sizeof mid - 1;
    /* 22 + 255 + 20 + 3 * 255 < PH_CONTENT_DISPOSITION_MAX: always fits. */
    return o + ph_percent_encode(safe, n, ATTR_CHAR_MORE, out + o,
                                 PH_CONTENT_DISPOSITION_MAX + 1 - o);
}

size_t ph_artifact_content_disposition(const ph_artifact_metadata *m,
                                       char out[static PH_CONTENT_DISPOSITION_MAX + 1])
{
    return ph_content_disposition(m->filename, m->filename_len, m->artifact_id, out);
}
