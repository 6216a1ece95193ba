/* artifact_test_util.h - helpers shared by the artifact store tests. */
#ifndef PINHOLE_ARTIFACT_TEST_UTIL_H
#define PINHOLE_ARTIFACT_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_store.h"
#include "s3-int.h"

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

/* The backend the parametrized tests run against: "s3" when
 * PH_TEST_ARTIFACT_BACKEND=s3 (then PH_TEST_S3_CONFIG names its
 * configuration), else the filesystem. */
static inline bool test_backend_is_s3(void)
{
    const char *b = getenv("PH_TEST_ARTIFACT_BACKEND");
    return b != NULL && strcmp(b, "s3") == 0;
}

/* True when the selected backend can run here; callers exit 77 if not. */
static inline bool test_backend_available(void)
{
    if (!test_backend_is_s3())
        return true;
    const char *cfg = getenv("PH_TEST_S3_CONFIG");
    return cfg != NULL && access(cfg, R_OK) == 0;
}

/* Opens the store under test for root. With S3, root (a fresh scratch
 * directory) names the store's own prefix, so every root is its own empty
 * store in the shared bucket. */
static inline ph_status test_store_open(const char *root, const ph_artifact_store_options *o,
                                        ph_artifact_store **out, ph_diag *diag)
{
    if (!test_backend_is_s3())
        return ph_artifact_store_open_fs(root, o, out, diag);
    *out = NULL;
    ph_s3_config cfg;
    ph_status st = ph_s3_config_load(getenv("PH_TEST_S3_CONFIG"), &cfg, diag);
    if (st != PH_OK)
        return st;
    const char *base = strrchr(root, '/');
    base = base ? base + 1 : root;
    char prefix[sizeof cfg.prefix];
    size_t n = (size_t)snprintf(prefix, sizeof prefix, "t/%s", base);
    for (size_t i = 2; i < n && i < sizeof prefix; i++) {
        char c = prefix[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            prefix[i] = '-';
    }
    memcpy(cfg.prefix, prefix, sizeof prefix);
    ph_artifact_backend *b = NULL;
    st = ph_s3_backend_open_config(&cfg, &b, diag);
    if (st != PH_OK)
        return st;
    return ph_artifact_store_new(b, o, out, diag);
}

#endif
