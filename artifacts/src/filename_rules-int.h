/* filename_rules-int.h - the character classes of a safe filename, shared by
 * the sanitizer and the checker so both apply one definition (private). */
#ifndef PINHOLE_ARTIFACTS_FILENAME_RULES_INT_H
#define PINHOLE_ARTIFACTS_FILENAME_RULES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/utf8.h"

/* C0 controls, DEL, C1 controls. */
bool ph_fn_is_control(uint32_t cp);
/* Invisible characters: ph_unicode_is_invisible (pinhole/utf8.h). */
/* Path separators '/' and '\\'. */
bool ph_fn_is_separator(uint32_t cp);
/* Characters drawn as '/' or '\\' that NFKC leaves alone but Windows'
 * best-fit conversion may map to a separator: fraction slash, division
 * slash, set minus, box-drawing and mathematical diagonals, big solidi. */
bool ph_fn_is_separator_lookalike(uint32_t cp);
/* Quotes and the characters Windows forbids in names: " ' < > : | ? * */
bool ph_fn_is_forbidden_punct(uint32_t cp);
/* name (len bytes, ASCII-compared) is a reserved device name once its
 * extension and the spaces before it are removed: CON, PRN, AUX, NUL,
 * COM0-9, LPT0-9 (and the superscript digits), CONIN$, CONOUT$. */
bool ph_fn_is_device_name(const char *name, size_t len);

/* Unicode normalization, by libunistring (filename_normalize.c). Some file
 * systems, archivers and Windows' best-fit conversion apply NFKC to a name,
 * which turns look-alikes into the characters the rules refuse:
 * U+FF0E U+FF0F ("．／") become "./", U+FE68 becomes '\'. */

/* The NFKC (compat) or NFC (!compat) form of s[0..len), which is valid UTF-8.
 * Written to buf (cap bytes) when it fits, else to a new malloc'd buffer.
 * Returns the result and its length in *n; the caller frees the result when
 * it is not buf. NULL when memory ran out. */
char *ph_fn_normalize(bool compat, const char *s, size_t len, char *buf, size_t cap, size_t *n);

/* True when NFKC turns cp into text holding a separator, a quote or
 * Windows-forbidden character, a control or an invisible character
 * (U+FF0F -> '/', U+FE68 -> '\', U+2100 -> "a/c", U+FF1A -> ':'). */
bool ph_fn_compat_is_unsafe(uint32_t cp);

/* The first and the last code point of NFKC(cp) (both cp when NFKC leaves
 * it alone): U+FF0E gives '.', U+2488 ("1.") gives '1' and '.'. */
void ph_fn_compat_ends(uint32_t cp, uint32_t *first, uint32_t *last);

#endif
