/* store_s3.c - the S3-compatible object store backend (AWS S3, Ceph RGW,
 * R2, ...): libcurl for HTTP, SigV4 signed in the project (sigv4.c).
 *
 * Layout in the bucket (docs/artifacts.md), for the port's key K:
 *   <prefix>/<K0K1>/<K>        the content
 *   <prefix>/<K0K1>/<K>.meta   the port's metadata document
 * Nothing of the tenant, artifact id or filename appears in a name: K is
 * the port's key hash.
 *
 * Whole-or-nothing: the metadata object is the publication. A put writes
 * the content first (one PUT up to multipart_threshold, else a multipart
 * upload of part_size parts), then the metadata; a reader that finds no
 * metadata sees no artifact. A failed put aborts its multipart upload or
 * deletes its content. A writer killed midway leaves an unfinished upload
 * or a content object without metadata; the sweep (clean_staging) removes
 * both once older than staging_grace_seconds. A delete removes the metadata
 * first (invisible), then the content.
 *
 * Idempotent by construction: every object name is derived from K, and K
 * from (tenant, artifact id), so a retried request of the same put writes
 * the same names again and never a second artifact.
 *
 * Every request body is in memory when it is sent (a single PUT's content,
 * one part, a metadata document), so every request can be retried alone:
 * on transport errors, 5xx and 429, with exponential backoff and jitter.
 * Metadata and XML bodies have their SHA-256 signed (x-amz-content-sha256);
 * content bodies are UNSIGNED-PAYLOAD over https or loopback (cfg
 * sign_content), their integrity resting on TLS and on the port's SHA-256,
 * held in the signed metadata and verified on every get (docs/artifacts.md).
 *
 * Ownership: a CURL easy handle belongs to one operation at a time, taken
 * from and returned to the backend's small idle pool (mutex). A writer
 * holds one, plus one per part slot (each used only by that slot's thread
 * while the part is in flight, joined before the writer goes); a reader
 * holds one inside its own CURLM, both released by read_close; its
 * interrupted flag and curl_multi_wakeup are the only things another thread
 * touches (read_interrupt), while that CURLM is alive. The curl
 * callbacks' user pointers (s3_resp, upload_src, the reader) are owned by
 * the call that set them and outlive its transfer. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "pinhole/clock.h"
#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "s3-int.h"
#include "sigv4-int.h"

#define POOL_MAX 8
#define RESP_MAX ((size_t)4 << 20)    /* cap of an XML answer */
#define NAME_MAX_LEN 320
#define READ_CHUNK ((size_t)1 << 20)  /* a reader's buffer */
#define MAX_PARTS 10000
#define UPLOAD_BUF (2L << 20)         /* libcurl's largest upload buffer */
#define RECV_BUF (512L << 10)         /* libcurl's largest receive buffer */

typedef struct s3_backend {
    ph_artifact_backend base;
    ph_s3_config cfg;
    pthread_mutex_t mu;
    CURL *idle[POOL_MAX];
    int n_idle;
    bool unsigned_content; /* content bodies sent as UNSIGNED-PAYLOAD */
} s3_backend;

/* ---- HTTP ---- */

typedef struct s3_req {
    const char *method;
    const char *object; /* name in the bucket; NULL: the bucket itself */
    const ph_sigv4_pair *query;
    size_t n_query;
    const ph_sigv4_pair *headers; /* extra signed headers */
    size_t n_headers;
    const unsigned char *body;
    size_t body_len;
    bool has_body;
    bool content; /* an artifact's bytes: signed per cfg.sign_content */
    unsigned char *sink; /* the response body; NULL: an internal buffer */
    size_t sink_cap;
} s3_req;

typedef struct s3_resp {
    long code;
    unsigned char *body; /* sink or malloc'd (free with resp_free) */
    size_t len, cap;
    bool own, overflow;
    char etag[128];
    uint64_t length;
    bool has_length;
    char error_code[64];
} s3_resp;

static void resp_free(s3_resp *r)
{
    if (r->own)
        free(r->body);
    r->body = NULL;
    r->own = false;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static CURL *handle_get(s3_backend *b)
{
    CURL *h = NULL;
    pthread_mutex_lock(&b->mu);
    if (b->n_idle > 0)
        h = b->idle[--b->n_idle];
    pthread_mutex_unlock(&b->mu);
    return h ? h : curl_easy_init();
}

static void handle_put(s3_backend *b, CURL *h)
{
    if (h == NULL)
        return;
    pthread_mutex_lock(&b->mu);
    if (b->n_idle < POOL_MAX) {
        b->idle[b->n_idle++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&b->mu);
    if (h)
        curl_easy_cleanup(h);
}

typedef struct upload_src {
    const unsigned char *p;
    size_t len, pos;
} upload_src;

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    upload_src *u = arg;
    size_t want = size * n, left = u->len - u->pos;
    if (want > left)
        want = left;
    memcpy(buf, u->p + u->pos, want);
    u->pos += want;
    return want;
}

/* curl rewinds an upload to resend it on a fresh connection. */
static int on_seek(void *arg, curl_off_t offset, int origin)
{
    upload_src *u = arg;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > u->len)
        return CURL_SEEKFUNC_FAIL;
    u->pos = (size_t)offset;
    return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
    s3_resp *r = arg;
    size_t len = size * n;
    if (len > r->cap - r->len) {
        if (!r->own || r->cap >= RESP_MAX) {
            r->overflow = true;
            return 0;
        }
        size_t cap = r->cap ? r->cap : 4096;
        while (cap - r->len < len && cap < RESP_MAX)
            cap *= 2;
        if (cap > RESP_MAX)
            cap = RESP_MAX;
        if (len > cap - r->len) {
            r->overflow = true;
            return 0;
        }
        unsigned char *nb = realloc(r->body, cap + 1);
        if (nb == NULL)
            return 0;
        r->body = nb;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, len);
    r->len += len;
    return len;
}

