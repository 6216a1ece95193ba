/*
 * table_enum.c - walking a verified table: lists, rules with provenance, and
 * each list's destinations (host + merged ports) for dump and diff.
 */
#include <string.h>

#include "table-int.h"

void ph_table_fill_rule(const ph_table *t, uint32_t i, ph_table_rule *rule)
{
    const uint8_t *r = ph_tab_rule(t, i);
    const uint8_t *l = ph_tab_list(t, ph_tab_get32(r + PH_TAB_RULE_LIST));
    rule->index = i;
    rule->list = ph_tab_str(t, l + PH_TAB_LIST_NAME);
    rule->host = ph_tab_str(t, r + PH_TAB_RULE_HOST);
    rule->host_len = ph_tab_get32(r + PH_TAB_RULE_HOST + PH_TAB_STR_LEN);
    rule->file = ph_tab_str(t, r + PH_TAB_RULE_FILE);
    rule->reason = ph_tab_get32(r + PH_TAB_RULE_REASON + PH_TAB_STR_LEN) == 0
                       ? NULL
                       : ph_tab_str(t, r + PH_TAB_RULE_REASON);
    rule->line = ph_tab_get32(r + PH_TAB_RULE_LINE);
    rule->nports = ph_tab_get32(r + PH_TAB_RULE_PORT_COUNT);
    rule->protocol = (ph_protocol)r[PH_TAB_RULE_PROTOCOL];
}

const char *ph_protocol_name(ph_protocol p)
{
    switch (p) {
    case PH_PROTOCOL_DEFAULT: return "tls or http";
    case PH_PROTOCOL_TLS: return "tls";
    case PH_PROTOCOL_HTTP: return "http";
    case PH_PROTOCOL_TCP: return "tcp";
    }
    return "unknown";
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
    const uint8_t *l = ph_tab_list(table, i);
    if (name)
        *name = ph_tab_str(table, l + PH_TAB_LIST_NAME);
    if (first_rule)
        *first_rule = ph_tab_get32(l + PH_TAB_LIST_RULE_FIRST);
    if (rule_count)
        *rule_count = ph_tab_get32(l + PH_TAB_LIST_RULE_COUNT);
    return PH_OK;
}

ph_status ph_table_list_find(const ph_table *table, const char *name, size_t *index)
{
    for (size_t i = 0; i < table->nlists; i++) {
        if (strcmp(ph_tab_str(table, ph_tab_list(table, i) + PH_TAB_LIST_NAME), name) == 0) {
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
    const uint8_t *r = ph_tab_rule(table, i);
    if (k >= ph_tab_get32(r + PH_TAB_RULE_PORT_COUNT))
        return PH_E_NOT_FOUND;
    const uint8_t *p = ph_tab_port(table, (size_t)ph_tab_get32(r + PH_TAB_RULE_PORT_FIRST) + k);
    *lo = ph_tab_get16(p + PH_TAB_PORT_LO);
    *hi = ph_tab_get16(p + PH_TAB_PORT_HI);
    return PH_OK;
}

/* Destinations are a list's entries; their ranges coalesced across rules. */
static const uint8_t *destination(const ph_table *t, size_t list, size_t d)
{
    if (list >= t->nlists)
        return NULL;
    const uint8_t *l = ph_tab_list(t, list);
    if (d >= ph_tab_get32(l + PH_TAB_LIST_ENTRY_COUNT))
        return NULL;
    return ph_tab_destination(t, (size_t)ph_tab_get32(l + PH_TAB_LIST_ENTRY_FIRST) + d);
}

size_t ph_table_list_destination_count(const ph_table *table, size_t list)
{
    if (list >= table->nlists)
        return 0;
    return ph_tab_get32(ph_tab_list(table, list) + PH_TAB_LIST_ENTRY_COUNT);
}

/* Whether range record r's winning rule has protocol p (ANY_PROTOCOL: any). */
#define ANY_PROTOCOL (-1)
static bool range_is(const ph_table *t, const uint8_t *r, int p)
{
    return p == ANY_PROTOCOL ||
           ph_tab_rule(t, ph_tab_get32(r + PH_TAB_RANGE_RULE))[PH_TAB_RULE_PROTOCOL] == p;
}

/* Coalesces the ranges of entry e whose rule has protocol p (ANY_PROTOCOL:
 * all; adjacent pieces of different rules join) into lo/hi (when not NULL,
 * up to cap) and returns how many there are. */
static size_t coalesce(const ph_table *t, const uint8_t *e, int p, uint16_t *lo, uint16_t *hi,
                       size_t cap)
{
    const uint8_t *rg = ph_tab_range(t, ph_tab_get32(e + PH_TAB_ENTRY_RANGE_FIRST));
    uint32_t n = ph_tab_get16(e + PH_TAB_ENTRY_RANGE_COUNT);
    size_t k = 0;
    for (uint32_t i = 0; i < n;) {
        const uint8_t *r = rg + (size_t)i * PH_TAB_RANGE_SIZE;
        if (!range_is(t, r, p)) {
            i++;
            continue;
        }
        uint16_t a = ph_tab_get16(r + PH_TAB_RANGE_LO), b = ph_tab_get16(r + PH_TAB_RANGE_HI);
        for (i++, r += PH_TAB_RANGE_SIZE; i < n && ph_tab_get16(r + PH_TAB_RANGE_LO) == b + 1 &&
                                          range_is(t, r, p);
             i++, r += PH_TAB_RANGE_SIZE)
            b = ph_tab_get16(r + PH_TAB_RANGE_HI);
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
    const char *h = (const char *)table->strings + ph_tab_get32(e + PH_TAB_ENTRY_HOST_OFF);
    size_t len = e[PH_TAB_ENTRY_HOST_LEN];
    bool wild = e[PH_TAB_ENTRY_KIND] == PH_TAB_KIND_WILDCARD;
    size_t at = 0;
    if (wild) {
        memcpy(host_buf, "*.", 2);
        at = 2;
    }
    memcpy(host_buf + at, h, len); /* len <= 253 (verified), so at + len + 1 <= 256 */
    host_buf[at + len] = '\0';
    if (nranges)
        *nranges = coalesce(table, e, ANY_PROTOCOL, NULL, NULL, 0);
    return PH_OK;
}

ph_status ph_table_destination_ranges(const ph_table *table, size_t list, size_t d,
                                      uint16_t *lo, uint16_t *hi, size_t cap, size_t *n)
{
    const uint8_t *e = destination(table, list, d);
    if (e == NULL)
        return PH_E_NOT_FOUND;
    *n = coalesce(table, e, ANY_PROTOCOL, lo, hi, cap);
    return *n <= cap ? PH_OK : PH_E_LIMIT;
}

ph_status ph_table_destination_protocol_ranges(const ph_table *table, size_t list, size_t d,
                                               ph_protocol protocol, uint16_t *lo, uint16_t *hi,
                                               size_t cap, size_t *n)
{
    const uint8_t *e = destination(table, list, d);
    if (e == NULL)
        return PH_E_NOT_FOUND;
    *n = coalesce(table, e, (int)protocol, lo, hi, cap);
    return *n <= cap ? PH_OK : PH_E_LIMIT;
}
