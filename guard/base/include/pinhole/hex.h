/*
 * pinhole/hex.h - lowercase hexadecimal, the one spelling of binary values
 * (digests, ids, keys, policy ids) in Pinhole's files, logs and names.
 * Decoding accepts lowercase only, so every value has exactly one spelling
 * and two spellings never name the same bytes.
 */
#ifndef PINHOLE_HEX_H
#define PINHOLE_HEX_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lowercase digit of v & 15 ('0'..'9', 'a'..'f'). */
PH_API char ph_hex_digit(unsigned v);

/* The value (0..15) of the lowercase hex digit c, or -1 for any other byte
 * (uppercase included). */
PH_API int ph_hex_value(int c);

/* The value (0..15) of a hex digit of either case, or -1: only for reading
 * formats whose grammar allows both (XML character references, percent
 * escapes), never for a value Pinhole itself spells. */
PH_API int ph_hex_value_any_case(int c);

/* Writes 2*len lowercase digits and a NUL to out, which holds at least
 * 2*len + 1 bytes. in may be NULL when len is 0. The caller owns both. */
PH_API void ph_hex_encode(const void *in, size_t len, char *out);

/* Decodes exactly hex_len digits into out (hex_len / 2 bytes). Returns true
 * on success; false when hex_len is odd or a byte is not a lowercase hex
 * digit, and then *bad_at (when not NULL) is the offset of the first bad
 * byte (hex_len for an odd length) and out holds unspecified bytes. */
PH_API bool ph_hex_decode(const char *hex, size_t hex_len, void *out, size_t *bad_at);

/* A fresh random id: reads len bytes (1..PH_HEX_RANDOM_MAX) from getrandom(2),
 * the kernel's CSPRNG (blocking only until it is first seeded), and writes
 * them as 2*len lowercase digits and a NUL to out, which holds at least
 * 2*len + 1 bytes and is owned by the caller. Returns false, out then "" and
 * errno set, when len is out of range or the kernel gives no randomness: an
 * id made without it would be guessable, so the caller fails instead. The
 * one generator of the ids of environments, execd workspaces and leases, and
 * artifacts. */
#define PH_HEX_RANDOM_MAX 256
PH_API bool ph_hex_random(size_t len, char *out);

/*
 * Percent-encoding (RFC 3986 section 2.1), the one place hex is uppercase:
 * every byte of in[0..len) outside the RFC 3986 unreserved set (ALPHA DIGIT
 * "-" "." "_" "~") and outside keep (more bytes to leave as they are, e.g.
 * "/" for a path; NULL for none) becomes "%XX". Writes to out[0..cap) with a
 * NUL and returns the length (NUL excluded); returns (size_t)-1 when the
 * result does not fit, out then holding "" (cap > 0). The caller owns the
 * buffers; at most 3 * len + 1 bytes are needed.
 */
#define PH_PERCENT_TOO_LONG ((size_t)-1)
PH_API size_t ph_percent_encode(const void *in, size_t len, const char *keep, char *out,
                                size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_HEX_H */
