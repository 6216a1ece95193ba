/* store_s3_write.c - writing an artifact to S3: one PUT up to
 * multipart_threshold, else a multipart upload whose parts go out from a
 * few slots in parallel; the metadata object, written last, is the
 * publication; a failed write aborts its upload or deletes its content. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_s3-int.h"

#define MAX_PARTS 10000

/* Parts in flight at once: each slot owns a part-sized buffer, a handle
 * and a thread; the writer hands a part to the oldest slot after joining
 * it, so memory stays at PART_SLOTS parts whatever the object size. */
#define PART_SLOTS 3

typedef struct part_slot {
    ph_artifact_backend_writer *w;
    pthread_t thread;
    bool busy, threaded;
    CURL *h;
    unsigned char *buf;
    size_t len;
    int number;
    ph_status st;
    ph_diag diag;
    char etag[72];
} part_slot;

struct ph_artifact_backend_writer {
    s3_backend *b;
    CURL *h;
    char content[NAME_MAX_LEN], meta[NAME_MAX_LEN];
    unsigned char *buf;
    size_t len, cap;
    char upload_id[256];
    char (*etags)[72]; /* by part number - 1; filled as slots are joined */
    int parts, parts_cap;
    part_slot slots[PART_SLOTS];
    int next_slot;
    ph_status failed; /* the first part failure */
    ph_diag fail_diag;
    bool content_written; /* a single PUT of the content succeeded */
};

static ph_status start_multipart(ph_artifact_backend_writer *w, ph_diag *diag)
{
    ph_sigv4_pair q[] = {{"uploads", NULL}};
    s3_resp r;
    ph_status st = ph_s3_simple(w->b, w->h, "POST", w->content, q, 1, NULL, 0, true, &r, diag);
    if (st != PH_OK)
        return st;
    size_t pos = 0;
    ph_s3_span sp;
    if (ph_s3_xml_check((const char *)r.body, r.len, diag) != PH_OK ||
        ph_s3_xml_next((const char *)r.body, r.len, &pos, "UploadId", &sp) != PH_OK ||
        !ph_s3_xml_text(sp, w->upload_id, sizeof w->upload_id) || w->upload_id[0] == '\0')
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: InitiateMultipartUpload: no UploadId");
    ph_s3_resp_free(&r);
    return st;
}

/* One UploadPart, retried inside ph_s3_simple(); runs on the slot's thread. */
static void *part_main(void *arg)
{
    part_slot *p = arg;
    ph_artifact_backend_writer *w = p->w;
    char num[16];
    snprintf(num, sizeof num, "%d", p->number);
    ph_sigv4_pair q[] = {{"partNumber", num}, {"uploadId", w->upload_id}};
    s3_resp r;
    p->diag = (ph_diag){0};
    p->st = ph_s3_put_content(w->b, p->h, w->content, q, 2, p->buf, p->len, &r, &p->diag);
    if (p->st != PH_OK)
        return NULL;
    if (r.etag[0] == '\0' || strlen(r.etag) >= sizeof p->etag || strpbrk(r.etag, "<&"))
        p->st = ph_diag_set(&p->diag, PH_E_FORMAT, 0, "s3: UploadPart: no usable ETag");
    else
        snprintf(p->etag, sizeof p->etag, "%s", r.etag);
    ph_s3_resp_free(&r);
    return NULL;
}

/* Waits for a slot's part and records its ETag or its failure. */
static void join_slot(ph_artifact_backend_writer *w, part_slot *p)
{
    if (!p->busy)
        return;
    if (p->threaded)
        pthread_join(p->thread, NULL);
    p->busy = false;
    if (p->st == PH_OK) {
        memcpy(w->etags[p->number - 1], p->etag, sizeof p->etag);
    } else if (w->failed == PH_OK) {
        w->failed = p->st;
        w->fail_diag = p->diag;
    }
}

