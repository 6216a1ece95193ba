/* store_s3-int.h - what the files of the S3 backend share (private to
 * store_s3*.c): the backend, one request and its answer, the HTTP layer
 * with its retries (store_s3_http.c), the two reads the writer, the reader
 * and the sweep all use (store_s3_read.c), and each file's operations of the
 * port, which store_s3.c puts in the backend's table. The rules (layout in
 * the bucket, whole-or-nothing, retries, ownership of handles) are at the
 * top of store_s3.c. */
#ifndef PINHOLE_ARTIFACTS_STORE_S3_INT_H
#define PINHOLE_ARTIFACTS_STORE_S3_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "pinhole/artifact_backend.h"
#include "pinhole/diag.h"
#include "s3-int.h"
#include "sigv4-int.h"

#define POOL_MAX 8
#define NAME_MAX_LEN 320

typedef struct s3_backend {
    ph_artifact_backend base;
    ph_s3_config cfg;
    pthread_mutex_t mu;
    CURL *idle[POOL_MAX];
    int n_idle;
    bool unsigned_content; /* content bodies sent as UNSIGNED-PAYLOAD */
} s3_backend;

/* ---- HTTP and retry (store_s3_http.c) ---- */

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
    unsigned char *body; /* sink or malloc'd (free with ph_s3_resp_free) */
    size_t len, cap;
    bool own, overflow;
    char etag[128];
    uint64_t length;
    bool has_length;
    char error_code[64];
} s3_resp;

/* An in-memory request body as curl reads (and rewinds) it. */
typedef struct upload_src {
    const unsigned char *p;
    size_t len, pos;
} upload_src;

/* Frees the body r owns (none when it wrote into a sink). */
void ph_s3_resp_free(s3_resp *r);

/* An easy handle from b's idle pool, or a new one (NULL when out of
 * memory); ph_s3_handle_put gives it back (NULL: nothing). */
CURL *ph_s3_handle_get(s3_backend *b);
void ph_s3_handle_put(s3_backend *b, CURL *h);

/* Sets h up for one attempt of req (signed now); *listp (the header list)
 * is the caller's to free after the transfer. resp and src are the
 * callbacks' and must outlive it. */
ph_status ph_s3_setup(s3_backend *b, CURL *h, const s3_req *req, const char *payload_hash,
                      s3_resp *resp, upload_src *src, struct curl_slist **listp, ph_diag *diag);

/* Whether a curl failure is worth another attempt. */
bool ph_s3_transient_curl(CURLcode rc);

/* The wait before retry number attempt + 1, in ms. */
long ph_s3_backoff_ms(const ph_s3_config *c, int attempt);

/* Fills r->error_code with the <Code> of an S3 error body, when there is one. */
void ph_s3_error_code(s3_resp *r);

/* req with retries. PH_OK means an HTTP answer arrived (any code: the
 * caller judges it); a transport failure after the last retry is PH_E_IO. */
ph_status ph_s3_call(s3_backend *b, CURL *h, const s3_req *req, s3_resp *resp, ph_diag *diag);

/* The status of an unexpected HTTP answer. */
ph_status ph_s3_http_error(const s3_req *req, const s3_resp *r, ph_diag *diag);

/* Content and metadata object names of key. */
void ph_s3_object_names(const s3_backend *b, const char *key, char content[static NAME_MAX_LEN],
                        char meta[static NAME_MAX_LEN]);

/* A simple request with an in-memory body; 2xx or an error status. On PH_OK
 * *out (may be NULL) takes the answer, freed with ph_s3_resp_free. */
ph_status ph_s3_simple(s3_backend *b, CURL *h, const char *method, const char *object,
                       const ph_sigv4_pair *q, size_t nq, const void *body, size_t len,
                       bool has_body, s3_resp *out, ph_diag *diag);

/* PUTs an artifact's bytes (a single PUT or a part, by q). */
ph_status ph_s3_put_content(s3_backend *b, CURL *h, const char *object, const ph_sigv4_pair *q,
                            size_t nq, const void *body, size_t len, s3_resp *out, ph_diag *diag);

/* ---- reading (store_s3_read.c) ---- */

/* GETs a metadata object into *meta (malloc'd, NUL-terminated, the
 * caller's); PH_E_NOT_FOUND when absent. */
ph_status ph_s3_get_meta(s3_backend *b, CURL *h, const char *name, char **meta, size_t *len,
                         ph_diag *diag);

/* HEADs name (NULL: the bucket); PH_E_NOT_FOUND when absent. *out keeps
 * the headers (ETag, Content-Length), never a body. */
ph_status ph_s3_head(s3_backend *b, CURL *h, const char *name, s3_resp *out, ph_diag *diag);

/* ---- the port's operations (pinhole/artifact_backend.h) ---- */

/* store_s3_write.c */
ph_status ph_s3_write_begin(ph_artifact_backend *base, const char *key,
                            ph_artifact_backend_writer **out, ph_diag *diag);
ph_status ph_s3_write(ph_artifact_backend_writer *w, const void *data, size_t len, ph_diag *diag);
ph_status ph_s3_write_commit(ph_artifact_backend_writer *w, const char *meta, size_t meta_len,
                             ph_diag *diag);
void ph_s3_write_abort(ph_artifact_backend_writer *w);

/* store_s3_read.c */
ph_status ph_s3_open(ph_artifact_backend *base, const char *key, char **meta, size_t *meta_len,
                     ph_artifact_backend_reader **r, uint64_t *content_size, ph_diag *diag);
ph_status ph_s3_read(ph_artifact_backend_reader *r, void *out, size_t cap, size_t *got,
                     ph_diag *diag);
void ph_s3_read_interrupt(ph_artifact_backend_reader *r);
void ph_s3_read_close(ph_artifact_backend_reader *r);

/* store_s3_list.c */
ph_status ph_s3_remove(ph_artifact_backend *base, const char *key, ph_diag *diag);
ph_status ph_s3_list(ph_artifact_backend *base, ph_artifact_backend_visit_fn visit, void *arg,
                     ph_diag *diag);
ph_status ph_s3_clean_staging(ph_artifact_backend *base, uint64_t *removed, ph_diag *diag);

#endif
