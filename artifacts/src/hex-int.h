/* hex-int.h - lowercase hex encoding and strict decoding (private). */
#ifndef PINHOLE_ARTIFACTS_HEX_INT_H
#define PINHOLE_ARTIFACTS_HEX_INT_H

#include <stdbool.h>
#include <stddef.h>

/* Writes 2*len lowercase hex chars and a NUL to out. */
void ph_art_hex_encode(const void *in, size_t len, char *out);

/* Decodes exactly hex_len chars (even, lowercase only) into out (hex_len/2
 * bytes). Returns false on any other input. */
bool ph_art_hex_decode(const char *hex, size_t hex_len, unsigned char *out);

#endif
