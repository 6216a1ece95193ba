/* store_s3_http.c - the S3 backend's HTTP: a pool of libcurl easy
 * handles, one signed request (SigV4, sigv4.c) set up on a handle, and the
 * retries every request gets: on transport errors, 5xx and 429, with
 * exponential backoff and full jitter (store_s3.c says why every request
 * can be retried alone). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "store_s3-int.h"

#define RESP_MAX ((size_t)4 << 20)    /* cap of an XML answer */
#define UPLOAD_BUF (2L << 20)         /* libcurl's largest upload buffer */

void ph_s3_resp_free(s3_resp *r)
{
    if (r->own)
        free(r->body);
    r->body = NULL;
    r->own = false;
}

CURL *ph_s3_handle_get(s3_backend *b)
{
    CURL *h = NULL;
    pthread_mutex_lock(&b->mu);
    if (b->n_idle > 0)
        h = b->idle[--b->n_idle];
    pthread_mutex_unlock(&b->mu);
    return h ? h : curl_easy_init();
}

void ph_s3_handle_put(s3_backend *b, CURL *h)
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

ph_status ph_s3_setup(s3_backend *b, CURL *h, const s3_req *req, const char *payload_hash,
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
    *st = ph_s3_setup(b, h, req, payload_hash, resp, &src, &list, diag);
    CURLcode rc = CURLE_OK;
    if (*st == PH_OK) {
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->code);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(list);
    return rc;
}

bool ph_s3_transient_curl(CURLcode rc)
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

long ph_s3_backoff_ms(const ph_s3_config *c, int attempt)
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
    long ms = ph_s3_backoff_ms(c, attempt);
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void ph_s3_error_code(s3_resp *r)
{
    r->error_code[0] = '\0';
    if (r->body == NULL || r->len == 0 || ph_s3_xml_check((const char *)r->body, r->len, NULL))
        return;
    size_t pos = 0;
    ph_s3_span sp;
    if (ph_s3_xml_next((const char *)r->body, r->len, &pos, "Code", &sp) == PH_OK)
        ph_s3_xml_text(sp, r->error_code, sizeof r->error_code);
}

ph_status ph_s3_call(s3_backend *b, CURL *h, const s3_req *req, s3_resp *resp, ph_diag *diag)
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
        ph_s3_resp_free(resp);
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
        bool retry = (rc != CURLE_OK && ph_s3_transient_curl(rc)) ||
                     (rc == CURLE_OK && (resp->code >= 500 || resp->code == 429));
        if (!retry || attempt >= b->cfg.retries) {
            if (rc != CURLE_OK)
                return ph_diag_set(diag, rc == CURLE_OPERATION_TIMEDOUT ? PH_E_TIMEOUT : PH_E_IO, 0,
                                   "s3: %s %s: %s", req->method, req->object ? req->object : "/",
                                   curl_easy_strerror(rc));
            if (resp->code >= 300)
                ph_s3_error_code(resp);
            return PH_OK;
        }
        backoff(&b->cfg, attempt);
    }
}

ph_status ph_s3_http_error(const s3_req *req, const s3_resp *r, ph_diag *diag)
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

void ph_s3_object_names(const s3_backend *b, const char *key, char content[static NAME_MAX_LEN],
                        char meta[static NAME_MAX_LEN])
{
    snprintf(content, NAME_MAX_LEN, "%s/%.2s/%s", b->cfg.prefix, key, key);
    snprintf(meta, NAME_MAX_LEN, "%s/%.2s/%s.meta", b->cfg.prefix, key, key);
}

/* req (an in-memory body, if any); 2xx or an error status. */
static ph_status simple_req(s3_backend *b, CURL *h, const s3_req *req, s3_resp *out, ph_diag *diag)
{
    s3_resp r;
    ph_status st = ph_s3_call(b, h, req, &r, diag);
    if (st == PH_OK && (r.code < 200 || r.code >= 300))
        st = ph_s3_http_error(req, &r, diag);
    if (out && st == PH_OK)
        *out = r;
    else
        ph_s3_resp_free(&r);
    return st;
}

ph_status ph_s3_simple(s3_backend *b, CURL *h, const char *method, const char *object,
                       const ph_sigv4_pair *q, size_t nq, const void *body, size_t len,
                       bool has_body, s3_resp *out, ph_diag *diag)
{
    s3_req req = {.method = method, .object = object, .query = q, .n_query = nq, .body = body,
                  .body_len = len, .has_body = has_body};
    return simple_req(b, h, &req, out, diag);
}

ph_status ph_s3_put_content(s3_backend *b, CURL *h, const char *object, const ph_sigv4_pair *q,
                            size_t nq, const void *body, size_t len, s3_resp *out, ph_diag *diag)
{
    s3_req req = {.method = "PUT", .object = object, .query = q, .n_query = nq, .body = body,
                  .body_len = len, .has_body = true, .content = true};
    return simple_req(b, h, &req, out, diag);
}
