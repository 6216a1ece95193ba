/* grant_proxy_auth.c - the two grant transports in a Proxy-Authorization
 * header value (DESIGN section 5):
 *   Basic base64(lease ":" token)   what http://lease:token@proxy makes curl,
 *                                   pip, npm and git send;
 *   Bearer token.
 * Strict: one scheme, one space, canonical base64, nothing after. */
#include <string.h>

#include <openssl/crypto.h>

#include "pinhole/diag.h"
#include "grant-int.h"
#include "pinhole/grant.h"

/* Longest Basic credential we decode: a lease, ':' and a token. */
#define BASIC_DECODED_MAX (PH_GRANT_FIELD_MAX + 1 + PH_GRANT_TOKEN_MAX)

static ph_status deny(ph_reason *reason, ph_reason r, ph_diag *diag, size_t off, const char *msg)
{
    if (reason != NULL)
        *reason = r;
    return ph_diag_set(diag, PH_E_DENIED, off, "%s", msg);
}

/* Case-insensitive match of value[0..len) against the lowercase scheme
 * followed by one space (RFC 9110: schemes are case-insensitive). */
static bool scheme_is(const char *value, size_t len, const char *scheme)
{
    size_t n = strlen(scheme);
    if (len < n + 1 || value[n] != ' ')
        return false;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)value[i];
        if (c >= 'A' && c <= 'Z')
            c += 'a' - 'A';
        if (c != scheme[i])
            return false;
    }
    return true;
}

/* A token is visible ASCII with no space; the verifier checks the rest. */
static bool token_chars_ok(const char *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return false;
    return true;
}

ph_status ph_proxy_authorization_parse(const char *value, size_t len, ph_proxy_credentials *out,
                                       ph_reason *reason, ph_diag *diag)
{
    if (reason != NULL)
        *reason = PH_REASON_GRANT_INVALID;
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "proxy authorization: missing argument");
    memset(out, 0, sizeof *out);
    if (value == NULL || len == 0)
        return deny(reason, PH_REASON_NO_GRANT, diag, 0, "no Proxy-Authorization credentials");

    if (scheme_is(value, len, "bearer")) {
        const char *t = value + 7;
        size_t n = len - 7;
        if (n == 0 || n > PH_GRANT_TOKEN_MAX || !token_chars_ok(t, n))
            return deny(reason, PH_REASON_GRANT_INVALID, diag, 7, "malformed Bearer token");
        memcpy(out->token, t, n);
        out->token[n] = '\0';
        out->token_len = n;
    } else if (scheme_is(value, len, "basic")) {
        const char *b = value + 6;
        size_t n = len - 6;
        uint8_t dec[BASIC_DECODED_MAX];
        size_t dn = 0;
        if (n > ph_b64_encoded_len(BASIC_DECODED_MAX, PH_B64_STD_PAD) ||
            !ph_b64_decode(b, n, PH_B64_STD_PAD, dec, sizeof dec, &dn))
            return deny(reason, PH_REASON_GRANT_INVALID, diag, 6,
                        "Basic credentials are not canonical base64");
        const uint8_t *colon = memchr(dec, ':', dn);
        size_t leaselen = colon != NULL ? (size_t)(colon - dec) : 0;
        size_t toklen = colon != NULL ? dn - leaselen - 1 : 0;
        if (colon == NULL || !ph_grant_field_valid((const char *)dec, leaselen) ||
            toklen == 0 || toklen > PH_GRANT_TOKEN_MAX ||
            !token_chars_ok((const char *)colon + 1, toklen)) {
            OPENSSL_cleanse(dec, sizeof dec);
            return deny(reason, PH_REASON_GRANT_INVALID, diag, 6,
                        "Basic credentials are not \"lease:token\"");
        }
        memcpy(out->lease, dec, leaselen);
        out->lease[leaselen] = '\0';
        out->has_lease = true;
        memcpy(out->token, colon + 1, toklen);
        out->token[toklen] = '\0';
        out->token_len = toklen;
        OPENSSL_cleanse(dec, sizeof dec);
    } else {
        return deny(reason, PH_REASON_GRANT_INVALID, diag, 0,
                    "Proxy-Authorization scheme is neither Basic nor Bearer");
    }
    if (reason != NULL)
        *reason = PH_REASON_ALLOWED;
    return PH_OK;
}

ph_status ph_grant_verify_proxy_authorization(const ph_keyring *kr, const char *value, size_t len,
                                              int64_t now, const char *want_list, ph_grant *out,
                                              ph_reason *reason, ph_diag *diag)
{
    ph_proxy_credentials cred;
    ph_grant g;
    ph_status st = ph_proxy_authorization_parse(value, len, &cred, reason, diag);
    if (st == PH_OK)
        st = ph_grant_verify(kr, cred.token, cred.token_len, now, want_list, &g, reason, diag);
    if (st == PH_OK && cred.has_lease && strcmp(cred.lease, g.lease) != 0)
        st = deny(reason, PH_REASON_GRANT_INVALID, diag, 0,
                  "the Basic user name is not the grant's lease");
    if (st == PH_OK && out != NULL)
        *out = g;
    OPENSSL_cleanse(&cred, sizeof cred);
    return st;
}
