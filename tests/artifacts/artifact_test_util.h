/* artifact_test_util.h - helpers shared by the artifact store tests. */
#ifndef PINHOLE_ARTIFACT_TEST_UTIL_H
#define PINHOLE_ARTIFACT_TEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "pinhole/artifact_store.h"

/* A source over a memory buffer. */
typedef struct mem_source {
    const unsigned char *data;
    size_t len, pos;
} mem_source;

static inline ph_status mem_read(void *ctx, void *buf, size_t cap, size_t *got, ph_diag *diag)
{
    (void)diag;
    mem_source *m = ctx;
    size_t n = m->len - m->pos;
    if (n > cap)
        n = cap;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    *got = n;
    return PH_OK;
}

/* Puts len bytes of data for tenant (a C string) with the given filename. */
static inline ph_status put_bytes(ph_artifact_store *s, const char *tenant, const char *filename,
                                  const void *data, size_t len, ph_artifact_metadata **out,
                                  ph_diag *diag)
{
    mem_source m = {.data = data, .len = len};
    ph_artifact_source src = {.read = mem_read, .ctx = &m};
    ph_artifact_spec spec = {
        .tenant_id = tenant, .tenant_id_len = strlen(tenant),
        .filename = filename, .filename_len = filename ? strlen(filename) : 0,
        .content_type = "text/plain",
    };
    return ph_artifact_put(s, &spec, &src, out, diag);
}

/* Reads a whole stream; returns the last status; *data (malloc'd) and *len
 * hold what was delivered before it. */
static inline ph_status read_all(ph_artifact_stream *st, unsigned char **data, size_t *len,
                                 ph_diag *diag)
{
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    ph_status rc;
    for (;;) {
        if (n == cap)
            buf = realloc(buf, cap *= 2);
        size_t got = 0;
        rc = ph_artifact_stream_read(st, buf + n, cap - n, &got, diag);
        if (rc != PH_OK || got == 0)
            break;
        n += got;
    }
    *data = buf;
    *len = n;
    return rc;
}

/* Opens ref and reads it whole. */
static inline ph_status get_bytes(ph_artifact_store *s, const ph_artifact_ref *ref,
                                  unsigned char **data, size_t *len, ph_diag *diag)
{
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *st = NULL;
    *data = NULL;
    *len = 0;
    ph_status rc = ph_artifact_open(s, ref, &m, &st, diag);
    if (rc == PH_OK)
        rc = read_all(st, data, len, diag);
    ph_artifact_stream_close(&st);
    ph_artifact_metadata_free(&m);
    return rc;
}

#endif