static bool header_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    const char *v = line + k + 1;
    const char *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
        e--;
    *val = v;
    *vlen = (size_t)(e - v);
    return true;
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    s3_resp *r = arg;
    size_t len = size * n;
    const char *v;
    size_t vl;
    if (header_is(line, len, "ETag", &v, &vl) && vl < sizeof r->etag) {
        memcpy(r->etag, v, vl);
        r->etag[vl] = '\0';
    } else if (header_is(line, len, "Content-Length", &v, &vl) && vl > 0 && vl < 21) {
        char num[24];
        memcpy(num, v, vl);
        num[vl] = '\0';
        char *end = NULL;
        unsigned long long x = strtoull(num, &end, 10);
        if (end && *end == '\0') {
            r->length = x;
            r->has_length = true;
        }
    }
    return len;
}

static void amz_now(char out[static 17])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* Sets h up for one attempt of req (signed now); *list (the header list)
 * is the caller's to free after the transfer. */
static ph_status setup(s3_backend *b, CURL *h, const s3_req *req, const char *payload_hash,
                       s3_resp *resp, upload_src *src, struct curl_slist **listp, ph_diag *diag)
{
    ph_status st_, *st = &st_;
    const ph_s3_config *c = &b->cfg;
    char host[400], path[NAME_MAX_LEN + 80], enc_path[3 * (NAME_MAX_LEN + 80)], query[PH_SIGV4_MAX];
    char date[17], auth[1024], url[4096];
    *st = PH_OK;
    if (c->virtual_host) {
        snprintf(host, sizeof host, "%s.%s", c->bucket, c->host);
        snprintf(path, sizeof path, "/%s", req->object ? req->object : "");
    } else {
        snprintf(host, sizeof host, "%s", c->host);
        snprintf(path, sizeof path, "/%s%s%s", c->bucket, req->object ? "/" : "",
                 req->object ? req->object : "");
    }
    amz_now(date);
    ph_sigv4_pair hdrs[PH_SIGV4_MAX_HEADERS];
    size_t nh = 0;
    hdrs[nh++] = (ph_sigv4_pair){"host", host};
    hdrs[nh++] = (ph_sigv4_pair){"x-amz-content-sha256", payload_hash};
    hdrs[nh++] = (ph_sigv4_pair){"x-amz-date", date};
    for (size_t i = 0; i < req->n_headers && nh < PH_SIGV4_MAX_HEADERS; i++)
        hdrs[nh++] = req->headers[i];
    ph_sigv4_request sr = {.method = req->method, .path = path, .query = req->query,
                           .n_query = req->n_query, .headers = hdrs, .n_headers = nh,
                           .payload_hash = payload_hash, .amz_date = date};
    ph_sigv4_creds cr = {.access_key = c->access_key, .secret_key = c->secret_key,
                         .region = c->region, .service = "s3"};
    if ((*st = ph_sigv4_encode(path, strlen(path), 1, enc_path, sizeof enc_path, diag)) != PH_OK ||
        (*st = ph_sigv4_query(req->query, req->n_query, query, sizeof query, diag)) != PH_OK ||
        (*st = ph_sigv4_authorization(&sr, &cr, auth, sizeof auth, diag)) != PH_OK)
        return *st;
    int un = snprintf(url, sizeof url, "%s://%s%s%s%s", c->https ? "https" : "http", host, enc_path,
                      query[0] ? "?" : "", query);
    if (un < 0 || (size_t)un >= sizeof url)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "s3: URL too long");
    struct curl_slist *list = NULL;
    char line[1200];
    snprintf(line, sizeof line, "Host: %s", host);
    list = curl_slist_append(list, line);
    snprintf(line, sizeof line, "x-amz-content-sha256: %s", payload_hash);
    list = curl_slist_append(list, line);
    snprintf(line, sizeof line, "x-amz-date: %s", date);
    list = curl_slist_append(list, line);
    snprintf(line, sizeof line, "Authorization: %s", auth);
    list = curl_slist_append(list, line);
    for (size_t i = 0; i < req->n_headers; i++) {
        snprintf(line, sizeof line, "%s: %s", req->headers[i].name, req->headers[i].value);
        list = curl_slist_append(list, line);
    }
    list = curl_slist_append(list, "Expect:");
    list = curl_slist_append(list, "Accept:");
    OPENSSL_cleanse(auth, sizeof auth);

    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, c->https ? "https" : "http");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->request_timeout_ms);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (c->ca_file[0])
        curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, resp);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(req->method, "PUT") == 0 || strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, src);
        curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(h, CURLOPT_SEEKDATA, src);
        curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
        /* Large bodies go out in 2 MiB sends (libcurl's maximum), not 64 KiB. */
        if (req->body_len > UPLOAD_BUF)
            curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, (long)UPLOAD_BUF);
        if (strcmp(req->method, "POST") == 0)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
    } else if (strcmp(req->method, "GET") != 0) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    }
    *listp = list;
    return PH_OK;
}

