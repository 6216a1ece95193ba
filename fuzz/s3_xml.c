/* s3_xml.c - fuzzes the S3 backend's XML extractor (artifacts/src/s3_xml.c):
 *  - on any document, every span found lies inside it, does not contain its
 *    own open tag, and the position only moves forward;
 *  - every span that decodes, re-escaped and decoded again, gives the same
 *    text (no entity is decoded twice or lost);
 *  - any text (the input itself), escaped inside <Key>...</Key> within a
 *    listing, is found and decodes back to exactly the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The inverse of ph_s3_xml_text for the five predefined entities. */
static size_t escape(const char *in, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        const char *e = NULL;
        switch (in[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '"': e = "&quot;"; break;
        case '\'': e = "&apos;"; break;
        default: out[n++] = in[i]; continue;
        }
        memcpy(out + n, e, strlen(e));
        n += strlen(e);
    }
    return n;
}

static void walk(const char *doc, size_t len, const char *tag)
{
    size_t pos = 0;
    ph_s3_span sp;
    char open[32];
    snprintf(open, sizeof open, "<%s>", tag);
    while (ph_s3_xml_next(doc, len, &pos, tag, &sp) == PH_OK) {
        if (sp.p < doc || sp.p + sp.len > doc + len || pos > len || pos <= (size_t)(sp.p - doc))
            abort();
        if (memmem(sp.p, sp.len, open, strlen(open)) != NULL)
            abort();
        char *text = malloc(sp.len + 1), *esc = malloc(sp.len * 6 + 1), *again = malloc(sp.len + 1);
        if (ph_s3_xml_text(sp, text, sp.len + 1)) {
            size_t tl = strlen(text);
            if (tl > sp.len)
                abort();
            size_t el = escape(text, tl, esc);
            ph_s3_span e = {esc, el};
            if (!ph_s3_xml_text(e, again, sp.len + 1) || strcmp(again, text) != 0)
                abort();
        }
        free(text);
        free(esc);
        free(again);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *doc = (const char *)data;
    if (ph_s3_xml_check(doc, size, NULL) == PH_OK) {
        walk(doc, size, "Contents");
        walk(doc, size, "Key");
        walk(doc, size, "Upload");
        walk(doc, size, "Code");
    }
    /* The input as a key name inside a listing. */
    if (size > 4096 || memchr(data, '\0', size) != NULL)
        return 0;
    static const char head[] = "<?xml version=\"1.0\"?><ListBucketResult><Contents><Key>";
    static const char tail[] = "</Key><Size>1</Size></Contents></ListBucketResult>";
    char *listing = malloc(sizeof head + size * 6 + sizeof tail);
    size_t n = sizeof head - 1;
    memcpy(listing, head, n);
    n += escape(doc, size, listing + n);
    memcpy(listing + n, tail, sizeof tail - 1);
    n += sizeof tail - 1;
    if (ph_s3_xml_check(listing, n, NULL) != PH_OK)
        abort();
    size_t pos = 0, ip = 0;
    ph_s3_span c, k;
    char *out = malloc(size + 1);
    if (ph_s3_xml_next(listing, n, &pos, "Contents", &c) != PH_OK ||
        ph_s3_xml_next(c.p, c.len, &ip, "Key", &k) != PH_OK || !ph_s3_xml_text(k, out, size + 1) ||
        strlen(out) != size || memcmp(out, data, size) != 0)
        abort();
    free(out);
    free(listing);
    return 0;
}
