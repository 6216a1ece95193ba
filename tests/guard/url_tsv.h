/* url_tsv.h - reading the URL verdict tables in tests/data/urls/ (*.tsv)
 * (hostile.tsv, differential.tsv): tab-separated rows, '#' comments, and the
 * input escapes \\ \t \r \n \xHH described in docs/url.md. Test-only. */
#ifndef PINHOLE_TESTS_URL_TSV_H
#define PINHOLE_TESTS_URL_TSV_H

#include <stddef.h>

/* Most columns a row may have; extra tabs stay in the last column. */
#define URL_TSV_MAX_COLS 8

/* Called for every data row: cols[0..ncol) point into the (modified) file
 * buffer; line is 1-based. */
typedef void url_tsv_row_fn(char **cols, size_t ncol, unsigned line, void *ctx);

/* Reads tests/data/urls/<name> (relative to the source tree) and calls fn
 * for every row that is not blank or a comment. Returns the number of rows;
 * fails the test when the file cannot be read. */
unsigned url_tsv_for_each_row(const char *name, url_tsv_row_fn *fn, void *ctx);

/* Decodes the escapes of an input column into out[0..cap) and NUL-terminates
 * it (for messages only: the parser gets the returned length). Fails the test
 * on a malformed escape or when out is too small. */
size_t url_tsv_unescape(const char *in, char *out, size_t cap, const char *file, unsigned line);

/* What a client sends in CONNECT for url[0..len): the authority cut from the
 * text (after "http://" or "https://", any case, up to the first '/', '?' or
 * '#'), the scheme's default port added when none is written; no parser of
 * ours decides it. Writes it NUL-terminated into out[0..cap) and returns its
 * length; 0 when url has neither scheme or out is too small. */
size_t url_tsv_connect_authority(const char *url, size_t len, char *out, size_t cap);

#endif