/* One attempt of req; fills resp. Returns the curl code. */
static CURLcode do_once(s3_backend *b, CURL *h, const s3_req *req, const char *payload_hash,
                        s3_resp *resp, ph_diag *diag, ph_status *st)
{
    upload_src src = {.p = req->body, .len = req->body_len};
    struct curl_slist *list = NULL;
    *st = setup(b, h, req, payload_hash, resp, &src, &list, diag);
    CURLcode rc = CURLE_OK;
    if (*st == PH_OK) {
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->code);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(list);
    return rc;
}

static bool transient_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

/* The wait before retry number attempt + 1, in ms. */
static long backoff_ms(const ph_s3_config *c, int attempt)
{
    long base = c->retry_base_ms;
    for (int i = 0; i < attempt && base < 30000; i++)
        base *= 2;
    uint32_t r = 0;
    if (RAND_bytes((unsigned char *)&r, sizeof r) != 1)
        r = (uint32_t)time(NULL);
    return base + (long)(r % (uint32_t)(base + 1)); /* full jitter on top of the base */
}

static void backoff(const ph_s3_config *c, int attempt)
{
    long ms = backoff_ms(c, attempt);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The <Code> of an S3 error body, when there is one. */
static void error_code(s3_resp *r)
{
    r->error_code[0] = '\0';
    if (r->body == NULL || r->len == 0 || ph_s3_xml_check((const char *)r->body, r->len, NULL))
        return;
    size_t pos = 0;
    ph_s3_span sp;
    if (ph_s3_xml_next((const char *)r->body, r->len, &pos, "Code", &sp) == PH_OK)
        ph_s3_xml_text(sp, r->error_code, sizeof r->error_code);
}

/* req with retries. PH_OK means an HTTP answer arrived (any code: the
 * caller judges it); a transport failure after the last retry is PH_E_IO. */
static ph_status s3_call(s3_backend *b, CURL *h, const s3_req *req, s3_resp *resp, ph_diag *diag)
{
    char hash[65];
    if (req->has_body && req->content && b->unsigned_content)
        memcpy(hash, "UNSIGNED-PAYLOAD", sizeof "UNSIGNED-PAYLOAD");
    else if (req->has_body)
        ph_sigv4_sha256_hex(req->body ? (const void *)req->body : "", req->body_len, hash);
    else
        memcpy(hash, PH_SIGV4_EMPTY_SHA256, 65);
    if (h == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "s3: no HTTP handle");
    memset(resp, 0, sizeof *resp);
    for (int attempt = 0;; attempt++) {
        resp_free(resp);
        *resp = (s3_resp){0};
        if (req->sink) {
            resp->body = req->sink;
            resp->cap = req->sink_cap;
        } else {
            resp->own = true;
        }
        ph_status st = PH_OK;
        CURLcode rc = do_once(b, h, req, hash, resp, diag, &st);
        if (st != PH_OK)
            return st;
        bool retry = (rc != CURLE_OK && transient_curl(rc)) ||
                     (rc == CURLE_OK && (resp->code >= 500 || resp->code == 429));
        if (!retry || attempt >= b->cfg.retries) {
            if (rc != CURLE_OK)
                return ph_diag_set(diag, rc == CURLE_OPERATION_TIMEDOUT ? PH_E_TIMEOUT : PH_E_IO, 0,
                                   "s3: %s %s: %s", req->method, req->object ? req->object : "/",
                                   curl_easy_strerror(rc));
            if (resp->code >= 300)
                error_code(resp);
            return PH_OK;
        }
        backoff(&b->cfg, attempt);
    }
}

/* The status of an unexpected HTTP answer. */
static ph_status http_error(const s3_req *req, const s3_resp *r, ph_diag *diag)
{
    ph_status st = PH_E_IO;
    if (r->code == 403 || r->code == 401)
        st = PH_E_DENIED;
    else if (r->code == 404)
        st = PH_E_NOT_FOUND;
    return ph_diag_set(diag, st, 0, "s3: %s %s: HTTP %ld%s%s%s", req->method,
                       req->object ? req->object : "(bucket)", r->code, r->error_code[0] ? " " : "",
                       r->error_code, st == PH_E_DENIED ? " (access denied)" : "");
}

/* Content and metadata object names of key. */
static void object_names(const s3_backend *b, const char *key, char content[static NAME_MAX_LEN],
                         char meta[static NAME_MAX_LEN])
{
    snprintf(content, NAME_MAX_LEN, "%s/%.2s/%s", b->cfg.prefix, key, key);
    snprintf(meta, NAME_MAX_LEN, "%s/%.2s/%s.meta", b->cfg.prefix, key, key);
}

/* req (an in-memory body, if any); 2xx or an error status. */
static ph_status simple_req(s3_backend *b, CURL *h, const s3_req *req, s3_resp *out, ph_diag *diag)
{
    s3_resp r;
    ph_status st = s3_call(b, h, req, &r, diag);
    if (st == PH_OK && (r.code < 200 || r.code >= 300))
        st = http_error(req, &r, diag);
    if (out && st == PH_OK)
        *out = r;
    else
        resp_free(&r);
    return st;
}

/* A simple request with an in-memory body; 2xx or an error status. */
static ph_status simple(s3_backend *b, CURL *h, const char *method, const char *object,
                        const ph_sigv4_pair *q, size_t nq, const void *body, size_t len,
                        bool has_body, s3_resp *out, ph_diag *diag)
{
    s3_req req = {.method = method, .object = object, .query = q, .n_query = nq, .body = body,
                  .body_len = len, .has_body = has_body};
    return simple_req(b, h, &req, out, diag);
}

/* PUTs an artifact's bytes (a single PUT or a part, by q). */
static ph_status put_content(s3_backend *b, CURL *h, const char *object, const ph_sigv4_pair *q,
                             size_t nq, const void *body, size_t len, s3_resp *out, ph_diag *diag)
{
    s3_req req = {.method = "PUT", .object = object, .query = q, .n_query = nq, .body = body,
                  .body_len = len, .has_body = true, .content = true};
    return simple_req(b, h, &req, out, diag);
}

/* ---- writing ---- */

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
    ph_status st = simple(w->b, w->h, "POST", w->content, q, 1, NULL, 0, true, &r, diag);
    if (st != PH_OK)
        return st;
    size_t pos = 0;
    ph_s3_span sp;
    if (ph_s3_xml_check((const char *)r.body, r.len, diag) != PH_OK ||
        ph_s3_xml_next((const char *)r.body, r.len, &pos, "UploadId", &sp) != PH_OK ||
        !ph_s3_xml_text(sp, w->upload_id, sizeof w->upload_id) || w->upload_id[0] == '\0')
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: InitiateMultipartUpload: no UploadId");
    resp_free(&r);
    return st;
}

