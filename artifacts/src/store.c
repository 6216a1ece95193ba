/* store.c - the ArtifactStore port: lifecycle, put and delete. Every rule
 * lives here, above the backend: validation, id generation, key derivation,
 * hashing while streaming, the size limit, expiry, metadata encoding. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>

#include <openssl/evp.h>

#include "pinhole/diag.h"
#include "pinhole/artifact_metadata.h"
#include "pipeline-int.h"
#include "store-int.h"

int64_t ph_artifact_store_now(const ph_artifact_store *s)
{
    return s->clock ? s->clock(s->clock_ctx) : (int64_t)time(NULL);
}

ph_status ph_artifact_not_found(ph_diag *diag)
{
    return ph_diag_set(diag, PH_E_NOT_FOUND, 0, "artifact not found");
}

ph_status ph_artifact_store_new(ph_artifact_backend *backend, const ph_artifact_store_options *opts,
                                ph_artifact_store **out, ph_diag *diag)
{
    *out = NULL;
    ph_artifact_store_options o = {0};
    if (opts)
        o = *opts;
    if (o.default_ttl_seconds < 0) {
        backend->ops->destroy(backend);
        return ph_diag_set(diag, PH_E_INVAL, 0, "default TTL must be positive");
    }
    ph_artifact_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        backend->ops->destroy(backend);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    s->backend = backend;
    s->default_ttl = o.default_ttl_seconds ? o.default_ttl_seconds : PH_ARTIFACT_DEFAULT_TTL_SECONDS;
    s->max_size = o.max_size ? o.max_size : PH_ARTIFACT_DEFAULT_MAX_SIZE;
    s->clock = o.clock;
    s->clock_ctx = o.clock_ctx;
    *out = s;
    return PH_OK;
}

ph_status ph_artifact_store_open_fs(const char *root, const ph_artifact_store_options *opts,
                                    ph_artifact_store **out, ph_diag *diag)
{
    ph_artifact_backend *b = NULL;
    *out = NULL;
    ph_status st = ph_artifact_backend_fs_open(root, &b, diag);
    if (st != PH_OK)
        return st;
    return ph_artifact_store_new(b, opts, out, diag);
}

void ph_artifact_store_close(ph_artifact_store **store)
{
    if (store == NULL || *store == NULL)
        return;
    (*store)->backend->ops->destroy((*store)->backend);
    free(*store);
    *store = NULL;
}

ph_status ph_artifact_read_fd(void *ctx, void *buf, size_t cap, size_t *got, ph_diag *diag)
{
    int fd = *(int *)ctx;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n >= 0) {
            *got = (size_t)n;
            return PH_OK;
        }
        if (errno != EINTR)
            return ph_diag_set(diag, PH_E_IO, 0, "read: %s", strerror(errno));
    }
}

static char *dup_text(const char *s, const char *dflt)
{
    return strdup(s ? s : dflt);
}

/* The metadata of a new artifact, before its content is known. */
static ph_status new_metadata(const ph_artifact_store *s, const ph_artifact_spec *spec,
                              ph_artifact_metadata **out, ph_diag *diag)
{
    *out = NULL;
    if (spec->tenant_id == NULL || spec->tenant_id_len == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "tenant id is empty");
    if (spec->tenant_id_len > PH_ARTIFACT_TENANT_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "tenant id longer than %d bytes",
                           PH_ARTIFACT_TENANT_MAX);
    if (spec->filename_len > PH_ARTIFACT_FILENAME_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "filename longer than %d bytes",
                           PH_ARTIFACT_FILENAME_MAX);
    if (spec->filename_len > 0 && spec->filename == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "filename is NULL");
    if (spec->ttl_seconds < 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "TTL must be positive");
    int64_t now = ph_artifact_store_now(s);
    int64_t ttl = spec->ttl_seconds ? spec->ttl_seconds : s->default_ttl;
    if (now < 0 || ttl > INT64_MAX - now)
        return ph_diag_set(diag, PH_E_INVAL, 0, "expiry time out of range");
    ph_artifact_metadata base = {
        .tenant_id = (unsigned char *)(uintptr_t)spec->tenant_id,
        .tenant_id_len = spec->tenant_id_len,
        .filename = (char *)(uintptr_t)(spec->filename ? spec->filename : ""),
        .filename_len = spec->filename_len,
        .created_at = now,
        .expires_at = now + ttl,
    };
    ph_artifact_metadata *m = NULL;
    ph_status st = ph_artifact_metadata_copy(&base, &m, diag);
    if (st != PH_OK)
        return st;
    free(m->content_type);
    free(m->run_id);
    free(m->source_path);
    m->content_type = dup_text(spec->content_type, "application/octet-stream");
    m->run_id = dup_text(spec->run_id, "");
    m->source_path = dup_text(spec->source_path, "");
    if (!m->content_type || !m->run_id || !m->source_path)
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    if (st == PH_OK)
        st = ph_artifact_id_generate(m->artifact_id, diag);
    if (st == PH_OK)
        st = ph_artifact_metadata_check(m, diag);
    if (st != PH_OK) {
        ph_artifact_metadata_free(&m);
        return st;
    }
    *out = m;
    return PH_OK;
}

