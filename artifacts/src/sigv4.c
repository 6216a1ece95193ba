/* sigv4.c - AWS Signature Version 4 (header form), as the published
 * algorithm describes it: canonical request, string to sign, the key chain
 * HMAC("AWS4"+secret, date) -> region -> service -> "aws4_request", and the
 * final HMAC. Checked against the aws-sig-v4-test-suite vectors in
 * tests/artifacts/test_sigv4.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "sigv4-int.h"

/* An append-only string over a caller's buffer; overflow is sticky. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    int overflow;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->overflow || n >= b->cap - b->len) {
        b->overflow = 1;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

/* Appends in[0..len) percent-encoded (pinhole/hex.h), "/" kept when asked. */
static void sb_encoded(sbuf *b, const char *in, size_t len, int keep_slash)
{
    if (b->overflow)
        return;
    size_t n = ph_percent_encode(in, len, keep_slash ? "/" : NULL, b->p + b->len, b->cap - b->len);
    if (n == PH_PERCENT_TOO_LONG) {
        b->p[b->len] = '\0';
        b->overflow = 1;
        return;
    }
    b->len += n;
}

static ph_status too_long(ph_diag *diag)
{
    return ph_diag_set(diag, PH_E_LIMIT, 0, "sigv4: request larger than %d bytes", PH_SIGV4_MAX);
}

ph_status ph_sigv4_encode(const char *in, size_t len, int keep_slash, char *out, size_t cap,
                          ph_diag *diag)
{
    if (ph_percent_encode(in, len, keep_slash ? "/" : NULL, out, cap) == PH_PERCENT_TOO_LONG)
        return too_long(diag);
    return PH_OK;
}

/* Sort keys: the encoded name, then the encoded value (byte order). */
typedef struct enc_pair {
    char name[256], value[1024];
} enc_pair;

static int cmp_enc(const void *a, const void *b)
{
    const enc_pair *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

ph_status ph_sigv4_query(const ph_sigv4_pair *q, size_t n, char *out, size_t cap, ph_diag *diag)
{
    if (n > PH_SIGV4_MAX_PARAMS)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "sigv4: more than %d query parameters",
                           PH_SIGV4_MAX_PARAMS);
    enc_pair e[PH_SIGV4_MAX_PARAMS];
    for (size_t i = 0; i < n; i++) {
        const char *v = q[i].value ? q[i].value : "";
        if (ph_sigv4_encode(q[i].name, strlen(q[i].name), 0, e[i].name, sizeof e[i].name, diag) !=
                PH_OK ||
            ph_sigv4_encode(v, strlen(v), 0, e[i].value, sizeof e[i].value, diag) != PH_OK)
            return too_long(diag);
    }
    qsort(e, n, sizeof e[0], cmp_enc);
    sbuf b = {.p = out, .cap = cap};
    if (cap == 0)
        return too_long(diag);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i)
            sb_str(&b, "&");
        sb_str(&b, e[i].name);
        sb_str(&b, "=");
        sb_str(&b, e[i].value);
    }
    return b.overflow ? too_long(diag) : PH_OK;
}

typedef struct canon_header {
    char name[64];
    const char *value;
} canon_header;

static int cmp_header(const void *a, const void *b)
{
    return strcmp(((const canon_header *)a)->name, ((const canon_header *)b)->name);
}

/* Lowercased, sorted header names; refuses names that are not tokens. */
static ph_status sorted_headers(const ph_sigv4_request *req, canon_header *h, ph_diag *diag)
{
    if (req->n_headers > PH_SIGV4_MAX_HEADERS)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "sigv4: more than %d headers",
                           PH_SIGV4_MAX_HEADERS);
    for (size_t i = 0; i < req->n_headers; i++) {
        const char *s = req->headers[i].name;
        size_t n = strlen(s);
        if (n == 0 || n >= sizeof h[i].name)
            return ph_diag_set(diag, PH_E_INVAL, 0, "sigv4: bad header name");
        for (size_t j = 0; j <= n; j++) {
            char c = s[j];
            if (c >= 'A' && c <= 'Z')
                c = (char)(c - 'A' + 'a');
            if (j < n && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
                return ph_diag_set(diag, PH_E_INVAL, 0, "sigv4: bad header name");
            h[i].name[j] = c;
        }
        h[i].value = req->headers[i].value ? req->headers[i].value : "";
    }
    qsort(h, req->n_headers, sizeof h[0], cmp_header);
    return PH_OK;
}

/* A header value trimmed, inner runs of spaces collapsed to one. */
static void sb_header_value(sbuf *b, const char *v)
{
    while (*v == ' ' || *v == '\t')
        v++;
    int space = 0;
    for (; *v; v++) {
        if (*v == ' ' || *v == '\t') {
            space = 1;
            continue;
        }
        if (space)
            sb_add(b, " ", 1);
        space = 0;
        sb_add(b, v, 1);
    }
}