/* One UploadPart, retried inside simple(); runs on the slot's thread. */
static void *part_main(void *arg)
{
    part_slot *p = arg;
    ph_artifact_backend_writer *w = p->w;
    char num[16];
    snprintf(num, sizeof num, "%d", p->number);
    ph_sigv4_pair q[] = {{"partNumber", num}, {"uploadId", w->upload_id}};
    s3_resp r;
    p->diag = (ph_diag){0};
    p->st = put_content(w->b, p->h, w->content, q, 2, p->buf, p->len, &r, &p->diag);
    if (p->st != PH_OK)
        return NULL;
    if (r.etag[0] == '\0' || strlen(r.etag) >= sizeof p->etag || strpbrk(r.etag, "<&"))
        p->st = ph_diag_set(&p->diag, PH_E_FORMAT, 0, "s3: UploadPart: no usable ETag");
    else
        snprintf(p->etag, sizeof p->etag, "%s", r.etag);
    resp_free(&r);
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
    if (p->h == NULL && (p->h = handle_get(w->b)) == NULL)
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
        handle_put(w->b, w->slots[i].h);
        free(w->slots[i].buf);
    }
    handle_put(w->b, w->h);
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

static ph_status s3_write_begin(ph_artifact_backend *base, const char *key,
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
    w->h = handle_get(b);
    object_names(b, key, w->content, w->meta);
    if (w->buf == NULL || w->h == NULL) {
        handle_put(b, w->h);
        free(w->buf);
        free(w);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    *out = w;
    return PH_OK;
}

static ph_status s3_write(ph_artifact_backend_writer *w, const void *data, size_t len,
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
    ph_status st = simple(w->b, w->h, "POST", w->content, q, 1, doc, n, true, &r, diag);
    free(doc);
    if (st != PH_OK)
        return st;
    /* A 200 may still carry an <Error>. The body's ETag is not used (RGW
     * 16.2 leaves it empty); HEAD and listings carry the right one. */
    if (r.body && r.len && memmem(r.body, r.len, "<Error>", 7) != NULL) {
        error_code(&r);
        st = ph_diag_set(diag, PH_E_IO, 0, "s3: CompleteMultipartUpload: %s",
                         r.error_code[0] ? r.error_code : "error");
    }
    resp_free(&r);
    if (st == PH_OK)
        w->upload_id[0] = '\0'; /* completed: nothing left to abort */
    return st;
}

static void s3_write_abort(ph_artifact_backend_writer *w)
{
    if (w == NULL)
        return;
    join_all(w, NULL); /* no part may land after the abort */
    if (w->upload_id[0]) {
        ph_sigv4_pair q[] = {{"uploadId", w->upload_id}};
        simple(w->b, w->h, "DELETE", w->content, q, 1, NULL, 0, false, NULL, NULL);
    }
    if (w->content_written)
        simple(w->b, w->h, "DELETE", w->content, NULL, 0, NULL, 0, false, NULL, NULL);
    free_writer(w);
}

static ph_status s3_write_commit(ph_artifact_backend_writer *w, const char *meta, size_t meta_len,
                                 ph_diag *diag)
{
    ph_status st;
    if (w->upload_id[0] == '\0') {
        st = put_content(w->b, w->h, w->content, NULL, 0, w->buf, w->len, NULL, diag);
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
        st = simple(w->b, w->h, "PUT", w->meta, NULL, 0, meta, meta_len, true, NULL, diag);
    if (st != PH_OK) {
        s3_write_abort(w);
        return st;
    }
    free_writer(w);
    return PH_OK;
}

/* ---- reading ---- */

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

/* GETs a metadata object into *meta; PH_E_NOT_FOUND when absent. */
static ph_status get_meta(s3_backend *b, CURL *h, const char *name, char **meta, size_t *len,
                          ph_diag *diag)
{
    *meta = NULL;
    char *buf = malloc(PH_ARTIFACT_METADATA_MAX + 2);
    if (buf == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    s3_req req = {.method = "GET", .object = name, .sink = (unsigned char *)buf,
                  .sink_cap = PH_ARTIFACT_METADATA_MAX + 1};
    s3_resp r;
    ph_status st = s3_call(b, h, &req, &r, diag);
    if (st == PH_OK && r.code == 404)
        st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent");
    else if (st == PH_OK && r.code != 200)
        st = http_error(&req, &r, diag);
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

static ph_status head(s3_backend *b, CURL *h, const char *name, s3_resp *out, ph_diag *diag)
{
    s3_req req = {.method = "HEAD", .object = name};
    ph_status st = s3_call(b, h, &req, out, diag);
    if (st == PH_OK && out->code == 404)
        st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent");
    else if (st == PH_OK && out->code != 200)
        st = http_error(&req, out, diag);
    resp_free(out);
    return st;
}

static ph_status s3_open(ph_artifact_backend *base, const char *key, char **meta, size_t *meta_len,
                         ph_artifact_backend_reader **r, uint64_t *content_size, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    *meta = NULL;
    if (r)
        *r = NULL;
    char content[NAME_MAX_LEN], meta_name[NAME_MAX_LEN];
    object_names(b, key, content, meta_name);
    CURL *h = handle_get(b);
    ph_status st = get_meta(b, h, meta_name, meta, meta_len, diag);
    if (st != PH_OK || r == NULL) {
        handle_put(b, h);
        return st;
    }
    s3_resp hr;
    st = head(b, h, content, &hr, diag);
    if (st == PH_E_NOT_FOUND) {
        /* Published metadata without content is corruption, unless a
         * delete took the metadata away meanwhile. */
        s3_resp mr;
        st = head(b, h, meta_name, &mr, NULL) == PH_E_NOT_FOUND
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
        handle_put(b, h);
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
    ph_status st = setup(r->b, r->h, &req, PH_SIGV4_EMPTY_SHA256, &r->resp, &none, &r->list, diag);
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
    int64_t end = ph_monotonic_ms() + backoff_ms(&r->b->cfg, attempt);
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
        bool transient = (rc != CURLE_OK && (transient_curl(rc) || rc == CURLE_WRITE_ERROR)) ||
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

static ph_status s3_read(ph_artifact_backend_reader *r, void *out, size_t cap, size_t *got,
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

static void s3_read_interrupt(ph_artifact_backend_reader *r)
{
    atomic_store(&r->interrupted, true);
    curl_multi_wakeup(r->m);
}

static void s3_read_close(ph_artifact_backend_reader *r)
{
    if (r == NULL)
        return;
    stream_stop(r);
    if (r->m)
        curl_multi_cleanup(r->m);
    handle_put(r->b, r->h);
    free(r->buf);
    free(r);
}

/* ---- removing, listing, cleaning ---- */

static ph_status s3_remove(ph_artifact_backend *base, const char *key, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    char content[NAME_MAX_LEN], meta[NAME_MAX_LEN];
    object_names(b, key, content, meta);
    CURL *h = handle_get(b);
    s3_resp r;
    ph_status st = head(b, h, meta, &r, diag);
    if (st == PH_OK)
        st = simple(b, h, "DELETE", meta, NULL, 0, NULL, 0, false, NULL, diag); /* invisible */
    if (st == PH_OK)
        st = simple(b, h, "DELETE", content, NULL, 0, NULL, 0, false, NULL, diag);
    handle_put(b, h);
    return st;
}

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* Classifies a listed name: 1 content, 2 metadata, 0 not ours. *key gets K. */
static int classify(const s3_backend *b, const char *name, char key[static PH_ARTIFACT_KEY_LEN + 1])
{
    size_t pl = strlen(b->cfg.prefix), n = strlen(name);
    if (n < pl + 4 + PH_ARTIFACT_KEY_LEN || strncmp(name, b->cfg.prefix, pl) != 0 ||
        name[pl] != '/' || name[pl + 3] != '/')
        return 0;
    const char *k = name + pl + 4;
    if (!is_hex(k, PH_ARTIFACT_KEY_LEN) || memcmp(k, name + pl + 1, 2) != 0)
        return 0;
    memcpy(key, k, PH_ARTIFACT_KEY_LEN);
    key[PH_ARTIFACT_KEY_LEN] = '\0';
    const char *rest = k + PH_ARTIFACT_KEY_LEN;
    if (*rest == '\0')
        return 1;
    return strcmp(rest, ".meta") == 0 ? 2 : 0;
}

static int64_t parse_iso_time(ph_s3_span sp)
{
    char t[40];
    if (!ph_s3_xml_text(sp, t, sizeof t))
        return -1;
    struct tm tm = {0};
    if (sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec) != 6)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

typedef struct listed {
    char key[PH_ARTIFACT_KEY_LEN + 1];
    int kind;
    int64_t modified;
} listed;

typedef bool (*page_fn)(void *arg, const listed *items, size_t n);

/* Walks ListObjectsV2 under the prefix, a page at a time (continuation
 * tokens), handing our names to fn in listing order. */
static ph_status walk_objects(s3_backend *b, CURL *h, page_fn fn, void *arg, ph_diag *diag)
{
    char prefix[sizeof b->cfg.prefix + 2], token[1024] = "";
    snprintf(prefix, sizeof prefix, "%s/", b->cfg.prefix);
    listed *items = malloc(1000 * sizeof *items);
    if (items == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st = PH_OK;
    for (bool more = true; more && st == PH_OK;) {
        ph_sigv4_pair q[4] = {{"list-type", "2"}, {"prefix", prefix}, {"max-keys", "1000"}};
        size_t nq = 3;
        if (token[0])
            q[nq++] = (ph_sigv4_pair){"continuation-token", token};
        s3_resp r;
        st = simple(b, h, "GET", NULL, q, nq, NULL, 0, false, &r, diag);
        if (st != PH_OK)
            break;
        const char *doc = (const char *)r.body;
        st = ph_s3_xml_check(doc, r.len, diag);
        size_t pos = 0, n = 0;
        ph_s3_span c;
        while (st == PH_OK && n < 1000 && ph_s3_xml_next(doc, r.len, &pos, "Contents", &c) == PH_OK) {
            size_t ip = 0;
            ph_s3_span ks, ms;
            char name[NAME_MAX_LEN];
            if (ph_s3_xml_next(c.p, c.len, &ip, "Key", &ks) != PH_OK ||
                !ph_s3_xml_text(ks, name, sizeof name))
                continue;
            int kind = classify(b, name, items[n].key);
            if (kind == 0)
                continue;
            items[n].kind = kind;
            ip = 0;
            items[n].modified = ph_s3_xml_next(c.p, c.len, &ip, "LastModified", &ms) == PH_OK
                                    ? parse_iso_time(ms)
                                    : -1;
            n++;
        }
        size_t tp = 0;
        ph_s3_span t;
        char trunc[8] = "";
        more = ph_s3_xml_next(doc, r.len, &tp, "IsTruncated", &t) == PH_OK &&
               ph_s3_xml_text(t, trunc, sizeof trunc) && strcmp(trunc, "true") == 0;
        tp = 0;
        if (more && (ph_s3_xml_next(doc, r.len, &tp, "NextContinuationToken", &t) != PH_OK ||
                     !ph_s3_xml_text(t, token, sizeof token) || token[0] == '\0'))
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: truncated listing without a token");
        resp_free(&r);
        if (st == PH_OK && !fn(arg, items, n))
            more = false;
    }
    free(items);
    return st;
}

typedef struct list_ctx {
    s3_backend *b;
    CURL *h;
    ph_artifact_backend_visit_fn visit;
    void *arg;
} list_ctx;

static bool list_page(void *arg, const listed *items, size_t n)
{
    list_ctx *c = arg;
    char content[NAME_MAX_LEN], meta_name[NAME_MAX_LEN];
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind != 2)
            continue;
        object_names(c->b, items[i].key, content, meta_name);
        char *meta = NULL;
        size_t len = 0;
        ph_status st = get_meta(c->b, c->h, meta_name, &meta, &len, NULL);
        if (st == PH_E_NOT_FOUND)
            continue; /* deleted while we listed it */
        bool more = c->visit(c->arg, items[i].key, st == PH_OK ? meta : NULL, len);
        free(meta);
        if (!more)
            return false;
    }
    return true;
}

static ph_status s3_list(ph_artifact_backend *base, ph_artifact_backend_visit_fn visit, void *arg,
                         ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    CURL *h = handle_get(b), *h2 = handle_get(b);
    list_ctx c = {.b = b, .h = h2, .visit = visit, .arg = arg};
    ph_status st = walk_objects(b, h, list_page, &c, diag);
    handle_put(b, h2);
    handle_put(b, h);
    return st;
}

typedef struct upload_visit {
    s3_backend *b;
    CURL *h;
    int64_t cutoff; /* initiated at or before: abandoned */
    uint64_t seen, removed;
    bool abort;
} upload_visit;

/* Walks ListMultipartUploads under the prefix; aborts the abandoned ones
 * when u->abort. */
static ph_status walk_uploads(upload_visit *u, ph_diag *diag)
{
    s3_backend *b = u->b;
    char prefix[sizeof b->cfg.prefix + 2], key_marker[NAME_MAX_LEN] = "", id_marker[256] = "";
    snprintf(prefix, sizeof prefix, "%s/", b->cfg.prefix);
    ph_status st = PH_OK;
    for (bool more = true; more && st == PH_OK;) {
        ph_sigv4_pair q[4] = {{"uploads", NULL}, {"prefix", prefix}};
        size_t nq = 2;
        if (key_marker[0]) {
            q[nq++] = (ph_sigv4_pair){"key-marker", key_marker};
            q[nq++] = (ph_sigv4_pair){"upload-id-marker", id_marker};
        }
        s3_resp r;
        st = simple(b, u->h, "GET", NULL, q, nq, NULL, 0, false, &r, diag);
        if (st != PH_OK)
            break;
        const char *doc = (const char *)r.body;
        st = ph_s3_xml_check(doc, r.len, diag);
        size_t pos = 0;
        ph_s3_span up;
        while (st == PH_OK && ph_s3_xml_next(doc, r.len, &pos, "Upload", &up) == PH_OK) {
            size_t ip = 0;
            ph_s3_span s;
            char name[NAME_MAX_LEN], id[256], k[PH_ARTIFACT_KEY_LEN + 1];
            if (ph_s3_xml_next(up.p, up.len, &ip, "Key", &s) != PH_OK ||
                !ph_s3_xml_text(s, name, sizeof name) || classify(b, name, k) != 1)
                continue;
            ip = 0;
            if (ph_s3_xml_next(up.p, up.len, &ip, "UploadId", &s) != PH_OK ||
                !ph_s3_xml_text(s, id, sizeof id))
                continue;
            ip = 0;
            int64_t started = ph_s3_xml_next(up.p, up.len, &ip, "Initiated", &s) == PH_OK
                                  ? parse_iso_time(s)
                                  : -1;
            u->seen++;
            if (u->abort && started >= 0 && started <= u->cutoff) {
                ph_sigv4_pair aq[] = {{"uploadId", id}};
                if (simple(b, u->h, "DELETE", name, aq, 1, NULL, 0, false, NULL, NULL) == PH_OK)
                    u->removed++;
            }
        }
        size_t tp = 0;
        ph_s3_span t;
        char trunc[8] = "";
        more = ph_s3_xml_next(doc, r.len, &tp, "IsTruncated", &t) == PH_OK &&
               ph_s3_xml_text(t, trunc, sizeof trunc) && strcmp(trunc, "true") == 0;
        if (more) {
            size_t a = 0, c = 0;
            ph_s3_span km, im;
            if (ph_s3_xml_next(doc, r.len, &a, "NextKeyMarker", &km) != PH_OK ||
                ph_s3_xml_next(doc, r.len, &c, "NextUploadIdMarker", &im) != PH_OK ||
                !ph_s3_xml_text(km, key_marker, sizeof key_marker) ||
                !ph_s3_xml_text(im, id_marker, sizeof id_marker))
                st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3: truncated upload listing");
        }
        resp_free(&r);
    }
    return st;
}

typedef struct orphan_ctx {
    s3_backend *b;
    CURL *h;
    int64_t cutoff;
    uint64_t removed;
    listed pending; /* a content object whose metadata has not been listed yet */
    bool has_pending;
} orphan_ctx;

/* A content object without metadata, old enough: its writer is gone. */
static void settle_pending(orphan_ctx *c)
{
    if (!c->has_pending)
        return;
    c->has_pending = false;
    if (c->pending.modified < 0 || c->pending.modified > c->cutoff)
        return;
    char content[NAME_MAX_LEN], meta[NAME_MAX_LEN];
    object_names(c->b, c->pending.key, content, meta);
    s3_resp r;
    if (head(c->b, c->h, meta, &r, NULL) == PH_E_NOT_FOUND &&
        simple(c->b, c->h, "DELETE", content, NULL, 0, NULL, 0, false, NULL, NULL) == PH_OK)
        c->removed++;
}

/* Listing order puts K right before K.meta, across pages too. */
static bool orphan_page(void *arg, const listed *items, size_t n)
{
    orphan_ctx *c = arg;
    for (size_t i = 0; i < n; i++) {
        if (items[i].kind == 2 && c->has_pending && strcmp(items[i].key, c->pending.key) == 0) {
            c->has_pending = false;
            continue;
        }
        settle_pending(c);
        if (items[i].kind == 1) {
            c->pending = items[i];
            c->has_pending = true;
        }
    }
    return true;
}

static ph_status s3_clean_staging(ph_artifact_backend *base, uint64_t *removed, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    CURL *h = handle_get(b), *h2 = handle_get(b);
    int64_t cutoff = (int64_t)time(NULL) - b->cfg.staging_grace_seconds;
    upload_visit u = {.b = b, .h = h, .cutoff = cutoff, .abort = true};
    ph_status st = walk_uploads(&u, diag);
    orphan_ctx o = {.b = b, .h = h2, .cutoff = cutoff};
    if (st == PH_OK)
        st = walk_objects(b, h, orphan_page, &o, diag);
    if (st == PH_OK)
        settle_pending(&o);
    *removed += u.removed + o.removed;
    handle_put(b, h2);
    handle_put(b, h);
    return st;
}

ph_status ph_s3_backend_count_uploads(ph_artifact_backend *base, uint64_t *n, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    upload_visit u = {.b = b, .h = handle_get(b)};
    ph_status st = walk_uploads(&u, diag);
    handle_put(b, u.h);
    *n = u.seen;
    return st;
}

static void s3_destroy(ph_artifact_backend *base)
{
    s3_backend *b = (s3_backend *)base;
    if (b == NULL)
        return;
    for (int i = 0; i < b->n_idle; i++)
        curl_easy_cleanup(b->idle[i]);
    pthread_mutex_destroy(&b->mu);
    OPENSSL_cleanse(&b->cfg, sizeof b->cfg);
    free(b);
}

static const ph_artifact_backend_ops s3_ops = {
    .name = "s3",
    .write_begin = s3_write_begin,
    .write = s3_write,
    .write_commit = s3_write_commit,
    .write_abort = s3_write_abort,
    .open = s3_open,
    .read = s3_read,
    .read_close = s3_read_close,
    .read_interrupt = s3_read_interrupt,
    .remove = s3_remove,
    .list = s3_list,
    .clean_staging = s3_clean_staging,
    .destroy = s3_destroy,
};

/* host[:port] names this machine: 127.0.0.0/8, ::1 or localhost. */
static bool loopback(const char *host)
{
    size_t n = strcspn(host, host[0] == '[' ? "]" : ":");
    if (host[0] == '[')
        return strncmp(host, "[::1]", 5) == 0;
    return (n == 9 && strncasecmp(host, "localhost", 9) == 0) ||
           (n >= 9 && strncmp(host, "127.", 4) == 0 && strspn(host, "0123456789.") == n);
}

ph_status ph_s3_backend_open_config(const ph_s3_config *cfg, ph_artifact_backend **out,
                                    ph_diag *diag)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init_once);
    s3_backend *b = calloc(1, sizeof *b);
    if (b == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    b->base.ops = &s3_ops;
    b->cfg = *cfg;
    b->unsigned_content = cfg->sign_content == PH_S3_SIGN_NEVER ||
                          (cfg->sign_content == PH_S3_SIGN_AUTO && (cfg->https || loopback(cfg->host)));
    pthread_mutex_init(&b->mu, NULL);
    CURL *h = handle_get(b);
    ph_status st = PH_OK;
    if (b->cfg.create_bucket) {
        s3_req req = {.method = "PUT", .has_body = true};
        s3_resp r;
        st = s3_call(b, h, &req, &r, diag);
        if (st == PH_OK && r.code != 200 && strcmp(r.error_code, "BucketAlreadyOwnedByYou") != 0)
            st = http_error(&req, &r, diag);
        resp_free(&r);
    }
    /* The credentials and the bucket are checked now, not at first use. */
    if (st == PH_OK) {
        s3_resp r;
        st = head(b, h, NULL, &r, NULL);
        if (st == PH_E_NOT_FOUND)
            st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "s3: bucket %s does not exist", b->cfg.bucket);
        else if (st == PH_E_DENIED)
            st = ph_diag_set(diag, PH_E_DENIED, 0,
                             "s3: access to bucket %s denied (wrong key or secret?)", b->cfg.bucket);
        else if (st != PH_OK)
            st = ph_diag_set(diag, st, 0, "s3: bucket %s unreachable at %s", b->cfg.bucket,
                             b->cfg.endpoint);
    }
    handle_put(b, h);
    if (st != PH_OK) {
        s3_destroy(&b->base);
        return st;
    }
    *out = &b->base;
    return PH_OK;
}

ph_status ph_artifact_backend_s3_open(const char *config_path, ph_artifact_backend **out,
                                      ph_diag *diag)
{
    *out = NULL;
    if (config_path == NULL || *config_path == '\0')
        return ph_diag_set(diag, PH_E_INVAL, 0, "s3 config path is empty");
    ph_s3_config *cfg = malloc(sizeof *cfg);
    if (cfg == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st = ph_s3_config_load(config_path, cfg, diag);
    if (st == PH_OK)
        st = ph_s3_backend_open_config(cfg, out, diag);
    OPENSSL_cleanse(cfg, sizeof *cfg);
    free(cfg);
    return st;
}

ph_status ph_s3_backend_raw(ph_artifact_backend *base, const char *method, const char *name,
                            const void *data, size_t len, ph_diag *diag)
{
    s3_backend *b = (s3_backend *)base;
    CURL *h = handle_get(b);
    ph_status st = simple(b, h, method, name, NULL, 0, data, len, data != NULL, NULL, diag);
    handle_put(b, h);
    return st;
}
