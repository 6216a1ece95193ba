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
 * the call that set them and outlive its transfer.
 *
 * The backend in files, one section each, sharing store_s3-int.h:
 * store_s3_http.c (the handle pool, a signed request, retries),
 * store_s3_write.c (single PUT, multipart, publication), store_s3_read.c
 * (metadata, HEAD, the streaming GET), store_s3_list.c (remove, list, the
 * sweep); this file opens the backend (the bucket checked at once) and
 * closes it. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "store_s3-int.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
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
    .write_begin = ph_s3_write_begin,
    .write = ph_s3_write,
    .write_commit = ph_s3_write_commit,
    .write_abort = ph_s3_write_abort,
    .open = ph_s3_open,
    .read = ph_s3_read,
    .read_close = ph_s3_read_close,
    .read_interrupt = ph_s3_read_interrupt,
    .remove = ph_s3_remove,
    .list = ph_s3_list,
    .clean_staging = ph_s3_clean_staging,
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
    CURL *h = ph_s3_handle_get(b);
    ph_status st = PH_OK;
    if (b->cfg.create_bucket) {
        s3_req req = {.method = "PUT", .has_body = true};
        s3_resp r;
        st = ph_s3_call(b, h, &req, &r, diag);
        if (st == PH_OK && r.code != 200 && strcmp(r.error_code, "BucketAlreadyOwnedByYou") != 0)
            st = ph_s3_http_error(&req, &r, diag);
        ph_s3_resp_free(&r);
    }
    /* The credentials and the bucket are checked now, not at first use. */
    if (st == PH_OK) {
        s3_resp r;
        st = ph_s3_head(b, h, NULL, &r, NULL);
        if (st == PH_E_NOT_FOUND)
            st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "s3: bucket %s does not exist", b->cfg.bucket);
        else if (st == PH_E_DENIED)
            st = ph_diag_set(diag, PH_E_DENIED, 0,
                             "s3: access to bucket %s denied (wrong key or secret?)", b->cfg.bucket);
        else if (st != PH_OK)
            st = ph_diag_set(diag, st, 0, "s3: bucket %s unreachable at %s", b->cfg.bucket,
                             b->cfg.endpoint);
    }
    ph_s3_handle_put(b, h);
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
    CURL *h = ph_s3_handle_get(b);
    ph_status st = ph_s3_simple(b, h, method, name, NULL, 0, data, len, data != NULL, NULL, diag);
    ph_s3_handle_put(b, h);
    return st;
}
