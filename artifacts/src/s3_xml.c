/* s3_xml.c - a strict extractor for the few elements of S3's XML answers
 * the backend reads (ListObjectsV2, ListMultipartUploads, InitiateMultipart
 * Upload, Error). It is no XML parser: it refuses the constructs that would
 * let a text span mean something other than what it looks like (comments,
 * CDATA, DOCTYPE, processing instructions), and decodes only the predefined
 * entities. fuzz/s3_xml.c holds it to that. */
#include <string.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "s3-int.h"

ph_status ph_s3_xml_check(const char *doc, size_t len, ph_diag *diag)
{
    size_t i = 0;
    if (len >= 5 && memcmp(doc, "<?xml", 5) == 0) {
        const char *end = memmem(doc, len, "?>", 2);
        if (end == NULL)
            return ph_diag_set(diag, PH_E_FORMAT, 0, "s3: XML declaration not closed");
        i = (size_t)(end - doc) + 2;
    }
    for (; i < len; i++) {
        if (doc[i] == '\0')
            return ph_diag_set(diag, PH_E_FORMAT, i, "s3: NUL in XML");
        if (doc[i] == '<' && i + 1 < len && (doc[i + 1] == '!' || doc[i + 1] == '?'))
            return ph_diag_set(diag, PH_E_FORMAT, i, "s3: XML construct refused");
    }
    return PH_OK;
}

ph_status ph_s3_xml_next(const char *doc, size_t len, size_t *pos, const char *tag,
                         ph_s3_span *out)
{
    char open[80], close[80];
    size_t tl = strlen(tag);
    if (tl == 0 || tl + 4 > sizeof open)
        return PH_E_INVAL;
    open[0] = '<';
    memcpy(open + 1, tag, tl);
    open[tl + 1] = '>';
    close[0] = '<';
    close[1] = '/';
    memcpy(close + 2, tag, tl);
    close[tl + 2] = '>';
    if (*pos > len)
        return PH_E_NOT_FOUND;
    const char *start = memmem(doc + *pos, len - *pos, open, tl + 2);
    if (start == NULL)
        return PH_E_NOT_FOUND;
    const char *text = start + tl + 2;
    size_t rest = len - (size_t)(text - doc);
    const char *end = memmem(text, rest, close, tl + 3);
    if (end == NULL)
        return PH_E_FORMAT;
    /* The same element nested inside itself would make the span ambiguous. */
    if (memmem(text, (size_t)(end - text), open, tl + 2) != NULL)
        return PH_E_FORMAT;
    out->p = text;
    out->len = (size_t)(end - text);
    *pos = (size_t)(end - doc) + tl + 3;
    return PH_OK;
}

bool ph_s3_xml_text(ph_s3_span in, char *out, size_t cap)
{
    static const struct {
        const char *name;
        char c;
    } ents[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    size_t n = 0;
    for (size_t i = 0; i < in.len;) {
        char c = in.p[i];
        if (c == '<' || c == '\0')
            return false;
        if (c == '&') {
            size_t left = in.len - i - 1;
            const char *e = in.p + i + 1;
            bool matched = false;
            for (size_t k = 0; k < sizeof ents / sizeof ents[0]; k++) {
                size_t el = strlen(ents[k].name);
                if (left >= el && memcmp(e, ents[k].name, el) == 0) {
                    c = ents[k].c;
                    i += 1 + el;
                    matched = true;
                    break;
                }
            }
            if (!matched) {
                if (left < 3 || e[0] != '#')
                    return false;
                size_t j = 1;
                int base = 10;
                if (e[1] == 'x') {
                    base = 16;
                    j = 2;
                }
                long v = 0;
                size_t digits = 0;
                while (j < left && e[j] != ';' && digits < 6) {
                    int d = ph_hex_value_any_case((unsigned char)e[j]);
                    if (d < 0 || d >= base)
                        return false;
                    v = v * base + d;
                    j++;
                    digits++;
                }
                if (j >= left || e[j] != ';' || digits == 0 || v <= 0 || v > 127)
                    return false;
                c = (char)v;
                i += 1 + j + 1;
            }
        } else {
            i++;
        }
        if (n + 1 >= cap)
            return false;
        out[n++] = c;
    }
    if (cap == 0)
        return false;
    out[n] = '\0';
    return true;
}