static ph_status build(const ph_sigv4_request *req, char *out, size_t cap, char *signed_names,
                       size_t names_cap, ph_diag *diag)
{
    canon_header h[PH_SIGV4_MAX_HEADERS];
    ph_status st = sorted_headers(req, h, diag);
    if (st != PH_OK)
        return st;
    char query[PH_SIGV4_MAX];
    st = ph_sigv4_query(req->query, req->n_query, query, sizeof query, diag);
    if (st != PH_OK)
        return st;
    sbuf b = {.p = out, .cap = cap}, names = {.p = signed_names, .cap = names_cap};
    if (cap == 0 || names_cap == 0)
        return too_long(diag);
    out[0] = signed_names[0] = '\0';
    sb_str(&b, req->method);
    sb_str(&b, "\n");
    const char *path = req->path && *req->path ? req->path : "/";
    sb_encoded(&b, path, strlen(path), 1);
    sb_str(&b, "\n");
    sb_str(&b, query);
    sb_str(&b, "\n");
    for (size_t i = 0; i < req->n_headers; i++) {
        sb_str(&b, h[i].name);
        sb_str(&b, ":");
        sb_header_value(&b, h[i].value);
        sb_str(&b, "\n");
        if (i)
            sb_str(&names, ";");
        sb_str(&names, h[i].name);
    }
    sb_str(&b, "\n");
    sb_str(&b, signed_names);
    sb_str(&b, "\n");
    sb_str(&b, req->payload_hash);
    return b.overflow || names.overflow ? too_long(diag) : PH_OK;
}

ph_status ph_sigv4_canonical_request(const ph_sigv4_request *req, char *out, size_t cap,
                                     ph_diag *diag)
{
    char names[1024];
    return build(req, out, cap, names, sizeof names, diag);
}

void ph_sigv4_sha256_hex(const void *data, size_t len, char hex[static 65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    ph_hex_encode(md, 32, hex);
}

static int hmac(const void *key, size_t key_len, const char *msg, unsigned char out[static 32])
{
    unsigned int n = 0;
    return HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out,
                &n) != NULL && n == 32;
}

ph_status ph_sigv4_authorization(const ph_sigv4_request *req, const ph_sigv4_creds *creds,
                                 char *out, size_t cap, ph_diag *diag)
{
    const char *d = req->amz_date;
    if (d == NULL || strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z')
        return ph_diag_set(diag, PH_E_INVAL, 0, "sigv4: date is not YYYYMMDDTHHMMSSZ");
    char *canon = malloc(PH_SIGV4_MAX);
    if (canon == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    char names[1024];
    ph_status st = build(req, canon, PH_SIGV4_MAX, names, sizeof names, diag);
    char canon_hash[65];
    if (st == PH_OK)
        ph_sigv4_sha256_hex(canon, strlen(canon), canon_hash);
    free(canon);
    if (st != PH_OK)
        return st;
    char date[9], scope[256], to_sign[512];
    memcpy(date, d, 8);
    date[8] = '\0';
    int n1 = snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, creds->region,
                      creds->service);
    int n2 = snprintf(to_sign, sizeof to_sign, "AWS4-HMAC-SHA256\n%s\n%s\n%s", d, scope, canon_hash);
    if (n1 < 0 || (size_t)n1 >= sizeof scope || n2 < 0 || (size_t)n2 >= sizeof to_sign)
        return too_long(diag);
    /* The key chain; the first key is "AWS4" + secret. */
    size_t slen = strlen(creds->secret_key);
    char *k0 = malloc(slen + 5);
    if (k0 == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    memcpy(k0, "AWS4", 4);
    memcpy(k0 + 4, creds->secret_key, slen + 1);
    unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
    int ok = hmac(k0, slen + 4, date, k1) && hmac(k1, 32, creds->region, k2) &&
             hmac(k2, 32, creds->service, k3) && hmac(k3, 32, "aws4_request", k4) &&
             hmac(k4, 32, to_sign, sig);
    OPENSSL_cleanse(k0, slen + 4);
    free(k0);
    OPENSSL_cleanse(k1, 32);
    OPENSSL_cleanse(k2, 32);
    OPENSSL_cleanse(k3, 32);
    OPENSSL_cleanse(k4, 32);
    if (!ok)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "sigv4: HMAC failed");
    char sig_hex[65];
    ph_hex_encode(sig, 32, sig_hex);
    int n = snprintf(out, cap, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                     creds->access_key, scope, names, sig_hex);
    if (n < 0 || (size_t)n >= cap)
        return too_long(diag);
    return PH_OK;
}