typedef struct stream_in_ctx {
    const ph_artifact_backend_ops *ops;
    ph_artifact_backend_writer *w;
} stream_in_ctx;

/* The put's pipeline worker: one backend write. */
static ph_status write_chunk(void *ctx, unsigned char *buf, size_t *len, ph_diag *diag)
{
    const stream_in_ctx *c = ctx;
    return c->ops->write(c->w, buf, *len, diag);
}

/* Streams src into w, hashing as it goes; fills m->size and m->sha256. The
 * backend write of each chunk overlaps the read and hash of the next ones
 * (pipeline-int.h). */
static ph_status stream_in(const ph_artifact_store *s, const ph_artifact_source *src,
                           uint64_t limit, ph_artifact_backend_writer *w,
                           ph_artifact_metadata *m, ph_diag *diag)
{
    stream_in_ctx c = {.ops = s->backend->ops, .w = w};
    ph_pipeline_config pc = {.dir = PH_PIPELINE_DRAIN, .fn = write_chunk, .ctx = &c,
                             .slots = PH_ARTIFACT_PIPELINE_SLOTS, .cap = PH_ARTIFACT_CHUNK,
                             .threaded = true};
    ph_pipeline *pipe = NULL;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    ph_status st = md ? ph_pipeline_start(&pc, &pipe, diag)
                      : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    if (st == PH_OK && EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
        st = ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 init failed");
    uint64_t total = 0;
    while (st == PH_OK) {
        unsigned char *buf = NULL;
        size_t cap = 0, got = 0;
        st = ph_pipeline_take(pipe, &buf, &cap, diag);
        if (st == PH_OK)
            st = src->read(src->ctx, buf, cap, &got, diag);
        if (st != PH_OK || got == 0)
            break;
        if (got > cap) {
            st = ph_diag_set(diag, PH_E_INTERNAL, 0, "source returned more than asked");
            break;
        }
        if (got > limit - total) {
            st = ph_diag_set(diag, PH_E_LIMIT, 0, "artifact larger than %llu bytes",
                             (unsigned long long)limit);
            break;
        }
        total += got;
        if (EVP_DigestUpdate(md, buf, got) != 1)
            st = ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 update failed");
        else
            st = ph_pipeline_give(pipe, got, diag);
    }
    ph_status written = ph_pipeline_finish(&pipe, st == PH_OK ? diag : NULL);
    if (st == PH_OK)
        st = written;
    unsigned int dlen = 0;
    if (st == PH_OK && (EVP_DigestFinal_ex(md, m->sha256, &dlen) != 1 || dlen != 32))
        st = ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 final failed");
    m->size = total;
    EVP_MD_CTX_free(md);
    return st;
}

ph_status ph_artifact_put(ph_artifact_store *s, const ph_artifact_spec *spec,
                          const ph_artifact_source *src, ph_artifact_metadata **out, ph_diag *diag)
{
    *out = NULL;
    if (spec == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no artifact spec");
    if (src == NULL || src->read == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no source stream");
    ph_artifact_metadata *m = NULL;
    ph_status st = new_metadata(s, spec, &m, diag);
    if (st != PH_OK)
        return st;
    char key[PH_ARTIFACT_KEY_LEN + 1];
    st = ph_artifact_key(m->tenant_id, m->tenant_id_len, m->artifact_id, PH_ARTIFACT_ID_LEN, key,
                         diag);
    ph_artifact_backend_writer *w = NULL;
    if (st == PH_OK)
        st = s->backend->ops->write_begin(s->backend, key, &w, diag);
    if (st != PH_OK) {
        ph_artifact_metadata_free(&m);
        return st;
    }
    uint64_t limit = s->max_size;
    if (spec->max_size && spec->max_size < limit)
        limit = spec->max_size;
    st = stream_in(s, src, limit, w, m, diag);
    char *doc = NULL;
    size_t doc_len = 0;
    if (st == PH_OK)
        st = ph_artifact_metadata_encode(m, &doc, &doc_len, diag);
    if (st == PH_OK)
        st = s->backend->ops->write_commit(w, doc, doc_len, diag); /* consumes w */
    else
        s->backend->ops->write_abort(w);
    free(doc);
    if (st != PH_OK) {
        ph_artifact_metadata_free(&m);
        return st;
    }
    *out = m;
    return PH_OK;
}

ph_status ph_artifact_ref_key(const ph_artifact_ref *ref, char key[static PH_ARTIFACT_KEY_LEN + 1],
                              ph_diag *diag)
{
    key[0] = '\0';
    if (ref == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no artifact ref");
    /* strnlen: an unterminated 33-byte id is malformed, never over-read. */
    return ph_artifact_key(ref->tenant_id, ref->tenant_id_len, ref->artifact_id,
                           strnlen(ref->artifact_id, sizeof ref->artifact_id), key, diag);
}

ph_status ph_artifact_delete(ph_artifact_store *s, const ph_artifact_ref *ref, ph_diag *diag)
{
    char key[PH_ARTIFACT_KEY_LEN + 1];
    ph_status st = ph_artifact_ref_key(ref, key, diag);
    if (st != PH_OK)
        return st;
    st = s->backend->ops->remove(s->backend, key, diag);
    return st == PH_E_NOT_FOUND ? ph_artifact_not_found(diag) : st;
}
