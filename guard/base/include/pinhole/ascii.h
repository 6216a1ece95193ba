/*
 * pinhole/ascii.h - locale-independent ASCII character classes and
 * comparison, for every module (host names, file names, variable names):
 * never <ctype.h>, whose answers change with the locale.
 */
#ifndef PINHOLE_ASCII_H
#define PINHOLE_ASCII_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Locale-independent character classes. */
static inline bool ph_is_digit(int c) { return c >= '0' && c <= '9'; }
static inline bool ph_is_lower(int c) { return c >= 'a' && c <= 'z'; }
static inline bool ph_is_upper(int c) { return c >= 'A' && c <= 'Z'; }
static inline bool ph_is_hex(int c)
{
    return ph_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
/* Letter, digit or hyphen, lowercase only. */
static inline bool ph_is_ldh(int c) { return ph_is_lower(c) || ph_is_digit(c) || c == '-'; }
static inline int ph_ascii_lower(int c) { return ph_is_upper(c) ? c + ('a' - 'A') : c; }
/* Whether the n bytes at s equal the NUL-terminated lit, ASCII
 * case-insensitively ("com" equals "COM"). */
static inline bool ph_ascii_equal_nocase(const char *s, size_t n, const char *lit)
{
    for (size_t i = 0; i < n; i++)
        if (lit[i] == '\0' ||
            ph_ascii_lower((unsigned char)s[i]) != ph_ascii_lower((unsigned char)lit[i]))
            return false;
    return lit[n] == '\0';
}

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_ASCII_H */
