/* url_tsv.c - see url_tsv.h. */
#include "url_tsv.h"

#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pinhole/hex.h"

size_t url_tsv_unescape(const char *in, char *out, size_t cap, const char *file, unsigned line)
{
    size_t n = 0;
    for (size_t i = 0; in[i] != '\0'; i++) {
        if (n + 1 >= cap)
            fail_msg("%s:%u: input longer than %zu bytes", file, line, cap - 1);
        if (in[i] != '\\') {
            out[n++] = in[i];
            continue;
        }
        char e = in[++i];
        if (e == '\\') {
            out[n++] = '\\';
        } else if (e == 't') {
            out[n++] = '\t';
        } else if (e == 'r') {
            out[n++] = '\r';
        } else if (e == 'n') {
            out[n++] = '\n';
        } else if (e == 'x' && ph_hex_value_any_case((unsigned char)in[i + 1]) >= 0 &&
                   ph_hex_value_any_case((unsigned char)in[i + 2]) >= 0) {
            out[n++] = (char)(ph_hex_value_any_case((unsigned char)in[i + 1]) * 16 +
                              ph_hex_value_any_case((unsigned char)in[i + 2]));
            i += 2;
        } else {
            fail_msg("%s:%u: bad escape", file, line);
        }
    }
    out[n] = '\0';
    return n;
}

unsigned url_tsv_for_each_row(const char *name, url_tsv_row_fn *fn, void *ctx)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/urls/%s", name);
    size_t flen = 0;
    char *file = ph_test_read_file(ph_test_source_path(rel), &flen);
    if (file == NULL)
        fail_msg("cannot read %s", rel);
    unsigned line = 0, rows = 0;
    for (char *l = file, *next; l != NULL && *l != '\0'; l = next) {
        next = strchr(l, '\n');
        if (next != NULL)
            *next++ = '\0';
        line++;
        if (l[0] == '#' || l[0] == '\0')
            continue;
        char *cols[URL_TSV_MAX_COLS] = {0};
        size_t ncol = 0;
        for (char *p = l; ncol < URL_TSV_MAX_COLS;) {
            cols[ncol++] = p;
            char *tab = strchr(p, '\t');
            if (tab == NULL || ncol == URL_TSV_MAX_COLS)
                break;
            *tab = '\0';
            p = tab + 1;
        }
        fn(cols, ncol, line, ctx);
        rows++;
    }
    free(file);
    return rows;
}

size_t url_tsv_connect_authority(const char *url, size_t len, char *out, size_t cap)
{
    size_t skip;
    const char *port;
    if (len > 7 && strncasecmp(url, "http://", 7) == 0) {
        skip = 7;
        port = ":80";
    } else if (len > 8 && strncasecmp(url, "https://", 8) == 0) {
        skip = 8;
        port = ":443";
    } else {
        return 0;
    }
    size_t end = skip;
    while (end < len && url[end] != '/' && url[end] != '?' && url[end] != '#')
        end++;
    size_t n = end - skip;
    if (n + 7 > cap)
        return 0;
    memcpy(out, url + skip, n);
    const char *bracket = memchr(out, ']', n);
    const char *tail = bracket ? bracket : out;
    if (memchr(tail, ':', n - (size_t)(tail - out)) == NULL) {
        memcpy(out + n, port, strlen(port));
        n += strlen(port);
    }
    out[n] = '\0';
    return n;
}
