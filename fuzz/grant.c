/*
 * fuzz/grant.c - the grant token parser and verifier, the Proxy-Authorization
 * parser and the key-file parser (pinhole/grant.h).
 *
 * The first input byte picks the target, the rest is its input:
 *   0: ph_grant_verify with a fixed keyring. Invariants: the status matches
 *      the reason; an accepted token is canonical: re-issuing its grant with
 *      its key id gives back exactly the input bytes (one spelling per grant);
 *   1: ph_proxy_authorization_parse. Accepted Basic credentials re-encode to
 *      exactly the input (canonical base64, one space, nothing after);
 *      accepted Bearer tokens are the input after "Bearer ";
 *   2: ph_keyring_parse. An accepted file has 1..PH_GRANT_KEYS_MAX keys;
 *   3: structured: the bytes become a grant that is issued, must verify to
 *      the same fields, and with any one byte changed must be refused.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grant-int.h"
#include "pinhole/grant.h"

#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

#define NOW INT64_C(1800000100)

static ph_keyring *keyring(void)
{
    static ph_keyring *kr;
    if (kr == NULL) {
        uint8_t key[32];
        for (int i = 0; i < 32; i++)
            key[i] = (uint8_t)i;
        CHECK(ph_keyring_new(&kr, NULL) == PH_OK);
        CHECK(ph_keyring_add(kr, "fz", key, sizeof key, NULL) == PH_OK);
        key[0] ^= 0xff;
        CHECK(ph_keyring_add(kr, "fz-old", key, sizeof key, NULL) == PH_OK);
    }
    return kr;
}

static void fuzz_verify(const uint8_t *d, size_t n)
{
    ph_grant g;
    ph_reason r;
    ph_status st = ph_grant_verify(keyring(), (const char *)d, n, NOW, NULL, &g, &r, NULL);
    CHECK(st == PH_OK ? r == PH_REASON_ALLOWED : st == PH_E_DENIED);
    if (st != PH_OK) {
        CHECK(r == PH_REASON_NO_GRANT || r == PH_REASON_GRANT_INVALID ||
              r == PH_REASON_GRANT_EXPIRED);
        CHECK((r == PH_REASON_NO_GRANT) == (n == 0));
        return;
    }
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t tn = 0;
    CHECK(ph_grant_issue(keyring(), g.kid, &g, tok, sizeof tok, &tn, NULL) == PH_OK);
    CHECK(tn == n && memcmp(tok, d, n) == 0);
}

static void fuzz_proxy_authorization(const uint8_t *d, size_t n)
{
    ph_proxy_credentials c;
    ph_reason r;
    ph_status st = ph_proxy_authorization_parse((const char *)d, n, &c, &r, NULL);
    if (st != PH_OK) {
        CHECK(st == PH_E_DENIED && (r == PH_REASON_NO_GRANT || r == PH_REASON_GRANT_INVALID));
        return;
    }
    CHECK(c.token_len > 0 && c.token_len <= PH_GRANT_TOKEN_MAX &&
          strlen(c.token) == c.token_len);
    if (!c.has_lease) {
        CHECK(n == 7 + c.token_len && memcmp(d + 7, c.token, c.token_len) == 0);
        return;
    }
    CHECK(ph_grant_field_valid(c.lease, strlen(c.lease)));
    char cred[PH_GRANT_FIELD_MAX + 1 + PH_GRANT_TOKEN_MAX + 1];
    size_t cn = strlen(c.lease);
    memcpy(cred, c.lease, cn);
    cred[cn++] = ':';
    memcpy(cred + cn, c.token, c.token_len);
    cn += c.token_len;
    char b64[1024];
    size_t bn = ph_b64_encode((const uint8_t *)cred, cn, PH_B64_STD_PAD, b64, sizeof b64);
    CHECK(n == 6 + bn && memcmp(d + 6, b64, bn) == 0);
}

static void fuzz_key_file(const uint8_t *d, size_t n)
{
    ph_keyring *kr = NULL;
    ph_status st = ph_keyring_parse((const char *)d, n, &kr, NULL);
    if (st == PH_OK) {
        CHECK(ph_keyring_count(kr) >= 1 && ph_keyring_count(kr) <= PH_GRANT_KEYS_MAX);
        CHECK(ph_keyring_signing_kid(kr) != NULL);
    } else {
        CHECK(kr == NULL);
    }
    ph_keyring_free(&kr);
}

/* Copies a field made of the allowed characters from the input. */
static void take_field(const uint8_t **d, size_t *n, char *dst)
{
    static const char SET[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
    size_t len = *n > 0 ? (size_t)(**d % PH_GRANT_FIELD_MAX) + 1 : 1;
    if (*n > 0) {
        (*d)++;
        (*n)--;
    }
    for (size_t i = 0; i < len; i++) {
        dst[i] = SET[(i < *n ? (*d)[i] : i) % (sizeof SET - 1)];
    }
    dst[len] = '\0';
    size_t used = len < *n ? len : *n;
    *d += used;
    *n -= used;
}

static void fuzz_structured(const uint8_t *d, size_t n)
{
    ph_grant g;
    memset(&g, 0, sizeof g);
    take_field(&d, &n, g.tenant);
    take_field(&d, &n, g.lease);
    take_field(&d, &n, g.list);
    g.not_before = NOW - (n > 0 ? d[0] : 0);
    g.expires = NOW + 1 + (n > 1 ? d[1] : 0);
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t tn = 0;
    CHECK(ph_grant_issue(keyring(), NULL, &g, tok, sizeof tok, &tn, NULL) == PH_OK);
    ph_grant out;
    CHECK(ph_grant_verify(keyring(), tok, tn, NOW, g.list, &out, NULL, NULL) == PH_OK);
    CHECK(strcmp(out.tenant, g.tenant) == 0 && strcmp(out.lease, g.lease) == 0 &&
          strcmp(out.list, g.list) == 0 && out.not_before == g.not_before &&
          out.expires == g.expires && strcmp(out.kid, "fz") == 0);
    if (n > 3) {
        size_t pos = ((size_t)d[2] << 8 | d[3]) % tn;
        uint8_t flip = (uint8_t)(n > 4 && d[4] != 0 ? d[4] : 1);
        tok[pos] = (char)(tok[pos] ^ flip);
        ph_reason r;
        CHECK(ph_grant_verify(keyring(), tok, tn, NOW, NULL, NULL, &r, NULL) == PH_E_DENIED);
        CHECK(r == PH_REASON_GRANT_INVALID);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *d = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0: fuzz_verify(d, n); break;
    case 1: fuzz_proxy_authorization(d, n); break;
    case 2: fuzz_key_file(d, n); break;
    default: fuzz_structured(d, n); break;
    }
    return 0;
}
