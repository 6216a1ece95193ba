/* utf8-int.h - strict UTF-8 decoding (private). */
#ifndef PINHOLE_ARTIFACTS_UTF8_INT_H
#define PINHOLE_ARTIFACTS_UTF8_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PH_ART_UTF8_INVALID UINT32_C(0xFFFFFFFF)

/* Decodes one code point at s (len > 0 bytes available). Returns the number
 * of bytes consumed (1..4) and sets *cp; an invalid sequence (overlong,
 * surrogate, > U+10FFFF, truncated, stray continuation) consumes 1 byte and
 * sets *cp to PH_ART_UTF8_INVALID. */
size_t ph_art_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);

/* True when all len bytes are valid UTF-8 (NUL bytes included). */
bool ph_art_utf8_valid(const void *s, size_t len);

#endif