static ph_status join_all(ph_artifact_backend_writer *w, ph_diag *diag)
{
    for (int i = 0; i < PART_SLOTS; i++)
        join_slot(w, &w->slots[i]);
    if (w->failed != PH_OK && diag)
        *diag = w->fail_diag;
    return w->failed;
}

/* Sends len bytes at data as the next part (copied into a slot's buffer);
 * data NULL: the writer's buffer itself, traded for the slot's, no copy. */
static ph_status upload_part(ph_artifact_backend_writer *w, const unsigned char *data, size_t len,
                             ph_diag *diag)
{
    if (w->parts >= MAX_PARTS)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "s3: more than %d parts", MAX_PARTS);
    if (w->parts == w->parts_cap) {
        int cap = w->parts_cap ? w->parts_cap * 2 : 64;
        void *n = realloc(w->etags, (size_t)cap * sizeof w->etags[0]);
        if (n == NULL)
            return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        w->etags = n;
        w->parts_cap = cap;
    }
    part_slot *p = &w->slots[w->next_slot];
    w->next_slot = (w->next_slot + 1) % PART_SLOTS;
    join_slot(w, p);
    if (w->failed != PH_OK) {
        if (diag)
            *diag = w->fail_diag;
        return w->failed;
    }
    if (p->buf == NULL && (p->buf = malloc((size_t)w->b->cfg.part_size)) == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    if (p->h == NULL && (p->h = ph_s3_handle_get(w->b)) == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    if (data == NULL) {
        unsigned char *t = p->buf; /* at least part_size bytes, as w->buf */
        p->buf = w->buf;
        w->buf = t;
        w->len = 0;
    } else {
        memcpy(p->buf, data, len);
    }
    p->w = w;
    p->len = len;
    p->number = ++w->parts;
    p->busy = true;
    p->threaded = pthread_create(&p->thread, NULL, part_main, p) == 0;
    if (!p->threaded)
        part_main(p); /* no thread to spare: send it now */
    return PH_OK;
}

static void free_writer(ph_artifact_backend_writer *w)
{
    for (int i = 0; i < PART_SLOTS; i++) {
        ph_s3_handle_put(w->b, w->slots[i].h);
        free(w->slots[i].buf);
    }
    ph_s3_handle_put(w->b, w->h);
    free(w->etags);
    free(w->buf);
    free(w);
}

/* Uploads every whole part in the buffer and keeps the rest. */
static ph_status flush_parts(ph_artifact_backend_writer *w, ph_diag *diag)
{
    size_t part = (size_t)w->b->cfg.part_size, off = 0;
    ph_status st = PH_OK;
    while (st == PH_OK && w->len - off >= part) {
        st = upload_part(w, w->buf + off, part, diag);
        off += part;
    }
    memmove(w->buf, w->buf + off, w->len - off);
    w->len -= off;
    return st;
}

ph_status ph_s3_write_begin(ph_artifact_backend *base, const char *key,
                            ph_artifact_backend_writer **out, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    *out = NULL;
    ph_artifact_backend_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    w->b = b;
    uint64_t cap = b->cfg.multipart_threshold > b->cfg.part_size ? b->cfg.multipart_threshold
                                                                 : b->cfg.part_size;
    w->cap = (size_t)cap;
    w->buf = malloc(w->cap);
    w->h = ph_s3_handle_get(b);
    ph_s3_object_names(b, key, w->content, w->meta);
    if (w->buf == NULL || w->h == NULL) {
        ph_s3_handle_put(b, w->h);
        free(w->buf);
        free(w);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    *out = w;
    return PH_OK;
}

ph_status ph_s3_write(ph_artifact_backend_writer *w, const void *data, size_t len,
                      ph_diag *diag)
{
    const unsigned char *p = data;
    while (len > 0) {
        size_t n = w->cap - w->len;
        if (n > len)
            n = len;
        memcpy(w->buf + w->len, p, n);
        w->len += n;
        p += n;
        len -= n;
        if (w->len == w->cap) {
            ph_status st = PH_OK;
            if (w->upload_id[0] == '\0') {
                /* More than the threshold: from here on a multipart upload
                 * whose parts are filled in place, one part-sized buffer at
                 * a time, and traded with a slot when full. */
                st = start_multipart(w, diag);
                if (st == PH_OK)
                    st = flush_parts(w, diag);
                w->cap = (size_t)w->b->cfg.part_size;
            } else {
                st = upload_part(w, NULL, w->len, diag);
            }
            if (st != PH_OK)
                return st;
        }
    }
    return PH_OK;
}

static ph_status complete_multipart(ph_artifact_backend_writer *w, ph_diag *diag)
{
    ph_status joined = join_all(w, diag);
    if (joined != PH_OK)
        return joined;
    size_t cap = 64 + (size_t)w->parts * 128, n = 0;
    char *doc = malloc(cap);
    if (doc == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    n += (size_t)snprintf(doc + n, cap - n, "<CompleteMultipartUpload>");
    for (int i = 0; i < w->parts; i++)
        n += (size_t)snprintf(doc + n, cap - n, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
                              i + 1, w->etags[i]);
    n += (size_t)snprintf(doc + n, cap - n, "</CompleteMultipartUpload>");
    ph_sigv4_pair q[] = {{"uploadId", w->upload_id}};
    s3_resp r;
    ph_status st = ph_s3_simple(w->b, w->h, "POST", w->content, q, 1, doc, n, true, &r, diag);
    free(doc);
    if (st != PH_OK)
        return st;
    /* A 200 may still carry an <Error>. The body's ETag is not used (RGW
     * 16.2 leaves it empty); HEAD and listings carry the right one. */
    if (r.body && r.len && memmem(r.body, r.len, "<Error>", 7) != NULL) {
        ph_s3_error_code(&r);
        st = ph_diag_set(diag, PH_E_IO, 0, "s3: CompleteMultipartUpload: %s",
                         r.error_code[0] ? r.error_code : "error");
    }
    ph_s3_resp_free(&r);
    if (st == PH_OK)
        w->upload_id[0] = '\0'; /* completed: nothing left to abort */
    return st;
}

void ph_s3_write_abort(ph_artifact_backend_writer *w)
{
    if (w == NULL)
        return;
    join_all(w, NULL); /* no part may land after the abort */
    if (w->upload_id[0]) {
        ph_sigv4_pair q[] = {{"uploadId", w->upload_id}};
        ph_s3_simple(w->b, w->h, "DELETE", w->content, q, 1, NULL, 0, false, NULL, NULL);
    }
    if (w->content_written)
        ph_s3_simple(w->b, w->h, "DELETE", w->content, NULL, 0, NULL, 0, false, NULL, NULL);
    free_writer(w);
}

ph_status ph_s3_write_commit(ph_artifact_backend_writer *w, const char *meta, size_t meta_len,
                             ph_diag *diag)
{
    ph_status st;
    if (w->upload_id[0] == '\0') {
        st = ph_s3_put_content(w->b, w->h, w->content, NULL, 0, w->buf, w->len, NULL, diag);
        w->content_written = st == PH_OK;
    } else {
        /* Whole parts first: the buffer can hold more than one when the
         * threshold is above the part size; the rest is the short last part. */
        st = flush_parts(w, diag);
        if (st == PH_OK && w->len > 0)
            st = upload_part(w, NULL, w->len, diag);
        if (st == PH_OK)
            st = complete_multipart(w, diag);
        w->content_written = st == PH_OK;
    }
    /* The publication. */
    if (st == PH_OK)
        st = ph_s3_simple(w->b, w->h, "PUT", w->meta, NULL, 0, meta, meta_len, true, NULL, diag);
    if (st != PH_OK) {
        ph_s3_write_abort(w);
        return st;
    }
    free_writer(w);
    return PH_OK;
}
