/* sigv4-int.h - AWS Signature Version 4 over OpenSSL's HMAC/SHA-256
 * (private). Pure functions: no clock, no I/O; the caller passes the date.
 *
 * The signer builds the canonical request itself from unencoded parts, so
 * the query string it signs and the one the caller sends come from the same
 * routine (ph_sigv4_query): sorted by name then value, every byte outside
 * A-Za-z0-9-._~ percent-encoded, a valueless parameter written `name=`. */
#ifndef PINHOLE_ARTIFACTS_SIGV4_INT_H
#define PINHOLE_ARTIFACTS_SIGV4_INT_H

#include <stddef.h>

#include "pinhole/status.h"

/* Longest canonical request, query string or Authorization value built. */
#define PH_SIGV4_MAX 8192
#define PH_SIGV4_MAX_PARAMS 16
#define PH_SIGV4_MAX_HEADERS 16
#define PH_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

typedef struct ph_sigv4_pair {
    const char *name;
    const char *value; /* query: NULL = valueless; header: the raw value */
} ph_sigv4_pair;

typedef struct ph_sigv4_creds {
    const char *access_key;
    const char *secret_key;
    const char *region;
    const char *service;
} ph_sigv4_creds;

typedef struct ph_sigv4_request {
    const char *method;
    const char *path;    /* unencoded; each byte but '/' is encoded once */
    const ph_sigv4_pair *query;
    size_t n_query;
    const ph_sigv4_pair *headers; /* every header to sign, host included */
    size_t n_headers;
    const char *payload_hash;     /* lowercase hex, or "UNSIGNED-PAYLOAD" */
    const char *amz_date;         /* YYYYMMDDTHHMMSSZ, also sent as x-amz-date */
} ph_sigv4_request;

/* Percent-encodes in (len bytes) into out (cap bytes, NUL-terminated);
 * keep_slash leaves '/' as is (paths). PH_E_LIMIT when it does not fit. */
ph_status ph_sigv4_encode(const char *in, size_t len, int keep_slash, char *out, size_t cap,
                          ph_diag *diag);

/* The canonical query string of q[0..n) into out (cap bytes). */
ph_status ph_sigv4_query(const ph_sigv4_pair *q, size_t n, char *out, size_t cap, ph_diag *diag);

/* The canonical request (for tests and diagnostics) into out. */
ph_status ph_sigv4_canonical_request(const ph_sigv4_request *req, char *out, size_t cap,
                                     ph_diag *diag);

/* The Authorization header value ("AWS4-HMAC-SHA256 Credential=...,
 * SignedHeaders=..., Signature=...") into out (cap bytes). */
ph_status ph_sigv4_authorization(const ph_sigv4_request *req, const ph_sigv4_creds *creds,
                                 char *out, size_t cap, ph_diag *diag);

/* Lowercase hex SHA-256 of len bytes into hex (65 bytes). */
void ph_sigv4_sha256_hex(const void *data, size_t len, char hex[static 65]);

#endif
