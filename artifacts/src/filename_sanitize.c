/* filename_sanitize.c - any bytes in, a safe local filename out, plus the
 * one checker of every rule (docs/filenames.md). Sanitizing happens on the
 * way out: the stored filename is untouched.
 *
 * Every rule holds for the name and again for its NFKC form, and the name is
 * in NFC: a program that applies NFKC later (some file systems, archivers,
 * Windows' best-fit conversion) must not find a separator, a "..", a device
 * name or a leading dot or dash that the name did not show. */
#include <stdlib.h>
#include <string.h>

#include "filename_rules-int.h"
#include "pinhole/artifact_name.h"
#include "pinhole/utf8.h"

/* What the checker says per broken rule, for the name itself and for its
 * NFKC form; indexed by rule. */
typedef enum rule {
    RULE_OK,
    RULE_EMPTY,
    RULE_LONG,
    RULE_UTF8,
    RULE_CONTROL,
    RULE_INVISIBLE,
    RULE_SEPARATOR,
    RULE_LOOKALIKE,
    RULE_PUNCT,
    RULE_LEADING,
    RULE_LEADING_DASH,
    RULE_TRAILING,
    RULE_DEVICE,
    RULE_NOT_NFC,
    RULE_NOMEM,
    RULE_COUNT_
} rule;

static const char *const why_name[RULE_COUNT_] = {
    [RULE_EMPTY] = "empty",
    [RULE_LONG] = "longer than 255 bytes",
    [RULE_UTF8] = "invalid UTF-8",
    [RULE_CONTROL] = "control character",
    [RULE_INVISIBLE] = "invisible or format character",
    [RULE_SEPARATOR] = "directory separator",
    [RULE_LOOKALIKE] = "look-alike of a directory separator",
    [RULE_PUNCT] = "quote or Windows-forbidden character",
    [RULE_LEADING] = "leading dot or space",
    [RULE_LEADING_DASH] = "leading dash",
    [RULE_TRAILING] = "trailing dot or space",
    [RULE_DEVICE] = "reserved device name",
    [RULE_NOT_NFC] = "not in Unicode NFC",
    [RULE_NOMEM] = "out of memory",
};

static const char *const why_nfkc[RULE_COUNT_] = {
    [RULE_LONG] = "longer than 255 bytes after NFKC",
    [RULE_UTF8] = "invalid UTF-8 after NFKC",
    [RULE_CONTROL] = "control character after NFKC",
    [RULE_INVISIBLE] = "invisible or format character after NFKC",
    [RULE_SEPARATOR] = "directory separator after NFKC",
    [RULE_PUNCT] = "quote or Windows-forbidden character after NFKC",
    [RULE_LEADING] = "leading dot or space after NFKC",
    [RULE_LEADING_DASH] = "leading dash after NFKC",
    [RULE_TRAILING] = "trailing dot or space after NFKC",
    [RULE_DEVICE] = "reserved device name after NFKC",
};

static bool is_trim_char(uint32_t cp)
{
    return cp == '.' || cp == ' ';
}

/* Rules 1-12 of docs/filenames.md on one spelling of a name: the name
 * itself, or its NFKC form (nfkc), where the look-alikes of a separator are
 * left alone (NFKC writes U+00BD as "1" U+2044 "2"). */
static rule check_rules(const char *name, size_t len, bool nfkc)
{
    if (len == 0)
        return RULE_EMPTY;
    if (len > PH_FILENAME_SAFE_MAX)
        return RULE_LONG;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += ph_utf8_decode((const unsigned char *)name + i, len - i, &cp);
        if (cp == PH_UTF8_INVALID)
            return RULE_UTF8;
        if (ph_fn_is_control(cp))
            return RULE_CONTROL;
        if (ph_unicode_is_invisible(cp))
            return RULE_INVISIBLE;
        if (ph_fn_is_separator(cp))
            return RULE_SEPARATOR;
        if (!nfkc && ph_fn_is_separator_lookalike(cp))
            return RULE_LOOKALIKE;
        if (ph_fn_is_forbidden_punct(cp))
            return RULE_PUNCT;
    }
    if (is_trim_char((unsigned char)name[0]))
        return RULE_LEADING;
    if (name[0] == '-')
        return RULE_LEADING_DASH;
    if (is_trim_char((unsigned char)name[len - 1]))
        return RULE_TRAILING;
    if (ph_fn_is_device_name(name, len))
        return RULE_DEVICE;
    return RULE_OK;
}

