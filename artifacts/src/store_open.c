/* store_open.c - resolving a ref and the verifying read stream.
 *
 * Small artifacts are pulled whole at open, hashed as they are pulled and
 * verified (SHA-256, and that the content neither shrank nor grew) before
 * open returns. Large ones are read ahead by the pipeline's worker thread
 * (pipeline-int.h, a ring of PH_ARTIFACT_PIPELINE_SLOTS chunks): the worker
 * only moves bytes and checks the length; the caller's thread hashes each
 * chunk before it delivers its first byte and checks the digest before it
 * delivers any byte of the last one, so no byte is ever handed out
 * unverified, and the hash of chunk N runs while the worker receives the
 * next ones. Without a thread the same steps run inline. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "pinhole/diag.h"
#include "pinhole/artifact_metadata.h"
#include "pipeline-int.h"
#include "store-int.h"

/* Ownership: the stream owns the reader, the pipeline and the digest; the
 * pipeline's worker borrows the stream (pull) until ph_pipeline_finish in
 * close returns, and touches only reader, pulled and ended. */
struct ph_artifact_stream {
    ph_artifact_store *store;
    ph_artifact_backend_reader *reader;
    ph_pipeline *pipe;
    EVP_MD_CTX *md;
    unsigned char expected[PH_ARTIFACT_SHA256_LEN];
    uint64_t size;       /* from the metadata */
    uint64_t pulled;     /* bytes read from the backend (worker) */
    bool ended;          /* the end was checked: nothing follows (worker) */
    atomic_bool stop;    /* close: the worker's pull gives up at once */
    uint64_t hashed;     /* bytes hashed (caller) */
    bool verified;       /* the digest matched (caller) */
    unsigned char *cur;  /* the taken chunk being delivered, or NULL */
    size_t len, pos;
    ph_diag failure;     /* sticky: once corrupt, always corrupt */
};

/* The content ended: nothing may follow. */
static ph_status verify_end(ph_artifact_stream *s, ph_diag *d)
{
    unsigned char extra;
    size_t got = 0;
    ph_status st = s->store->backend->ops->read(s->reader, &extra, 1, &got, d);
    if (st != PH_OK)
        return st;
    if (got != 0)
        return ph_diag_set(d, PH_E_FORMAT, 0, "artifact corrupt: content longer than recorded");
    return PH_OK;
}

/* The digest of everything hashed so far against the recorded one. */
static ph_status check_digest(ph_artifact_stream *s, ph_diag *d)
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(s->md, digest, &dlen) != 1 || dlen != PH_ARTIFACT_SHA256_LEN)
        return ph_diag_set(d, PH_E_INTERNAL, 0, "SHA-256 final failed");
    if (CRYPTO_memcmp(digest, s->expected, PH_ARTIFACT_SHA256_LEN) != 0)
        return ph_diag_set(d, PH_E_FORMAT, 0, "artifact corrupt: SHA-256 mismatch");
    return PH_OK;
}

/* The pipeline's worker: fills one chunk from the backend; once the last
 * byte is pulled, checks the end before the chunk is published. *len 0:
 * the end. */
static ph_status pull(void *ctx, unsigned char *buf, size_t *len, ph_diag *d)
{
    ph_artifact_stream *s = ctx;
    size_t cap = *len, n = 0;
    *len = 0;
    while (n < cap && s->pulled < s->size) {
        if (atomic_load(&s->stop))
            return ph_diag_set(d, PH_E_IO, 0, "artifact read stopped");
        uint64_t want = s->size - s->pulled;
        if (want > cap - n)
            want = cap - n;
        size_t got = 0;
        ph_status st = s->store->backend->ops->read(s->reader, buf + n, (size_t)want, &got, d);
        if (st != PH_OK)
            return st;
        if (got == 0)
            return ph_diag_set(d, PH_E_FORMAT, 0, "artifact corrupt: content shorter than recorded");
        n += got;
        s->pulled += got;
    }
    if (s->pulled == s->size && !s->ended) {
        ph_status st = verify_end(s, d);
        if (st != PH_OK)
            return st;
        s->ended = true;
    }
    *len = n;
    return PH_OK;
}

/* Called by ph_pipeline_finish while pull may be running. */
static void interrupt_pull(void *ctx)
{
    ph_artifact_stream *s = ctx;
    atomic_store(&s->stop, true);
    if (s->store->backend->ops->read_interrupt)
        s->store->backend->ops->read_interrupt(s->reader);
}

static ph_status failed(const ph_artifact_stream *s, ph_diag *diag)
{
    if (diag)
        *diag = s->failure;
    return s->failure.status;
}

/* Makes s->cur the next chunk, hashed, and the last one verified; or
 * reports the verified end (PH_OK, s->cur NULL) or the failure. */
