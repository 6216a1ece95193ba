/* filename.c - fuzzes filename sanitization: for any bytes, the output
 * satisfies every rule (ph_filename_is_safe, the checker the unit tests use
 * too), sanitizing is idempotent, and the Content-Disposition value is
 * bounded, single-line and quote-safe. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/artifact_name.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