static bool is_ascii(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] >= 0x80)
            return false;
    return true;
}

/* A name of up to 255 bytes has an NFKC form of at most 18 times as many
 * code points; the common case fits here and needs no allocation. */
#define NFKC_STACK 1024

/* Every rule, on the name (valid UTF-8 already checked by check_rules) in
 * NFC and on its NFKC form. *nfkc says which form broke the rule. */
static rule check_all(const char *name, size_t len, bool *nfkc)
{
    *nfkc = false;
    rule r = check_rules(name, len, false);
    if (r != RULE_OK || is_ascii(name, len))
        return r; /* ASCII is its own NFC and NFKC */
    char stack[NFKC_STACK];
    size_t n;
    char *norm = ph_fn_normalize(false, name, len, stack, sizeof stack, &n);
    if (norm == NULL)
        return RULE_NOMEM;
    bool nfc = n == len && memcmp(norm, name, len) == 0;
    if (norm != stack)
        free(norm);
    if (!nfc)
        return RULE_NOT_NFC;
    norm = ph_fn_normalize(true, name, len, stack, sizeof stack, &n);
    if (norm == NULL)
        return RULE_NOMEM;
    *nfkc = true;
    r = check_rules(norm, n, true);
    if (norm != stack)
        free(norm);
    return r;
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

/* Start of the last character of s[0..len) (len > 0, valid UTF-8). */
static size_t last_char_start(const char *s, size_t len)
{
    size_t i = len - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
        i--;
    return i;
}

/* One pass of the name-level rules over buf (valid UTF-8, only allowed
 * characters), judging each edge character by its NFKC form too: strips
 * leading and trailing characters that are or become a dot or a space,
 * prefixes '_' to a leading dash or a device name, cuts to max bytes.
 * Returns the new length; *changed says whether anything happened. */
static size_t apply_name_rules(char *buf, size_t len, size_t cap, size_t max, bool *changed)
{
    size_t old_len = len;
    *changed = false;
    uint32_t cp, first, last;
    size_t start = 0;
    while (start < len) {
        size_t used = ph_utf8_decode((unsigned char *)buf + start, len - start, &cp);
        ph_fn_compat_ends(cp, &first, &last);
        if (!is_trim_char(first))
            break;
        start += used;
    }
    memmove(buf, buf + start, len - start);
    len -= start;
    while (len > 0) {
        size_t at = last_char_start(buf, len);
        ph_utf8_decode((unsigned char *)buf + at, len - at, &cp);
        ph_fn_compat_ends(cp, &first, &last);
        if (!is_trim_char(last))
            break;
        len = at;
    }
    if (len > 0 && len + 1 <= cap) {
        ph_utf8_decode((unsigned char *)buf, len, &cp);
        ph_fn_compat_ends(cp, &first, &last);
        if (first == '-' || ph_fn_is_device_name(buf, len)) {
            memmove(buf + 1, buf, len);
            buf[0] = '_';
            len++;
            *changed = true;
        }
    }
    if (len > max) {
        /* Keep a short extension ("report.pdf" stays a PDF) and cut the stem. */
        const char *dot = NULL;
        for (size_t i = len; i-- > 1;)
            if (buf[i] == '.') {
                dot = buf + i;
                break;
            }
        size_t ext = dot ? (size_t)(buf + len - dot) : 0;
        if (ext > 0 && ext <= 32 && ext < max) {
            size_t stem = utf8_prefix(buf, len - ext, max - ext);
            memmove(buf + stem, buf + len - ext, ext);
            len = stem + ext;
        } else {
            len = utf8_prefix(buf, len, max);
        }
    }
    *changed |= len != old_len;
    return len;
}

/* The name-level rules on the NFKC form: a device name that only NFKC
 * reveals ("ＣＯＮ") gets the '_' prefix, and a form longer than 255 bytes
 * lowers the byte budget of the name. Returns false when nothing changed. */
static bool apply_nfkc_rules(char *buf, size_t *len, size_t cap, size_t *max)
{
    char stack[NFKC_STACK];
    size_t n;
    char *k = ph_fn_normalize(true, buf, *len, stack, sizeof stack, &n);
    if (k == NULL) {
        *len = 0; /* no memory: the fallback name */
        return false;
    }
    bool device = ph_fn_is_device_name(k, n);
    if (k != stack)
        free(k);
    if (device && *len + 1 <= cap) {
        memmove(buf + 1, buf, *len);
        buf[0] = '_';
        (*len)++;
        return true;
    }
    if (n > PH_FILENAME_SAFE_MAX) {
        size_t over = n - PH_FILENAME_SAFE_MAX;
        *max = *len > over ? *len - over : 0;
        return true;
    }
    return false;
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

/* The per-character rules over in[0..len) into buf: invalid bytes, quotes,
 * Windows-forbidden characters, look-alikes of a separator and characters whose NFKC form holds any of
 * those, a separator, a control or an invisible character become '_';
 * controls and invisibles themselves are dropped.
 * Returns the length written (never more than len). */
static size_t filter_chars(const unsigned char *in, size_t len, char *buf)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t used = ph_utf8_decode(in + i, len - i, &cp);
        if (cp == PH_UTF8_INVALID || ph_fn_is_forbidden_punct(cp) ||
            ph_fn_is_separator(cp) || ph_fn_is_separator_lookalike(cp)) {
            buf[n++] = '_';
        } else if (ph_fn_is_control(cp) || ph_unicode_is_invisible(cp)) {
            /* dropped */
        } else if (ph_fn_compat_is_unsafe(cp)) {
            buf[n++] = '_';
        } else {
            memcpy(buf + n, in + i, used);
            n += used;
        }
        i += used;
    }
    return n;
}

