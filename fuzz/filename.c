/* filename.c - fuzzes filename sanitization: for any bytes, the output
 * satisfies every rule (ph_filename_is_safe, the checker the unit tests use
 * too), is in NFC and stays safe after an independent NFKC round trip
 * (libunistring here, not the library's helper), sanitizing is idempotent,
 * and the Content-Disposition value is bounded, single-line and quote-safe. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uninorm.h>

#include "pinhole/artifact_name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* out in NFC, and NFKC(out) free of what the rules refuse: no separator,
 * not "." or "..", no leading dot, space or dash, no trailing dot or space,
 * and otherwise accepted by the checker (whose look-alike rule judges the
 * shown name only: NFKC writes U+00BD as "1" U+2044 "2"). */
static void check_normal_forms(const char *out, size_t n)
{
    size_t cn = 0, kn = 0;
    uint8_t *c = u8_normalize(UNINORM_NFC, (const uint8_t *)out, n, NULL, &cn);
    uint8_t *k = u8_normalize(UNINORM_NFKC, (const uint8_t *)out, n, NULL, &kn);
    if (c == NULL || k == NULL)
        abort();
    if (cn != n || memcmp(c, out, n) != 0) {
        fprintf(stderr, "output not in NFC: %s\n", out);
        abort();
    }
    const char *ks = (const char *)k;
    if (kn == 0 || memchr(ks, '/', kn) || memchr(ks, '\\', kn) || ks[0] == '.' || ks[0] == ' ' ||
        ks[0] == '-' || ks[kn - 1] == '.' || ks[kn - 1] == ' ') {
        fprintf(stderr, "output unsafe after NFKC: %s -> %.*s\n", out, (int)kn, ks);
        abort();
    }
    const char *why = NULL;
    if (!ph_filename_is_safe(ks, kn, &why) &&
        strcmp(why, "look-alike of a directory separator") != 0) {
        fprintf(stderr, "NFKC form unsafe (%s): %.*s\n", why, (int)kn, ks);
        abort();
    }
    free(c);
    free(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char id[] = "0123456789abcdef0123456789abcdef";
    char out[PH_FILENAME_SAFE_MAX + 1], again[PH_FILENAME_SAFE_MAX + 1];
    size_t n = ph_filename_sanitize(data, size, id, out);
    const char *why = NULL;
    if (n != strlen(out) || !ph_filename_is_safe(out, n, &why)) {
        fprintf(stderr, "unsafe output (%s): %s\n", why ? why : "length", out);
        abort();
    }
    check_normal_forms(out, n);
    if (ph_filename_sanitize(out, n, id, again) != n || memcmp(out, again, n) != 0)
        abort(); /* not idempotent */
    /* A name the checker accepts is left unchanged. */
    if (size > 0 && ph_filename_is_safe((const char *)data, size, NULL) &&
        (n != size || memcmp(out, data, size) != 0))
        abort();

    char cd[PH_CONTENT_DISPOSITION_MAX + 1];
    size_t c = ph_content_disposition(data, size, id, cd);
    if (c != strlen(cd) || c > PH_CONTENT_DISPOSITION_MAX)
        abort();
    /* attachment; filename="<no quote, no backslash>"; filename*=UTF-8''<attr-chars, %XX> */
    const char *q = cd + strlen("attachment; filename=\"");
    const char *end = strchr(q, '"');
    if (strncmp(cd, "attachment; filename=\"", 22) != 0 || end == NULL ||
        strncmp(end, "\"; filename*=UTF-8''", 20) != 0)
        abort();
    for (const char *p = q; p < end; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e || *p == '\\' || *p == '%')
            abort();
    for (const char *p = end + 20; *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p > 0x7e || *p == '"' || *p == '\\' ||
            *p == ';' || *p == '\'')
            abort();
    return 0;
}
