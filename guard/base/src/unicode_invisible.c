/* unicode_invisible.c - the code points a reader cannot see
 * (pinhole/utf8.h). The table cites its source so a reviewer can check it:
 * Unicode 15 General_Category=Cf, DerivedCoreProperties
 * Default_Ignorable_Code_Point, Zl (U+2028) and Zp (U+2029). */
#include "pinhole/utf8.h"

typedef struct range {
    uint32_t lo, hi;
} range;

/* Sorted, non-overlapping. */
static const range invisible[] = {
    {0x00AD, 0x00AD},   /* soft hyphen */
    {0x034F, 0x034F},   /* combining grapheme joiner */
    {0x0600, 0x0605},   /* Arabic number signs */
    {0x061C, 0x061C},   /* Arabic letter mark */
    {0x06DD, 0x06DD},
    {0x070F, 0x070F},
    {0x0890, 0x0891},
    {0x08E2, 0x08E2},
    {0x115F, 0x1160},   /* Hangul fillers */
    {0x17B4, 0x17B5},
    {0x180B, 0x180F},   /* Mongolian variation selectors, vowel separator */
    {0x200B, 0x200F},   /* zero width space/joiners, LRM, RLM */
    {0x2028, 0x202E},   /* line/paragraph separators, LRE RLE PDF LRO RLO */
    {0x2060, 0x206F},   /* word joiner, invisible operators, LRI RLI FSI PDI, ... */
    {0x3164, 0x3164},   /* Hangul filler */
    {0xFE00, 0xFE0F},   /* variation selectors */
    {0xFEFF, 0xFEFF},   /* BOM / zero width no-break space */
    {0xFFA0, 0xFFA0},   /* halfwidth Hangul filler */
    {0xFFF0, 0xFFFB},   /* unassigned ignorables, interlinear annotation */
    {0x110BD, 0x110BD},
    {0x110CD, 0x110CD},
    {0x13430, 0x1343F}, /* Egyptian hieroglyph format controls */
    {0x1BCA0, 0x1BCA3}, /* shorthand format controls */
    {0x1D173, 0x1D17A}, /* musical symbol format controls */
    {0xE0000, 0xE0FFF}, /* tags, variation selectors supplement */
};

bool ph_unicode_is_invisible(uint32_t cp)
{
    if ((cp >= 0xFDD0 && cp <= 0xFDEF) || ((cp & 0xFFFE) == 0xFFFE && cp <= 0x10FFFF))
        return true; /* noncharacters */
    size_t lo = 0, hi = sizeof invisible / sizeof invisible[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < invisible[mid].lo)
            hi = mid;
        else if (cp > invisible[mid].hi)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

bool ph_unicode_is_bidi_override(uint32_t cp)
{
    return (cp >= 0x202A && cp <= 0x202E) || /* LRE RLE PDF LRO RLO */
           (cp >= 0x2066 && cp <= 0x2069);   /* LRI RLI FSI PDI */
}
