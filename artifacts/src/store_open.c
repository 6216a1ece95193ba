/* store_open.c - resolving a ref and the verifying read stream.
 *
 * Small artifacts are pulled whole at open, hashed as they are pulled and
 * verified (SHA-256, and that the content neither shrank nor grew) before
 * open returns. Large ones are pulled by a producer thread one buffer ahead
 * of the caller (two buffers, one mutex): the producer only moves bytes and
 * checks the length; the caller's thread hashes each buffer before it
 * delivers its first byte and checks the digest before it delivers any byte
 * of the last one, so no byte is ever handed out unverified, and the hash of
 * buffer N runs while the producer receives buffer N+1. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "pinhole/diag.h"
#include "pinhole/artifact_metadata.h"
#include "store-int.h"

struct ph_artifact_stream {
    ph_artifact_store *store;
    ph_artifact_backend_reader *reader;
    EVP_MD_CTX *md;
    unsigned char expected[PH_ARTIFACT_SHA256_LEN];
    uint64_t size;       /* from the metadata */
    uint64_t pulled;     /* bytes read from the backend and hashed (producer) */
    size_t cap;
    unsigned char *buf[2];
    size_t len[2];
    bool full[2];        /* filled by the producer, not yet drained */
    int cur;             /* the buffer the consumer drains */
    size_t pos;
    /* Large artifacts: a producer thread pulls and hashes buffer N+1 while
     * the caller drains buffer N. Small ones are filled inline. */
    bool threaded, stop, done;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int last;            /* the buffer holding the last byte, or -1 */
    bool hashed;         /* buf[cur] has been hashed (threaded) */
    ph_diag failure;     /* sticky: once corrupt, always corrupt */
};

static ph_status check_digest(ph_artifact_stream *s, ph_diag *d);

/* The content ended: nothing may follow, and (unthreaded: the caller's
 * thread hashes otherwise) the digest must match. */