static ph_status next_chunk(ph_artifact_stream *s, ph_diag *diag)
{
    if (s->failure.status != PH_OK)
        return failed(s, diag);
    if (s->cur)
        return PH_OK;
    unsigned char *buf = NULL;
    size_t len = 0;
    ph_diag d = {0};
    ph_status st = ph_pipeline_take(s->pipe, &buf, &len, &d);
    if (st == PH_OK && buf) {
        if (EVP_DigestUpdate(s->md, buf, len) != 1)
            st = ph_diag_set(&d, PH_E_INTERNAL, 0, "SHA-256 update failed");
        s->hashed += len;
    }
    if (st == PH_OK && buf == NULL && s->hashed != s->size)
        st = ph_diag_set(&d, PH_E_INTERNAL, 0, "artifact stream ended early");
    /* The last byte is hashed: the whole is checked before any byte of the
     * last chunk leaves. */
    if (st == PH_OK && !s->verified && s->hashed == s->size) {
        st = check_digest(s, &d);
        s->verified = st == PH_OK;
    }
    if (st != PH_OK) {
        if (buf)
            ph_pipeline_give(s->pipe, 0, NULL); /* never delivered */
        s->failure = d;
        s->failure.status = st;
        return failed(s, diag);
    }
    s->cur = buf;
    s->len = len;
    s->pos = 0;
    return PH_OK;
}

ph_status ph_artifact_stream_read(ph_artifact_stream *s, void *buf, size_t cap, size_t *got,
                                  ph_diag *diag)
{
    *got = 0;
    ph_status st = next_chunk(s, diag);
    if (st != PH_OK || s->cur == NULL)
        return st; /* failure, or the verified end */
    size_t n = s->len - s->pos;
    if (n > cap)
        n = cap;
    memcpy(buf, s->cur + s->pos, n);
    s->pos += n;
    *got = n;
    if (s->pos == s->len) {
        s->cur = NULL;
        ph_pipeline_give(s->pipe, 0, NULL); /* drained: the worker's again */
    }
    return PH_OK;
}

void ph_artifact_stream_close(ph_artifact_stream **stream)
{
    if (stream == NULL || *stream == NULL)
        return;
    ph_artifact_stream *s = *stream;
    /* Stops and joins the worker, mid-stream or not, before the reader goes. */
    ph_pipeline_finish(&s->pipe, NULL);
    s->store->backend->ops->read_close(s->reader);
    EVP_MD_CTX_free(s->md);
    free(s);
    *stream = NULL;
}

static ph_status new_stream(ph_artifact_store *store, ph_artifact_backend_reader *r,
                            const ph_artifact_metadata *m, ph_artifact_stream **out, ph_diag *diag)
{
    ph_artifact_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        store->backend->ops->read_close(r);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    s->store = store;
    s->reader = r;
    s->size = m->size;
    atomic_init(&s->stop, false);
    memcpy(s->expected, m->sha256, sizeof s->expected);
    /* A small artifact fits one buffer whole, so taking it verifies it. */
    bool small = m->size <= PH_ARTIFACT_PREVERIFY_MAX;
    ph_pipeline_config pc = {.dir = PH_PIPELINE_FILL, .fn = pull, .ctx = s,
                             .slots = small ? 1 : PH_ARTIFACT_PIPELINE_SLOTS,
                             .cap = small ? (size_t)m->size : PH_ARTIFACT_CHUNK,
                             .threaded = !small, .interrupt = interrupt_pull};
    s->md = EVP_MD_CTX_new();
    ph_status st = PH_OK;
    if (s->md == NULL)
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    else if (EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1)
        st = ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 init failed");
    if (st == PH_OK)
        st = ph_pipeline_start(&pc, &s->pipe, diag);
    if (st == PH_OK && small)
        st = next_chunk(s, diag);
    if (st != PH_OK) {
        ph_artifact_stream_close(&s);
        return st;
    }
    *out = s;
    return PH_OK;
}

ph_status ph_artifact_open(ph_artifact_store *store, const ph_artifact_ref *ref,
                           ph_artifact_metadata **meta, ph_artifact_stream **stream, ph_diag *diag)
{
    *meta = NULL;
    if (stream)
        *stream = NULL;
    char key[PH_ARTIFACT_KEY_LEN + 1];
    ph_status st = ph_artifact_ref_key(ref, key, diag);
    if (st != PH_OK)
        return st;
    char *doc = NULL;
    size_t doc_len = 0;
    uint64_t content_size = 0;
    ph_artifact_backend_reader *r = NULL;
    st = store->backend->ops->open(store->backend, key, &doc, &doc_len, stream ? &r : NULL,
                                   &content_size, diag);
    if (st == PH_E_NOT_FOUND)
        return ph_artifact_not_found(diag);
    if (st != PH_OK)
        return st;
    ph_artifact_metadata *m = NULL;
    st = ph_artifact_metadata_decode(doc, doc_len, &m, diag);
    free(doc);
    if (st == PH_OK &&
        (m->tenant_id_len != ref->tenant_id_len ||
         memcmp(m->tenant_id, ref->tenant_id, ref->tenant_id_len) != 0 ||
         memcmp(m->artifact_id, ref->artifact_id, PH_ARTIFACT_ID_LEN) != 0))
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: metadata names another artifact");
    else if (st == PH_OK && ph_artifact_expired_at(m, ph_artifact_store_now(store)))
        st = ph_artifact_not_found(diag); /* expired: honest 404, sweeper or not */
    else if (st == PH_OK && stream && content_size != m->size)
        st = ph_diag_set(diag, PH_E_FORMAT, 0,
                         "artifact corrupt: content is %llu bytes, metadata says %llu",
                         (unsigned long long)content_size, (unsigned long long)m->size);
    if (st == PH_OK && stream) {
        st = new_stream(store, r, m, stream, diag); /* consumes r */
        r = NULL;
    }
    if (r)
        store->backend->ops->read_close(r);
    if (st != PH_OK) {
        ph_artifact_metadata_free(&m);
        return st;
    }
    *meta = m;
    return PH_OK;
}