size_t ph_filename_sanitize(const void *name, size_t len, const char *artifact_id,
                            char out[static PH_FILENAME_SAFE_MAX + 1])
{
    const unsigned char *in = name;
    if (in == NULL)
        len = 0;
    /* A name that satisfies every rule comes out unchanged, which makes
     * sanitizing idempotent. */
    bool nfkc;
    if (len > 0 && check_all(name, len, &nfkc) == RULE_OK) {
        memcpy(out, name, len);
        out[len] = '\0';
        return len;
    }
    /* Only the last non-empty component: a name never carries a directory. */
    while (len > 0 && (in[len - 1] == '/' || in[len - 1] == '\\'))
        len--;
    size_t begin = len;
    while (begin > 0 && in[begin - 1] != '/' && in[begin - 1] != '\\')
        begin--;
    char *filtered = malloc(len - begin + 1);
    if (filtered == NULL)
        return fallback(artifact_id, out);
    size_t n = filter_chars(in + begin, len - begin, filtered);
    /* NFC, then room for one '_' prefix. */
    size_t nfc_len = 0;
    char *nfc = n > 0 ? ph_fn_normalize(false, filtered, n, NULL, 0, &nfc_len) : NULL;
    free(filtered);
    size_t cap = nfc_len + 2;
    char *buf = nfc != NULL ? realloc(nfc, cap) : NULL;
    if (buf == NULL) {
        free(nfc);
        return fallback(artifact_id, out);
    }
    n = nfc_len;
    /* Each round either changes nothing (done) or strips, prefixes once, or
     * lowers the byte budget: it ends within a few rounds of the length. */
    size_t max = PH_FILENAME_SAFE_MAX;
    for (size_t round = 0; n > 0 && round <= PH_FILENAME_SAFE_MAX + 4; round++) {
        bool changed;
        n = apply_name_rules(buf, n, cap, max, &changed);
        if (n == 0)
            break;
        if (!changed && !apply_nfkc_rules(buf, &n, cap, &max))
            break;
    }
    if (n == 0 || check_all(buf, n, &nfkc) != RULE_OK) {
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
    if (name == NULL)
        len = 0;
    bool nfkc = false;
    rule r = name != NULL ? check_all(name, len, &nfkc) : RULE_EMPTY;
    if (r == RULE_OK)
        return true;
    if (why != NULL)
        *why = nfkc && why_nfkc[r] != NULL ? why_nfkc[r] : why_name[r];
    return false;
}

size_t ph_artifact_safe_filename(const ph_artifact_metadata *m,
                                 char out[static PH_FILENAME_SAFE_MAX + 1])
{
    return ph_filename_sanitize(m->filename, m->filename_len, m->artifact_id, out);
}
