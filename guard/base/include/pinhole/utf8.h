/*
 * pinhole/utf8.h - strict UTF-8 (RFC 3629) and the code points a reader
 * cannot see. Names, filenames and allowlists arrive as arbitrary bytes;
 * these decide what is a character before any rule looks at it, one way for
 * every module.
 */
#ifndef PINHOLE_UTF8_H
#define PINHOLE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What ph_utf8_decode stores for an invalid sequence (not a code point). */
#define PH_UTF8_INVALID UINT32_C(0xFFFFFFFF)

/*
 * Decodes one character at s (len > 0 bytes available). Returns the number
 * of bytes it takes (1..4) and sets *cp to its code point. An invalid
 * sequence (an overlong form, a surrogate U+D800..U+DFFF, a value above
 * U+10FFFF, a sequence cut short by len, a stray continuation byte, 0xC0,
 * 0xC1, 0xF5..0xFF) takes 1 byte and sets *cp to PH_UTF8_INVALID, so a
 * caller stepping by the return value sees every byte of a bad sequence.
 */
PH_API size_t ph_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);

/* True when all len bytes are valid UTF-8 (NUL bytes included). */
PH_API bool ph_utf8_valid(const void *s, size_t len);

/* The offset of the first byte of the first invalid sequence in s[0..len),
 * or len when all of it is valid. */
PH_API size_t ph_utf8_first_invalid(const void *s, size_t len);

/*
 * Invisible: drawn as nothing, or changing how the text around it is drawn.
 * The union of Unicode 15 General_Category Cf (bidi marks, embeddings,
 * overrides and isolates, zero-width characters, the soft hyphen, the BOM,
 * tags, ...), Default_Ignorable_Code_Point (variation selectors, fillers,
 * ...), Zl and Zp (U+2028, U+2029) and the noncharacters. Controls (C0, DEL,
 * C1) are not in it: callers that refuse them say so themselves.
 */
PH_API bool ph_unicode_is_invisible(uint32_t cp);

/*
 * The bidirectional embeddings, overrides and isolates with their
 * terminators (U+202A..U+202E, U+2066..U+2069): the characters that reorder
 * what a reader sees against what a parser reads (CVE-2021-42574, "Trojan
 * Source"). A subset of ph_unicode_is_invisible. The marks (U+200E, U+200F,
 * U+061C) are invisible but reorder nothing around them, so are not in it.
 */
PH_API bool ph_unicode_is_bidi_override(uint32_t cp);

/*
 * The text form of the len bytes at s (a file name, any bytes but NUL):
 * printable characters as they are; a backslash doubled; newline, carriage
 * return and tab as backslash-n, -r, -t; every other C0 control and DEL as
 * backslash-x and two lowercase hex digits, and so every byte of a C1
 * control (U+0080 to U+009F), of an invisible character
 * (ph_unicode_is_invisible: a zero-width space, a bidi override, the BOM,
 * ...) and, when s is not valid UTF-8, every byte >= 0x80. The result is
 * valid UTF-8 without a control or invisible character, at most 4 * len
 * bytes, and reversible.
 * The one encoding of a byte string shown as text (docs/sandbox.md: the
 * CLI's text output, an exported artifact's source_path). A new string the
 * caller frees; NULL when out of memory.
 */
PH_API char *ph_text_escape(const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_UTF8_H */
