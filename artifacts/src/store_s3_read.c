/* store_s3_read.c - reading an artifact from S3: its metadata object,
 * a HEAD of its content, then one streaming GET resumed where it broke. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/clock.h"
#include "store_s3-int.h"

#define READ_CHUNK ((size_t)1 << 20)  /* a reader's buffer */
#define RECV_BUF (512L << 10)         /* libcurl's largest receive buffer */

/* A read is one streaming GET (`Range: bytes=<offset>-`, `If-Match:
 * <ETag>`) driven through a curl multi handle: the write callback fills a
 * buffer and pauses the transfer when it is full; read() drains it and
 * resumes. A transfer that breaks is resumed from the first byte not yet
 * received, with the same retries and backoff as any request.
 * read_interrupt (another thread) sets interrupted and wakes the poll: the
 * read in progress gives up and the transfer is aborted by read_close. */
struct ph_artifact_backend_reader {
    s3_backend *b;
    char content[NAME_MAX_LEN];
    char etag[128];
    uint64_t size, received; /* bytes the store has sent so far */
    CURL *h;
    CURLM *m;
    struct curl_slist *list;
    unsigned char *buf;  /* what arrived beyond the caller's buffer */
    size_t len, pos;
    unsigned char *direct; /* the caller's buffer during a read, else NULL */
    size_t dcap, dlen;
    bool active, paused;
    atomic_bool interrupted;
    long code;   /* the HTTP status of the current transfer, once known */
    int attempt;
    s3_resp resp;
};

