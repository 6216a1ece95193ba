/* table-int.h - the in-memory view of a verified table, shared by the files
 * that open (table_open.c), verify (table_verify.c), search (table_lookup.c)
 * and enumerate (table_enum.c) it. Private to guard. */
#ifndef PINHOLE_TABLE_INT_H
#define PINHOLE_TABLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/table.h"
#include "table_format.h"

struct ph_table {
    uint8_t *map;          /* private anonymous mapping, read-only once verified */
    size_t map_len;        /* mapping length (page-rounded) */
    const uint8_t *bytes;  /* == map; the table image */
    size_t len;            /* image length */
    const uint8_t *strings;
    uint32_t strings_len;
    const uint8_t *lists;
    uint32_t nlists;
    const uint8_t *rules;
    uint32_t nrules;
    const uint8_t *ports;
    uint32_t nports;
    const uint8_t *entries; /* nslots records, at their hash slots */
    uint32_t nslots;
    const uint8_t *ranges;
    uint32_t nranges;
    const uint8_t *tags;    /* nslots tags */
    const uint8_t *order;   /* nentries slots, the destinations in order */
    uint32_t nentries;
    uint32_t nhomes;        /* ph_tab_home_count(nentries) */
    uint32_t checksum;     /* ph_tab_checksum of the image, computed as it was copied */
    char id_hex[PH_TABLE_ID_HEX_LEN + 1];
};

/* Verifies image[0..len) completely and, on success, fills the section
 * pointers of t (t->bytes/len and t->checksum, the checksum of the bytes as
 * copied in, must already be set). PH_E_FORMAT otherwise. */
ph_status ph_table_verify(ph_table *t, ph_diag *diag);

/* A string reference (already verified): a NUL-terminated C string. */
static inline const char *ph_tab_str(const ph_table *t, const uint8_t *ref)
{
    return (const char *)t->strings + ph_tab_get32(ref + PH_TAB_STR_OFF);
}

/* The record i of each section. */
static inline const uint8_t *ph_tab_list(const ph_table *t, size_t i)
{
    return t->lists + i * PH_TAB_LIST_SIZE;
}
static inline const uint8_t *ph_tab_rule(const ph_table *t, size_t i)
{
    return t->rules + i * PH_TAB_RULE_SIZE;
}
static inline const uint8_t *ph_tab_port(const ph_table *t, size_t i)
{
    return t->ports + i * PH_TAB_PORT_SIZE;
}
static inline const uint8_t *ph_tab_entry(const ph_table *t, size_t i)
{
    return t->entries + i * PH_TAB_ENTRY_SIZE;
}
static inline const uint8_t *ph_tab_range(const ph_table *t, size_t i)
{
    return t->ranges + i * PH_TAB_RANGE_SIZE;
}
/* The entry of destination i (< t->nentries). */
static inline const uint8_t *ph_tab_destination(const ph_table *t, size_t i)
{
    return ph_tab_entry(t, ph_tab_get32(t->order + i * PH_TAB_ORDER_SIZE));
}

/*
 * The canonical-host test of pinhole/host.h (ph_host_check), in one pass and
 * without inet_pton: with only [a-z0-9-.] allowed, the only IP spellings left
 * are a numeric (decimal or 0x-hex) last label, which this refuses. Used on
 * every lookup and on every host of a table being verified, so it goes by a
 * byte-class table rather than a chain of range tests.
 * Returns the number of labels (0: not canonical); *first_len receives the
 * length of the first label (the parent name starts after it and its dot).
 */
enum { PH_TAB_C_BAD = 0, PH_TAB_C_LDH = 1, PH_TAB_C_DOT = 2 };
extern const uint8_t ph_tab_host_class[256];

/* Whether the LDH label l[0..n) is a number (decimal or 0x-hex): a last
 * label like that spells an IPv4 address (127.1, 0x7f.1). */
static inline bool ph_tab_label_numeric(const char *l, size_t n)
{
    size_t i = 0;
    if (n >= 2 && l[0] == '0' && l[1] == 'x') {
        for (i = 2; i < n; i++)
            if (!((l[i] >= '0' && l[i] <= '9') || (l[i] >= 'a' && l[i] <= 'f')))
                break;
    } else {
        while (i < n && l[i] >= '0' && l[i] <= '9')
            i++;
    }
    return i == n;
}

static inline size_t ph_tab_host_scan(const char *h, size_t len, size_t *first_len)
{
    if (len == 0 || len > 253)
        return 0;
    size_t labels = 0, start = 0, first = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = ph_tab_host_class[(unsigned char)h[i]];
        if (c == PH_TAB_C_LDH)
            continue;
        if (c != PH_TAB_C_DOT)
            return 0;
        size_t n = i - start;
        if (n == 0 || n > 63 || h[start] == '-' || h[i - 1] == '-')
            return 0;
        if (labels++ == 0)
            first = n;
        start = i + 1;
    }
    size_t n = len - start;
    if (n == 0 || n > 63 || h[start] == '-' || h[len - 1] == '-' || ++labels < 2)
        return 0;
    if (ph_tab_label_numeric(h + start, n))
        return 0;
    *first_len = first;
    return labels;
}

static inline bool ph_tab_host_canonical(const char *h, size_t len)
{
    size_t first;
    return ph_tab_host_scan(h, len, &first) != 0;
}

