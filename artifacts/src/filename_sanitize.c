/* filename_sanitize.c - any bytes in, a safe local filename out, plus the
 * one checker of every rule (docs/filenames.md). Sanitizing happens on the
 * way out: the stored filename is untouched. */
#include <stdlib.h>
#include <string.h>

#include "filename_rules-int.h"
#include "pinhole/artifact_name.h"
#include "utf8-int.h"

static bool is_trim_char(char c)
{
    return c == '.' || c == ' ';
}

/* Length of the longest prefix of s (len bytes, valid UTF-8) that is at most
 * max bytes and does not split a sequence. */
static size_t utf8_prefix(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* One pass of the name-level rules over buf (valid UTF-8, only allowed
 * characters). Returns the new length; the caller repeats until it stops
 * changing, which makes the whole function idempotent. */
static size_t apply_name_rules(char *buf, size_t len, size_t cap)
{
    size_t start = 0;
    while (start < len && is_trim_char(buf[start]))
        start++;
    memmove(buf, buf + start, len - start);
    len -= start;
    while (len > 0 && is_trim_char(buf[len - 1]))
        len--;
    if (len > 0 && ph_fn_is_device_name(buf, len) && len + 1 <= cap) {
        memmove(buf + 1, buf, len);
        buf[0] = '_';
        len++;
    }
    if (len > PH_FILENAME_SAFE_MAX) {
        /* Keep a short extension ("report.pdf" stays a PDF) and cut the stem. */
        const char *dot = NULL;
        for (size_t i = len; i-- > 1;)
            if (buf[i] == '.') {
                dot = buf + i;
                break;
            }
        size_t ext = dot ? (size_t)(buf + len - dot) : 0;
        if (ext > 0 && ext <= 32) {
            size_t stem = utf8_prefix(buf, len - ext, PH_FILENAME_SAFE_MAX - ext);
            memmove(buf + stem, buf + len - ext, ext);
            len = stem + ext;
        } else {
            len = utf8_prefix(buf, len, PH_FILENAME_SAFE_MAX);
        }
    }
    return len;
}

static size_t fallback(const char *artifact_id, char *out)
{
    if (artifact_id != NULL && ph_artifact_id_valid(artifact_id, strnlen(artifact_id, 33))) {
        memcpy(out, "artifact-", 9);
        memcpy(out + 9, artifact_id, 8);
        out[17] = '\0';
        return 17;
    }
    memcpy(out, "artifact", 9);
    return 8;
}

size_t ph_filename_sanitize(const void *name, size_t len, const char *artifact_id,
                            char out[static PH_FILENAME_SAFE_MAX + 1])
{
    const unsigned char *in = name;
    if (in == NULL)
        len = 0;
    /* Only the last non-empty component: a name never carries a directory. */
    while (len > 0 && (in[len - 1] == '/' || in[len - 1] == '\\'))
        len--;
    size_t begin = len;
    while (begin > 0 && in[begin - 1] != '/' && in[begin - 1] != '\\')
        begin--;
    /* Every per-character rule only shrinks its input ('_' for a longer
     * sequence), so len + 2 bytes hold the result and a device prefix. */
    size_t cap = len - begin + 2;
    char *buf = malloc(cap);
    if (buf == NULL)
        return fallback(artifact_id, out);
    size_t n = 0;
    for (size_t i = begin; i < len;) {
        uint32_t cp;
        size_t used = ph_art_utf8_decode(in + i, len - i, &cp);
        if (cp == PH_ART_UTF8_INVALID || ph_fn_is_forbidden_punct(cp)) {
            buf[n++] = '_';
        } else if (!ph_fn_is_control(cp) && !ph_fn_is_invisible(cp)) {
            memcpy(buf + n, in + i, used);
            n += used;
        }
        i += used;
    }
    for (size_t prev = (size_t)-1; prev != n;) {
        prev = n;
        n = apply_name_rules(buf, n, cap);
    }
    if (n == 0) {
        free(buf);
        return fallback(artifact_id, out);
    }
    memcpy(out, buf, n);
    out[n] = '\0';
    free(buf);
    return n;
}

bool ph_filename_is_safe(const char *name, size_t len, const char **why)
{
    const char *dummy;
    if (why == NULL)
        why = &dummy;
    if (name == NULL || len == 0)
        return *why = "empty", false;
    if (len > PH_FILENAME_SAFE_MAX)
        return *why = "longer than 255 bytes", false;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += ph_art_utf8_decode((const unsigned char *)name + i, len - i, &cp);
        if (cp == PH_ART_UTF8_INVALID)
            return *why = "invalid UTF-8", false;
        if (ph_fn_is_control(cp))
            return *why = "control character", false;
        if (ph_fn_is_invisible(cp))
            return *why = "invisible or format character", false;
        if (ph_fn_is_separator(cp))
            return *why = "directory separator", false;
        if (ph_fn_is_forbidden_punct(cp))
            return *why = "quote or Windows-forbidden character", false;
    }
    if (is_trim_char(name[0]))
        return *why = "leading dot or space", false;
    if (is_trim_char(name[len - 1]))
        return *why = "trailing dot or space", false;
    if (ph_fn_is_device_name(name, len))
        return *why = "reserved device name", false;
    return true;
}

size_t ph_artifact_safe_filename(const ph_artifact_metadata *m,
                                 char out[static PH_FILENAME_SAFE_MAX + 1])
{
    return ph_filename_sanitize(m->filename, m->filename_len, m->artifact_id, out);
}
