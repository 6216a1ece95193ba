/* filename_rules-int.h - the character classes of a safe filename, shared by
 * the sanitizer and the checker so both apply one definition (private). */
#ifndef PINHOLE_ARTIFACTS_FILENAME_RULES_INT_H
#define PINHOLE_ARTIFACTS_FILENAME_RULES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* C0 controls, DEL, C1 controls. */
bool ph_fn_is_control(uint32_t cp);
/* Invisible: Unicode Cf (bidi overrides and isolates, zero-width characters,
 * soft hyphen, BOM, tags, ...), Default_Ignorable code points, line and
 * paragraph separators, noncharacters. */
bool ph_fn_is_invisible(uint32_t cp);
/* Path separators '/' and '\\'. */
bool ph_fn_is_separator(uint32_t cp);
/* Quotes and the characters Windows forbids in names: " ' < > : | ? * */
bool ph_fn_is_forbidden_punct(uint32_t cp);
/* name (len bytes, ASCII-compared) is a reserved device name once its
 * extension and the spaces before it are removed: CON, PRN, AUX, NUL,
 * COM0-9, LPT0-9 (and the superscript digits), CONIN$, CONOUT$. */
bool ph_fn_is_device_name(const char *name, size_t len);

#endif