static ph_status verify_end(ph_artifact_stream *s, ph_diag *d)
{
    unsigned char extra;
    size_t got = 0;
    ph_status st = s->store->backend->ops->read(s->reader, &extra, 1, &got, d);
    if (st != PH_OK)
        return st;
    if (got != 0)
        return ph_diag_set(d, PH_E_FORMAT, 0, "artifact corrupt: content longer than recorded");
    return s->threaded ? PH_OK : check_digest(s, d);
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

/* Producer side: fills buf[idx] from the backend (unthreaded: and hashes
 * it); once the last byte is pulled, checks the end before the buffer is
 * ever marked full. */
static ph_status fill(ph_artifact_stream *s, int idx, ph_diag *d)
{
    size_t len = 0;
    while (len < s->cap && s->pulled < s->size) {
        uint64_t want = s->size - s->pulled;
        if (want > s->cap - len)
            want = s->cap - len;
        size_t got = 0;
        ph_status st =
            s->store->backend->ops->read(s->reader, s->buf[idx] + len, (size_t)want, &got, d);
        if (st != PH_OK)
            return st;
        if (got == 0)
            return ph_diag_set(d, PH_E_FORMAT, 0, "artifact corrupt: content shorter than recorded");
        if (!s->threaded && EVP_DigestUpdate(s->md, s->buf[idx] + len, got) != 1)
            return ph_diag_set(d, PH_E_INTERNAL, 0, "SHA-256 update failed");
        len += got;
        s->pulled += got;
    }
    s->len[idx] = len;
    return s->pulled == s->size ? verify_end(s, d) : PH_OK;
}

/* Records the producer's outcome for buffer idx (with s->mu held if threaded). */
static void produced(ph_artifact_stream *s, int idx, ph_status st, const ph_diag *d)
{
    if (st != PH_OK) {
        if (s->failure.status == PH_OK) {
            s->failure = *d;
            s->failure.status = st;
        }
        s->done = true;
        return;
    }
    s->full[idx] = true;
    if (s->pulled == s->size) {
        s->last = idx;
        s->done = true;
    }
}

static void *producer_main(void *arg)
{
    ph_artifact_stream *s = arg;
    for (int idx = 0;; idx ^= 1) {
        pthread_mutex_lock(&s->mu);
        while (s->full[idx] && !s->stop)
            pthread_cond_wait(&s->cv, &s->mu);
        bool stop = s->stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        ph_diag d = {0};
        ph_status st = fill(s, idx, &d);
        pthread_mutex_lock(&s->mu);
        produced(s, idx, st, &d);
        bool done = s->done;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        if (done)
            break;
    }
    return NULL;
}

static ph_status failed(const ph_artifact_stream *s, ph_diag *diag)
{
    if (diag)
        *diag = s->failure;
    return s->failure.status;
}

/* Makes buf[cur] a full, undrained buffer, or reports the end (PH_OK with
 * nothing full: the verified end) or the failure. */
static ph_status next_buffer(ph_artifact_stream *s, ph_diag *diag)
{
    if (!s->threaded) {
        if (s->full[s->cur] || s->done)
            return s->failure.status == PH_OK ? PH_OK : failed(s, diag);
        ph_diag d = {0};
        ph_status st = fill(s, s->cur, &d);
        produced(s, s->cur, st, &d);
        s->pos = 0;
        return st == PH_OK ? PH_OK : failed(s, diag);
    }
    pthread_mutex_lock(&s->mu);
    while (!s->full[s->cur] && !s->done)
        pthread_cond_wait(&s->cv, &s->mu);
    ph_status st = s->full[s->cur] ? PH_OK : s->failure.status;
    if (st != PH_OK && diag)
        *diag = s->failure;
    bool last = s->full[s->cur] && s->last == s->cur;
    pthread_mutex_unlock(&s->mu);
    if (st != PH_OK || !s->full[s->cur] || s->hashed)
        return st;
    /* buf[cur] is ours until handed back: hash it before any byte leaves,
     * and for the last one verify the whole before any byte leaves. */
    ph_diag d = {0};
    if (EVP_DigestUpdate(s->md, s->buf[s->cur], s->len[s->cur]) != 1)
        st = ph_diag_set(&d, PH_E_INTERNAL, 0, "SHA-256 update failed");
    else if (last)
        st = check_digest(s, &d);
    if (st != PH_OK) {
        pthread_mutex_lock(&s->mu);
        if (s->failure.status == PH_OK) {
            s->failure = d;
            s->failure.status = st;
        }
        s->full[s->cur] = false; /* never delivered */
        s->done = true;
        pthread_mutex_unlock(&s->mu);
        return failed(s, diag);
    }
    s->hashed = true;
    return PH_OK;
}

ph_status ph_artifact_stream_read(ph_artifact_stream *s, void *buf, size_t cap, size_t *got,
                                  ph_diag *diag)
{
    *got = 0;
    ph_status st = next_buffer(s, diag);
    if (st != PH_OK || !s->full[s->cur])
        return st; /* failure, or the verified end */
    /* buf[cur] is ours until we hand it back: no lock needed to copy. */
    size_t n = s->len[s->cur] - s->pos;
    if (n > cap)
        n = cap;
    memcpy(buf, s->buf[s->cur] + s->pos, n);
    s->pos += n;
    *got = n;
    if (s->pos == s->len[s->cur]) {
        /* Drained: give it back to the producer and move on. */
        if (s->threaded)
            pthread_mutex_lock(&s->mu);
        s->full[s->cur] = false;
        s->cur ^= s->threaded ? 1 : 0;
        s->pos = 0;
        s->hashed = false;
        if (s->threaded) {
            pthread_cond_broadcast(&s->cv);
            pthread_mutex_unlock(&s->mu);
        }
    }
    return PH_OK;
}

void ph_artifact_stream_close(ph_artifact_stream **stream)
{
    if (stream == NULL || *stream == NULL)
        return;
    ph_artifact_stream *s = *stream;
    if (s->threaded) {
        pthread_mutex_lock(&s->mu);
        s->stop = true;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    s->store->backend->ops->read_close(s->reader);
    EVP_MD_CTX_free(s->md);
    free(s->buf[0]);
    free(s->buf[1]);
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
    s->last = -1;
    memcpy(s->expected, m->sha256, sizeof s->expected);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    bool small = m->size <= PH_ARTIFACT_PREVERIFY_MAX;
    /* A small artifact fits one buffer whole, so filling it verifies it. */
    s->cap = small ? (size_t)m->size : PH_ARTIFACT_CHUNK;
    s->buf[0] = malloc(s->cap ? s->cap : 1);
    s->buf[1] = small ? NULL : malloc(s->cap);
    s->md = EVP_MD_CTX_new();
    ph_status st = PH_OK;
    if (s->buf[0] == NULL || (!small && s->buf[1] == NULL) || s->md == NULL)
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    else if (EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) != 1)
        st = ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 init failed");
    else if (small)
        st = next_buffer(s, diag);
    else {
        /* Set before the thread starts: fill() reads it to leave hashing to us. */
        s->threaded = true;
        if (pthread_create(&s->thread, NULL, producer_main, s) != 0)
            s->threaded = false; /* no thread: nothing reads it concurrently */
    }
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
