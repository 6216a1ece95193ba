/*
 * table_lookup.c - the decision against a verified table: list by binary
 * search over the (few) sorted list names, host by hash probe (exact name,
 * then the parent name in the wildcard namespace), port by binary search over
 * the entry's sorted ranges. Allocation-free; reads only verified bytes.
 */
#include <string.h>

#include "table-int.h"

#define NO_INDEX UINT32_MAX

static uint32_t find_list(const ph_table *t, const char *name)
{
    size_t nl = strlen(name);
    uint32_t lo = 0, hi = t->nlists;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        const uint8_t *rec = t->lists + (size_t)mid * PH_TAB_LIST_SIZE;
        uint32_t ml = ph_tab_get32(rec + 4);
        int c = memcmp(ph_tab_str(t, rec), name, ml < nl ? ml : nl);
        if (c == 0)
            c = (ml > nl) - (ml < nl);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NO_INDEX;
}

/* The entry for (list, kind, host), or NO_INDEX. Terminates: verification
 * guaranteed an empty bucket. */
static uint32_t probe_hashed(const ph_table *t, uint64_t h, uint32_t list, uint32_t kind,
                             const char *host, size_t len)
{
    uint32_t mask = t->nbuckets - 1, tag = (uint32_t)(h >> 32);
    for (uint32_t b = (uint32_t)h & mask;; b = (b + 1) & mask) {
        const uint8_t *rec = t->buckets + (size_t)b * PH_TAB_BUCKET_SIZE;
        uint32_t v = ph_tab_get32(rec);
        if (v == 0)
            return NO_INDEX;
        if (ph_tab_get32(rec + 4) != tag)
            continue;
        const uint8_t *e = t->entries + (size_t)(v - 1) * PH_TAB_ENTRY_SIZE;
        if (ph_tab_get32(e + 4) == len && ph_tab_get32(e + 8) == list &&
            ph_tab_get32(e + 12) == kind && memcmp(ph_tab_str(t, e), host, len) == 0)
            return v - 1;
    }
}

static uint32_t probe(const ph_table *t, uint32_t list, uint32_t kind, const char *host,
                      size_t len)
{
    return probe_hashed(t, ph_tab_hash(list, kind, host, len), list, kind, host, len);
}

static void prefetch_bucket(const ph_table *t, uint64_t h)
{
    size_t b = (uint32_t)h & (t->nbuckets - 1);
    __builtin_prefetch(t->buckets + b * PH_TAB_BUCKET_SIZE);
}

/* Index (within the entry) of the last range whose lo <= port, or -1. */
static long range_floor(const ph_table *t, uint32_t entry, uint16_t port)
{
    const uint8_t *e = t->entries + (size_t)entry * PH_TAB_ENTRY_SIZE;
    const uint8_t *rg = t->ranges + (size_t)ph_tab_get32(e + 16) * PH_TAB_RANGE_SIZE;
    uint32_t lo = 0, hi = ph_tab_get32(e + 20);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ph_tab_get16(rg + (size_t)mid * PH_TAB_RANGE_SIZE) <= port)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

static const uint8_t *entry_range(const ph_table *t, uint32_t entry, long k)
{
    const uint8_t *e = t->entries + (size_t)entry * PH_TAB_ENTRY_SIZE;
    return t->ranges + ((size_t)ph_tab_get32(e + 16) + (size_t)k) * PH_TAB_RANGE_SIZE;
}

/* The rule allowing port on entry, or NO_INDEX. */
static uint32_t match_port(const ph_table *t, uint32_t entry, uint16_t port)
{
    long k = range_floor(t, entry, port);
    if (k < 0)
        return NO_INDEX;
    const uint8_t *rg = entry_range(t, entry, k);
    return port <= ph_tab_get16(rg + 2) ? ph_tab_get32(rg + 4) : NO_INDEX;
}

/* The parent of a name with at least three labels (a wildcard base needs two). */
static bool parent_of(const char *host, size_t len, const char **p, size_t *plen)
{
    const char *dot = memchr(host, '.', len);
    if (dot == NULL)
        return false;
    size_t rest = len - (size_t)(dot + 1 - host);
    if (memchr(dot + 1, '.', rest) == NULL)
        return false;
    *p = dot + 1;
    *plen = rest;
    return true;
}

static void deny(ph_table_result *r, ph_reason reason)
{
    r->allowed = false;
    r->reason = reason;
    r->has_rule = false;
    memset(&r->rule, 0, sizeof r->rule);
}

