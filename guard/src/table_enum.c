/*
 * table_enum.c - walking a verified table: lists, rules with provenance, and
 * each list's destinations (host + merged ports) for dump and diff.
 */
#include <string.h>

#include "table-int.h"

void ph_table_fill_rule(const ph_table *t, uint32_t i, ph_table_rule *rule)
{
    const uint8_t *r = t->rules + (size_t)i * PH_TAB_RULE_SIZE;
    const uint8_t *l = t->lists + (size_t)ph_tab_get32(r + 28) * PH_TAB_LIST_SIZE;
    rule->index = i;
    rule->list = ph_tab_str(t, l);
    rule->host = ph_tab_str(t, r);
    rule->host_len = ph_tab_get32(r + 4);
    rule->file = ph_tab_str(t, r + 8);
    rule->reason = ph_tab_get32(r + 20) == 0 ? NULL : ph_tab_str(t, r + 16);
    rule->line = ph_tab_get32(r + 24);
    rule->nports = ph_tab_get32(r + 36);
}

size_t ph_table_list_count(const ph_table *table)
{
    return table->nlists;
}

ph_status ph_table_list_at(const ph_table *table, size_t i, const char **name,
                           size_t *first_rule, size_t *rule_count)
{
    if (i >= table->nlists)
        return PH_E_NOT_FOUND;
    const uint8_t *l = table->lists + i * PH_TAB_LIST_SIZE;
    if (name)
        *name = ph_tab_str(table, l);
    if (first_rule)
        *first_rule = ph_tab_get32(l + 8);
    if (rule_count)
        *rule_count = ph_tab_get32(l + 12);
    return PH_OK;
}

ph_status ph_table_list_find(const ph_table *table, const char *name, size_t *index)
{
    for (size_t i = 0; i < table->nlists; i++) {
        if (strcmp(ph_tab_str(table, table->lists + i * PH_TAB_LIST_SIZE), name) == 0) {
            if (index)
                *index = i;
            return PH_OK;
        }
    }
    return PH_E_NOT_FOUND;
}

size_t ph_table_rule_count(const ph_table *table)
{
    return table->nrules;
}

ph_status ph_table_rule_at(const ph_table *table, size_t i, ph_table_rule *rule)
{
    if (i >= table->nrules || rule == NULL)
        return PH_E_NOT_FOUND;
    ph_table_fill_rule(table, (uint32_t)i, rule);
    return PH_OK;
}

ph_status ph_table_rule_port(const ph_table *table, size_t i, size_t k, uint16_t *lo,
                             uint16_t *hi)
{
    if (i >= table->nrules)
        return PH_E_NOT_FOUND;
    const uint8_t *r = table->rules + i * PH_TAB_RULE_SIZE;
    if (k >= ph_tab_get32(r + 36))
        return PH_E_NOT_FOUND;
    const uint8_t *p = table->ports + ((size_t)ph_tab_get32(r + 32) + k) * PH_TAB_PORT_SIZE;
    *lo = ph_tab_get16(p);
    *hi = ph_tab_get16(p + 2);
    return PH_OK;
}

/* Destinations are a list's entries; their ranges coalesced across rules. */
static const uint8_t *destination(const ph_table *t, size_t list, size_t d)
{
    if (list >= t->nlists)
        return NULL;
    const uint8_t *l = t->lists + list * PH_TAB_LIST_SIZE;
    if (d >= ph_tab_get32(l + 20))
        return NULL;
    return t->entries + ((size_t)ph_tab_get32(l + 16) + d) * PH_TAB_ENTRY_SIZE;
}

size_t ph_table_list_destination_count(const ph_table *table, size_t list)
{
    if (list >= table->nlists)
        return 0;
    return ph_tab_get32(table->lists + list * PH_TAB_LIST_SIZE + 20);
}

/* Coalesces the ranges of entry e (adjacent pieces of different rules join)
 * into lo/hi (when not NULL, up to cap) and returns how many there are. */
static size_t coalesce(const ph_table *t, const uint8_t *e, uint16_t *lo, uint16_t *hi,
                       size_t cap)
{
    const uint8_t *rg = t->ranges + (size_t)ph_tab_get32(e + 16) * PH_TAB_RANGE_SIZE;
    uint32_t n = ph_tab_get32(e + 20);
    size_t k = 0;
    for (uint32_t i = 0; i < n;) {
        uint16_t a = ph_tab_get16(rg + (size_t)i * PH_TAB_RANGE_SIZE);
        uint16_t b = ph_tab_get16(rg + (size_t)i * PH_TAB_RANGE_SIZE + 2);
        for (i++; i < n && ph_tab_get16(rg + (size_t)i * PH_TAB_RANGE_SIZE) == b + 1; i++)
            b = ph_tab_get16(rg + (size_t)i * PH_TAB_RANGE_SIZE + 2);
        if (lo != NULL && k < cap) {
            lo[k] = a;
            hi[k] = b;
        }
        k++;
    }
    return k;
}

ph_status ph_table_destination_at(const ph_table *table, size_t list, size_t d,
                                  char host_buf[static 256], size_t *nranges)
{
    const uint8_t *e = destination(table, list, d);
    if (e == NULL)
        return PH_E_NOT_FOUND;
    const char *h = ph_tab_str(table, e);
    size_t len = ph_tab_get32(e + 4);
    bool wild = ph_tab_get32(e + 12) == PH_TAB_KIND_WILDCARD;
    size_t at = 0;
    if (wild) {
        memcpy(host_buf, "*.", 2);
        at = 2;
    }
    memcpy(host_buf + at, h, len); /* len <= 253 (verified), so at + len + 1 <= 256 */
    host_buf[at + len] = '\0';
    if (nranges)
        *nranges = coalesce(table, e, NULL, NULL, 0);
    return PH_OK;
}

ph_status ph_table_destination_ranges(const ph_table *table, size_t list, size_t d,
                                      uint16_t *lo, uint16_t *hi, size_t cap, size_t *n)
{
    const uint8_t *e = destination(table, list, d);
    if (e == NULL)
        return PH_E_NOT_FOUND;
    *n = coalesce(table, e, lo, hi, cap);
    return *n <= cap ? PH_OK : PH_E_LIMIT;
}
