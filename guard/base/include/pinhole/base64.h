/*
 * pinhole/base64.h - strict, canonical base64 (RFC 4648): the standard
 * alphabet always padded, or base64url never padded. Decoding accepts one
 * spelling per value: no whitespace, no missing or extra padding, no
 * non-zero unused bits, so two encodings never name the same bytes (grant
 * tokens, Proxy-Authorization values, bytes in execd's JSON).
 */
#ifndef PINHOLE_BASE64_H
#define PINHOLE_BASE64_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ph_b64_alphabet {
    PH_B64_URL_NOPAD = 0, /* RFC 4648 section 5, never padded */
    PH_B64_STD_PAD = 1,   /* RFC 4648 section 4, always padded */
} ph_b64_alphabet;

/* Encoded length of n bytes (the NUL not counted). */
PH_API size_t ph_b64_encoded_len(size_t n, ph_b64_alphabet a);

/* Encodes in[0..n) into out[0..cap) plus a NUL. Returns the length written
 * (NUL excluded): 0 for n == 0 (out is then ""), and 0 with out untouched
 * when cap < ph_b64_encoded_len(n, a) + 1. The caller owns both buffers. */
PH_API size_t ph_b64_encode(const uint8_t *in, size_t n, ph_b64_alphabet a, char *out,
                            size_t cap);

/* Decodes in[0..n) into out[0..cap). Fails (false) on any character outside
 * the alphabet, on wrong or missing padding, on an impossible length (the
 * empty input included: callers that allow no bytes check n == 0 first), on
 * non-zero unused trailing bits (non-canonical), or when cap is too small.
 * *out_len gets the decoded length. */
PH_API bool ph_b64_decode(const char *in, size_t n, ph_b64_alphabet a, uint8_t *out, size_t cap,
                          size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_BASE64_H */
