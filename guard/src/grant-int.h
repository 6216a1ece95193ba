/* grant-int.h - strict base64 codecs shared by the grant token, the
 * Proxy-Authorization parser and the pinhole-guard tool (private).
 *
 * Why not OpenSSL's EVP_DecodeBlock: it accepts whitespace, ignores
 * non-canonical trailing bits and knows only the standard alphabet; a token
 * must have exactly one spelling so that the MAC covers exactly one string. */
#ifndef PINHOLE_GRANT_INT_H
#define PINHOLE_GRANT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

typedef enum ph_b64_alphabet {
    PH_B64_URL_NOPAD = 0, /* RFC 4648 section 5, never padded */
    PH_B64_STD_PAD = 1,   /* RFC 4648 section 4, always padded */
} ph_b64_alphabet;

/* Encoded length of n bytes. */
size_t ph_b64_encoded_len(size_t n, ph_b64_alphabet a);

/* Encodes in[0..n) into out[0..cap) plus a NUL. Returns the length written
 * (NUL excluded) or 0 when cap is too small (n == 0 also returns 0). */
size_t ph_b64_encode(const uint8_t *in, size_t n, ph_b64_alphabet a, char *out, size_t cap);

/* Decodes in[0..n) into out[0..cap). Fails (false) on any character outside
 * the alphabet, on wrong or missing padding, on an impossible length, on
 * non-zero unused trailing bits (non-canonical), or when cap is too small.
 * *out_len gets the decoded length. */
bool ph_b64_decode(const char *in, size_t n, ph_b64_alphabet a, uint8_t *out, size_t cap,
                          size_t *out_len);

/* True for a well-formed key id / grant field (grant.h rules). */
bool ph_grant_kid_valid(const char *s, size_t len);
bool ph_grant_field_valid(const char *s, size_t len);

#endif
