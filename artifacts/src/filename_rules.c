/* filename_rules.c - which characters and names are unsafe in a local
 * filename. The tables cite their source so a reviewer can check them:
 * Microsoft "Naming Files, Paths, and Namespaces" for the reserved device
 * names and forbidden characters. Invisible characters are the base
 * library's one table (ph_unicode_is_invisible, pinhole/utf8.h). */
#include "filename_rules-int.h"

#include <string.h>

#include "pinhole/ascii.h"

bool ph_fn_is_control(uint32_t cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

bool ph_fn_is_separator(uint32_t cp)
{
    return cp == '/' || cp == '\\';
}

bool ph_fn_is_separator_lookalike(uint32_t cp)
{
    /* Unicode confusables (UTS #39) of U+002F and U+005C among symbols;
     * letters and ideographs that resemble a stroke are not listed. */
    static const uint32_t lookalikes[] = {
        0x2044, /* FRACTION SLASH */
        0x2215, /* DIVISION SLASH */
        0x2216, /* SET MINUS */
        0x2571, /* BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT */
        0x2572, /* BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT */
        0x27CB, /* MATHEMATICAL RISING DIAGONAL */
        0x27CD, /* MATHEMATICAL FALLING DIAGONAL */
        0x29F5, /* REVERSE SOLIDUS OPERATOR */
        0x29F8, /* BIG SOLIDUS */
        0x29F9, /* BIG REVERSE SOLIDUS */
    };
    for (size_t i = 0; i < sizeof lookalikes / sizeof lookalikes[0]; i++)
        if (cp == lookalikes[i])
            return true;
    return false;
}

bool ph_fn_is_forbidden_punct(uint32_t cp)
{
    return cp != 0 && cp < 0x80 && strchr("\"'<>:|?*", (int)cp) != NULL;
}

bool ph_fn_is_device_name(const char *name, size_t len)
{
    const char *dot = memchr(name, '.', len);
    size_t stem = dot ? (size_t)(dot - name) : len;
    while (stem > 0 && name[stem - 1] == ' ')
        stem--;
    static const char *const plain[] = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (ph_ascii_equal_nocase(name, stem, plain[i]))
            return true;
    if (!ph_ascii_equal_nocase(name, stem < 3 ? stem : 3, "COM") &&
        !ph_ascii_equal_nocase(name, stem < 3 ? stem : 3, "LPT"))
        return false;
    if (stem == 4 && name[3] >= '0' && name[3] <= '9')
        return true;
    /* COM¹ COM² COM³ (U+00B9 U+00B2 U+00B3, two bytes each in UTF-8) */
    if (stem == 5 && (unsigned char)name[3] == 0xC2 &&
        ((unsigned char)name[4] == 0xB9 || (unsigned char)name[4] == 0xB2 ||
         (unsigned char)name[4] == 0xB3))
        return true;
    return false;
}
