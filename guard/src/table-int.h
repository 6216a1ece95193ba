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
    const uint8_t *entries;
    uint32_t nentries;
    const uint8_t *ranges;
    uint32_t nranges;
    const uint8_t *buckets;
    uint32_t nbuckets;     /* a power of two > nentries */
    char id_hex[PH_TABLE_ID_HEX_LEN + 1];
};

/* Verifies image[0..len) completely and, on success, fills the section
 * pointers of t (t->bytes/len must already be set). PH_E_FORMAT otherwise. */
ph_status ph_table_verify(ph_table *t, ph_diag *diag);

/* A string reference (already verified): a NUL-terminated C string. */
static inline const char *ph_tab_str(const ph_table *t, const uint8_t *ref)
{
    return (const char *)t->strings + ph_tab_get32(ref);
}

/*
 * The canonical-host test of pinhole/host.h (ph_host_check), in one pass and
 * without inet_pton: with only [a-z0-9-.] allowed, the only IP spellings left
 * are a numeric (decimal or 0x-hex) last label, which this refuses. Used on
 * every lookup and on every host of a table being verified.
 */
static inline bool ph_tab_host_canonical(const char *h, size_t len)
{
    if (len == 0 || len > 253)
        return false;
    size_t labels = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || h[i] == '.') {
            size_t n = i - start;
            if (n == 0 || n > 63 || h[start] == '-' || h[i - 1] == '-')
                return false;
            labels++;
            start = i + 1;
            continue;
        }
        unsigned char c = (unsigned char)h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    if (labels < 2)
        return false;
    /* The last label must not be a number (127.1, 0x7f.1): IPv4 spellings. */
    size_t last = len;
    while (last > 0 && h[last - 1] != '.')
        last--;
    const char *l = h + last;
    size_t n = len - last, i = 0;
    if (n >= 2 && l[0] == '0' && l[1] == 'x') {
        for (i = 2; i < n; i++)
            if (!((l[i] >= '0' && l[i] <= '9') || (l[i] >= 'a' && l[i] <= 'f')))
                return true;
        return false;
    }
    for (i = 0; i < n; i++)
        if (!(l[i] >= '0' && l[i] <= '9'))
            return true;
    return false;
}

/* Fills *rule for rule i (< t->nrules). */
void ph_table_fill_rule(const ph_table *t, uint32_t i, ph_table_rule *rule);

#endif