/* The lookup proper; exact and wild receive the entries found (or NO_INDEX). */
static ph_status decide(const ph_table *t, const char *list, const char *host, size_t len,
                        uint16_t port, ph_table_result *r, uint32_t *li_out, uint32_t *exact,
                        uint32_t *wild)
{
    *li_out = *exact = *wild = NO_INDEX;
    if (!ph_tab_host_canonical(host, len)) {
        deny(r, PH_REASON_PARSE_ERROR);
        return PH_E_INVAL;
    }
    uint32_t li = find_list(t, list);
    *li_out = li;
    if (li == NO_INDEX) {
        deny(r, PH_REASON_UNKNOWN_LIST);
        return PH_OK;
    }
    /* Both home buckets are fetched at once: a lookup that needs the parent
     * probe (wildcard hits, misses) then waits for memory once, not twice. */
    uint32_t rule = NO_INDEX;
    uint64_t he = ph_tab_hash(li, PH_TAB_KIND_EXACT, host, len), hw = 0;
    prefetch_bucket(t, he);
    const char *parent;
    size_t plen;
    bool has_parent = parent_of(host, len, &parent, &plen);
    if (has_parent) {
        hw = ph_tab_hash(li, PH_TAB_KIND_WILDCARD, parent, plen);
        prefetch_bucket(t, hw);
    }
    *exact = probe_hashed(t, he, li, PH_TAB_KIND_EXACT, host, len);
    if (*exact != NO_INDEX)
        rule = match_port(t, *exact, port);
    if (rule == NO_INDEX && has_parent) {
        *wild = probe_hashed(t, hw, li, PH_TAB_KIND_WILDCARD, parent, plen);
        if (*wild != NO_INDEX)
            rule = match_port(t, *wild, port);
    }
    if (rule == NO_INDEX) {
        bool named = *exact != NO_INDEX || *wild != NO_INDEX;
        deny(r, named ? PH_REASON_PORT_NOT_ALLOWED : PH_REASON_NOT_ALLOWLISTED);
        return PH_OK;
    }
    r->allowed = true;
    r->reason = PH_REASON_ALLOWED;
    r->has_rule = true;
    ph_table_fill_rule(t, rule, &r->rule);
    return PH_OK;
}

ph_status ph_table_lookup(const ph_table *table, const char *list, const char *host,
                          size_t hostlen, uint16_t port, ph_table_result *result)
{
    if (table == NULL || list == NULL || host == NULL || result == NULL)
        return PH_E_INVAL;
    uint32_t li, exact, wild;
    return decide(table, list, host, hostlen, port, result, &li, &exact, &wild);
}

/* The rule of the range of entry closest to port (for "wrong port"). */
static uint32_t nearest_rule(const ph_table *t, uint32_t entry, uint16_t port)
{
    const uint8_t *e = t->entries + (size_t)entry * PH_TAB_ENTRY_SIZE;
    long n = (long)ph_tab_get32(e + 20), k = range_floor(t, entry, port);
    if (k < 0)
        k = 0;
    else if (k + 1 < n) {
        const uint8_t *below = entry_range(t, entry, k), *above = entry_range(t, entry, k + 1);
        if (ph_tab_get16(above) - port < port - ph_tab_get16(below + 2))
            k++;
    }
    return ph_tab_get32(entry_range(t, entry, k) + 4);
}

static void set_near(const ph_table *t, ph_table_explanation *out, ph_table_near near,
                     uint32_t entry, uint16_t port)
{
    out->near = near;
    out->has_near_rule = true;
    ph_table_fill_rule(t, nearest_rule(t, entry, port), &out->near_rule);
}

ph_status ph_table_explain(const ph_table *table, const char *list, const char *host,
                           size_t hostlen, uint16_t port, ph_table_explanation *out)
{
    if (table == NULL || list == NULL || host == NULL || out == NULL)
        return PH_E_INVAL;
    memset(out, 0, sizeof *out);
    uint32_t li, exact, wild;
    ph_status st = decide(table, list, host, hostlen, port, &out->result, &li, &exact, &wild);
    if (st != PH_OK || out->result.allowed)
        return st;
    if (li == NO_INDEX) {
        out->near = PH_TABLE_NEAR_UNKNOWN_LIST;
        return PH_OK;
    }
    if (exact != NO_INDEX || wild != NO_INDEX) {
        set_near(table, out, PH_TABLE_NEAR_WRONG_PORT, exact != NO_INDEX ? exact : wild, port);
        return PH_OK;
    }
    uint32_t apex = probe(table, li, PH_TAB_KIND_WILDCARD, host, hostlen);
    if (apex != NO_INDEX) {
        set_near(table, out, PH_TABLE_NEAR_APEX, apex, port);
        return PH_OK;
    }
    /* Ancestors above the parent: "*.example.com" for "a.b.example.com". */
    const char *p = host;
    size_t plen = hostlen;
    if (parent_of(p, plen, &p, &plen)) {
        while (parent_of(p, plen, &p, &plen)) {
            uint32_t e = probe(table, li, PH_TAB_KIND_WILDCARD, p, plen);
            if (e != NO_INDEX) {
                set_near(table, out, PH_TABLE_NEAR_TOO_DEEP, e, port);
                return PH_OK;
            }
        }
    }
    out->near = PH_TABLE_NEAR_NONE;
    return PH_OK;
}