ph_status ph_s3_get_meta(s3_backend *b, CURL *h, const char *name, char **meta, size_t *len,
                         ph_diag *diag)
{
    *meta = NULL;
    char *buf = malloc(PH_ARTIFACT_METADATA_MAX + 2);
    if (buf == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    s3_req req = {.method = "GET", .object = name, .sink = (unsigned char *)buf,
                  .sink_cap = PH_ARTIFACT_METADATA_MAX + 1};
    s3_resp r;
    ph_status st = ph_s3_call(b, h, &req, &r, diag);
    if (st == PH_OK && r.code == 404)
        st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent");
    else if (st == PH_OK && r.code != 200)
        st = ph_s3_http_error(&req, &r, diag);
    else if (st == PH_OK && r.len > PH_ARTIFACT_METADATA_MAX)
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: metadata too large");
    else if (st == PH_E_IO && r.overflow)
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: metadata too large");
    if (st != PH_OK) {
        free(buf);
        return st;
    }
    buf[r.len] = '\0';
    *meta = buf;
    *len = r.len;
    return PH_OK;
}

ph_status ph_s3_head(s3_backend *b, CURL *h, const char *name, s3_resp *out, ph_diag *diag)
{
    s3_req req = {.method = "HEAD", .object = name};
    ph_status st = ph_s3_call(b, h, &req, out, diag);
    if (st == PH_OK && out->code == 404)
        st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent");
    else if (st == PH_OK && out->code != 200)
        st = ph_s3_http_error(&req, out, diag);
    ph_s3_resp_free(out);
    return st;
}

ph_status ph_s3_open(ph_artifact_backend *base, const char *key, char **meta, size_t *meta_len,
                     ph_artifact_backend_reader **r, uint64_t *content_size, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    *meta = NULL;
    if (r)
        *r = NULL;
    char content[NAME_MAX_LEN], meta_name[NAME_MAX_LEN];
    ph_s3_object_names(b, key, content, meta_name);
    CURL *h = ph_s3_handle_get(b);
    ph_status st = ph_s3_get_meta(b, h, meta_name, meta, meta_len, diag);
    if (st != PH_OK || r == NULL) {
        ph_s3_handle_put(b, h);
        return st;
    }
    s3_resp hr;
    st = ph_s3_head(b, h, content, &hr, diag);
    if (st == PH_E_NOT_FOUND) {
        /* Published metadata without content is corruption, unless a
         * delete took the metadata away meanwhile. */
        s3_resp mr;
        st = ph_s3_head(b, h, meta_name, &mr, NULL) == PH_E_NOT_FOUND
                 ? ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent")
                 : ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: content missing");
    } else if (st == PH_OK && !hr.has_length) {
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: HEAD without Content-Length");
    }
    ph_artifact_backend_reader *rd = NULL;
    if (st == PH_OK && ((rd = calloc(1, sizeof *rd)) == NULL ||
                        (rd->buf = malloc(READ_CHUNK)) == NULL || (rd->m = curl_multi_init()) == NULL)) {
        if (rd) {
            free(rd->buf);
            free(rd);
            rd = NULL;
        }
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    if (st != PH_OK) {
        ph_s3_handle_put(b, h);
        free(*meta);
        *meta = NULL;
        return st;
    }
    rd->b = b;
    rd->h = h; /* the open's handle carries the stream */
    snprintf(rd->content, sizeof rd->content, "%s", content);
    snprintf(rd->etag, sizeof rd->etag, "%s", hr.etag);
    rd->size = hr.length;
    atomic_init(&rd->interrupted, false);
    *r = rd;
    *content_size = hr.length;
    return PH_OK;
}

static size_t on_stream(char *data, size_t size, size_t n, void *arg)
{
    ph_artifact_backend_reader *r = arg;
    size_t len = size * n;
    if (r->code == 0)
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->code);
    if (r->code != 206 && r->code != 200)
        return len; /* an error body: discarded, judged by its status */
    /* Into the caller's buffer while it has room, the rest into ours. */
    size_t direct = r->direct ? r->dcap - r->dlen : 0;
    if (direct > len)
        direct = len;
    if (len - direct > READ_CHUNK - r->len) {
        r->paused = true;
        return CURL_WRITEFUNC_PAUSE; /* curl keeps it until resumed */
    }
    if (len > r->size - r->received)
        return 0; /* more than the object holds: abort */
    if (direct > 0) {
        memcpy(r->direct + r->dlen, data, direct);
        r->dlen += direct;
    }
    memcpy(r->buf + r->len, data + direct, len - direct);
    r->len += len - direct;
    r->received += len;
    return len;
}

static void stream_stop(ph_artifact_backend_reader *r)
{
    if (r->active) {
        curl_multi_remove_handle(r->m, r->h);
        r->active = false;
    }
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(r->list);
    r->list = NULL;
}

/* Starts (or resumes) the GET from r->received. */
static ph_status stream_start(ph_artifact_backend_reader *r, ph_diag *diag)
{
    char range[64];
    snprintf(range, sizeof range, "bytes=%llu-", (unsigned long long)r->received);
    ph_sigv4_pair hdr[] = {{"Range", range}, {"If-Match", r->etag}};
    s3_req req = {.method = "GET", .object = r->content, .headers = hdr,
                  .n_headers = r->etag[0] ? 2 : 1};
    upload_src none = {0};
    r->resp = (s3_resp){0};
    r->code = 0;
    ph_status st =
        ph_s3_setup(r->b, r->h, &req, PH_SIGV4_EMPTY_SHA256, &r->resp, &none, &r->list, diag);
    if (st != PH_OK)
        return st;
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->h, CURLOPT_BUFFERSIZE, RECV_BUF);
    /* The whole-request timeout would cut a large object: a stall limit. */
    curl_easy_setopt(r->h, CURLOPT_TIMEOUT_MS, 0L);
    curl_easy_setopt(r->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(r->h, CURLOPT_LOW_SPEED_TIME,
                     (long)(r->b->cfg.request_timeout_ms + 999) / 1000);
    if (curl_multi_add_handle(r->m, r->h) != CURLM_OK)
        return ph_diag_set(diag, PH_E_IO, 0, "s3: curl_multi_add_handle failed");
    r->active = true;
    return PH_OK;
}

/* The backoff of a broken transfer, cut short by read_interrupt: the wait
 * is a poll of the reader's multi handle (no transfer in it now), which
 * curl_multi_wakeup ends; a plain sleep would hold a close for up to a
 * minute. */
static void stream_backoff(ph_artifact_backend_reader *r, int attempt)
{
    int64_t end = ph_monotonic_ms() + ph_s3_backoff_ms(&r->b->cfg, attempt);
    for (int64_t left; !atomic_load(&r->interrupted) && (left = end - ph_monotonic_ms()) > 0;)
        curl_multi_poll(r->m, NULL, 0, (int)left, NULL);
}

/* Runs the transfer until the buffer holds data or it ends. */
static ph_status stream_pump(ph_artifact_backend_reader *r, ph_diag *diag)
{
    for (;;) {
        if (r->len > r->pos || r->dlen > 0)
            return PH_OK;
        if (atomic_load(&r->interrupted))
            return ph_diag_set(diag, PH_E_IO, 0, "s3: GET %s: interrupted", r->content);
        if (r->received >= r->size && !r->active)
            return PH_OK;
        if (!r->active) {
            ph_status st = stream_start(r, diag);
            if (st != PH_OK)
                return st;
        }
        r->len = r->pos = 0;
        if (r->paused) {
            r->paused = false;
            curl_easy_pause(r->h, CURLPAUSE_CONT);
        }
        int running = 0;
        curl_multi_perform(r->m, &running);
        int left = 0;
        CURLMsg *msg;
        CURLcode rc = CURLE_OK;
        bool done = false;
        while ((msg = curl_multi_info_read(r->m, &left)) != NULL)
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == r->h) {
                done = true;
                rc = msg->data.result;
            }
        if (!done) {
            if (r->len == 0 && r->dlen == 0 && !r->paused)
                curl_multi_poll(r->m, NULL, 0, 1000, NULL);
            continue;
        }
        if (r->code == 0)
            curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->code);
        stream_stop(r);
        long code = r->code;
        if (rc == CURLE_OK && (code == 206 || code == 200) && r->received == r->size)
            return PH_OK; /* the end; what the last callbacks gave is in buf */
        if (rc == CURLE_OK && code == 404)
            return ph_diag_set(diag, PH_E_NOT_FOUND, 0, "artifact not found");
        if (rc == CURLE_OK && code == 412)
            return ph_diag_set(diag, PH_E_FORMAT, 0,
                               "artifact corrupt: content replaced while read");
        bool transient =
            (rc != CURLE_OK && (ph_s3_transient_curl(rc) || rc == CURLE_WRITE_ERROR)) ||
            code >= 500 || code == 429 || (rc == CURLE_OK && code == 206);
        if (rc == CURLE_WRITE_ERROR && r->received >= r->size)
            return ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: content longer than its size");
        if (!transient || r->attempt >= r->b->cfg.retries)
            return rc != CURLE_OK
                       ? ph_diag_set(diag, PH_E_IO, 0, "s3: GET %s: %s", r->content,
                                     curl_easy_strerror(rc))
                       : ph_diag_set(diag, PH_E_IO, 0, "s3: GET %s: HTTP %ld", r->content, code);
        stream_backoff(r, r->attempt++);
        if (r->len > 0 || r->dlen > 0)
            return PH_OK; /* deliver what arrived; resume at the next read */
    }
}

ph_status ph_s3_read(ph_artifact_backend_reader *r, void *out, size_t cap, size_t *got,
                     ph_diag *diag)
{
    *got = 0;
    if (r->pos == r->len) {
        /* Nothing kept back: the transfer writes straight into out. */
        r->direct = out;
        r->dcap = cap;
        r->dlen = 0;
        ph_status st = stream_pump(r, diag);
        size_t direct = r->dlen;
        r->direct = NULL;
        r->dlen = 0;
        if (st != PH_OK || direct > 0) {
            *got = st == PH_OK ? direct : 0;
            return st;
        }
    }
    size_t n = r->len - r->pos;
    if (n > cap)
        n = cap;
    memcpy(out, r->buf + r->pos, n);
    r->pos += n;
    *got = n;
    return PH_OK;
}

void ph_s3_read_interrupt(ph_artifact_backend_reader *r)
{
    atomic_store(&r->interrupted, true);
    curl_multi_wakeup(r->m);
}

void ph_s3_read_close(ph_artifact_backend_reader *r)
{
    if (r == NULL)
        return;
    stream_stop(r);
    if (r->m)
        curl_multi_cleanup(r->m);
    ph_s3_handle_put(r->b, r->h);
    free(r->buf);
    free(r);
}