/*
 * The same test for a name of at most PH_TAB_HOST_WIDE bytes that may be
 * read PH_TAB_HOST_WIDE bytes wide (the bytes past len are ignored): the
 * verifier's check of every host of a table, where the image lies beyond.
 * The byte classes become bit masks (bit i: byte i), so the label rules are
 * mask tests: a label starts at 0 or after a dot and ends before a dot or
 * at len - 1; no dot and no '-' may sit at a label's start or end (empty
 * label, '-' at an edge); with at most 64 bytes and one dot no label can
 * exceed 63 bytes. Tests compare it with the byte loop.
 */
#define PH_TAB_HOST_WIDE 64u
#if defined(__SSE2__)
#include <emmintrin.h>
/* The class masks of the 16 bytes at p: any allowed byte, dots, hyphens. */
static inline void ph_tab_host_chunk(const char *p, unsigned *ok, unsigned *dot, unsigned *hyph)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* Signed compares: bytes >= 0x80 are negative, in no range. */
    __m128i lower = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('a' - 1)),
                                  _mm_cmplt_epi8(v, _mm_set1_epi8('z' + 1)));
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                  _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    __m128i hy = _mm_cmpeq_epi8(v, _mm_set1_epi8('-'));
    __m128i dt = _mm_cmpeq_epi8(v, _mm_set1_epi8('.'));
    __m128i any = _mm_or_si128(_mm_or_si128(lower, digit), _mm_or_si128(hy, dt));
    *ok = (unsigned)_mm_movemask_epi8(any);
    *dot = (unsigned)_mm_movemask_epi8(dt);
    *hyph = (unsigned)_mm_movemask_epi8(hy);
}

/* The label rules on the masks of h[0..len), 3 <= len <= 64. */
static inline bool ph_tab_host_masks_ok(const char *h, size_t len, uint64_t ok, uint64_t dot,
                                        uint64_t hyph)
{
    uint64_t all = len == 64 ? ~(uint64_t)0 : ((uint64_t)1 << len) - 1;
    dot &= all;
    hyph &= all;
    if ((ok & all) != all || dot == 0)
        return false;
    uint64_t edges = 1u | ((dot << 1) & all) | ((uint64_t)1 << (len - 1)) | (dot >> 1);
    if ((dot | hyph) & edges)
        return false;
    size_t last = (size_t)(64 - __builtin_clzll(dot)); /* after the last dot */
    return !ph_tab_label_numeric(h + last, len - last);
}

static inline bool ph_tab_host_canonical_wide(const char *h, size_t len)
{
    if (len < 3 || len > PH_TAB_HOST_WIDE)
        return len > 0 && len <= PH_TAB_HOST_WIDE && ph_tab_host_canonical(h, len);
    uint64_t ok = 0, dot = 0, hyph = 0;
    /* Only the chunks holding h[0..len): the masks above len are ignored. */
    for (unsigned k = 0; 16 * k < len; k++) {
        unsigned o, d, y;
        ph_tab_host_chunk(h + 16 * k, &o, &d, &y);
        ok |= (uint64_t)o << (16 * k);
        dot |= (uint64_t)d << (16 * k);
        hyph |= (uint64_t)y << (16 * k);
    }
    return ph_tab_host_masks_ok(h, len, ok, dot, hyph);
}

/* ph_tab_host_canonical for a name that may not be read past its end (a
 * caller's): 16 to 64 bytes by masks, whole chunks and a last one that
 * overlaps the one before (its bytes classify the same), else the byte loop. */
static inline bool ph_tab_host_canonical_exact(const char *h, size_t len)
{
    if (len < 16 || len > PH_TAB_HOST_WIDE)
        return ph_tab_host_canonical(h, len);
    uint64_t ok = 0, dot = 0, hyph = 0;
    unsigned o, d, y;
    for (size_t k = 0; k + 16 <= len; k += 16) {
        ph_tab_host_chunk(h + k, &o, &d, &y);
        ok |= (uint64_t)o << k;
        dot |= (uint64_t)d << k;
        hyph |= (uint64_t)y << k;
    }
    ph_tab_host_chunk(h + len - 16, &o, &d, &y);
    ok |= (uint64_t)o << (len - 16);
    dot |= (uint64_t)d << (len - 16);
    hyph |= (uint64_t)y << (len - 16);
    return ph_tab_host_masks_ok(h, len, ok, dot, hyph);
}
#else
static inline bool ph_tab_host_canonical_wide(const char *h, size_t len)
{
    return len <= PH_TAB_HOST_WIDE && ph_tab_host_canonical(h, len);
}
static inline bool ph_tab_host_canonical_exact(const char *h, size_t len)
{
    return ph_tab_host_canonical(h, len);
}
#endif

/* Bit k set: slot s + k has tag (tag 0: the empty slots), for the
 * PH_TAB_SLOT_CHUNK tags from slot s on. */
#if defined(__SSE2__)
static inline unsigned ph_tab_tags_match(const ph_table *t, uint32_t s, uint8_t tag)
{
    __m128i tags = _mm_loadu_si128((const __m128i *)(const void *)(t->tags + s));
    return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(tags, _mm_set1_epi8((char)tag)));
}
#else
static inline unsigned ph_tab_tags_match(const ph_table *t, uint32_t s, uint8_t tag)
{
    unsigned m = 0;
    for (unsigned k = 0; k < PH_TAB_SLOT_CHUNK; k++)
        m |= (unsigned)(t->tags[s + k] == tag) << k;
    return m;
}
#endif

/* Fills *rule for rule i (< t->nrules). */
void ph_table_fill_rule(const ph_table *t, uint32_t i, ph_table_rule *rule);

#endif
