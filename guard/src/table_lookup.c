/*
 * table_lookup.c - the decision against a verified table: list by binary
 * search over the (few) sorted list names, host by hash probe (exact name,
 * then the parent name in the wildcard namespace) into slots that carry the
 * entry's first port range, the other ranges by binary search.
 * Allocation-free; reads only verified bytes.
 */
#include <string.h>

#include "table-int.h"
#include "wildcard_dns-int.h"

#define NO_INDEX UINT32_MAX

/* Byte classes for ph_tab_host_scan: 1 for [a-z0-9-], 2 for '.', 0 else. */
const uint8_t ph_tab_host_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* Binary search over the sorted list names. Names are NUL-terminated without
 * inner NUL (verified), so strcmp orders them exactly as the table does
 * (bytewise, a prefix first) without measuring the caller's name. */
static uint32_t find_list(const ph_table *t, const char *name)
{
    uint32_t lo = 0, hi = t->nlists;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ph_tab_str(t, t->lists + (size_t)mid * PH_TAB_LIST_SIZE), name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NO_INDEX;
}

/* The slot of (list, kind, host), or NULL. A slot whose tag, length, kind
 * and list (its entry inside the list's entry range) all match is confirmed
 * by comparing the full name: the hash is public, so a colliding name must
 * never pass for an allowed one. Before that compare waits for the string,
 * the rule of the entry's first range is fetched too: a single-range hit then
 * costs the slot, and the string and the rule in parallel. Terminates:
 * verification guaranteed an empty slot. */
static inline const uint8_t *probe_hashed(const ph_table *t, uint64_t h,
                                          const uint8_t *list_rec, uint32_t kind,
                                          const char *host, size_t len)
{
    uint32_t mask = t->nslots - 1, tag = (uint32_t)(h >> 32);
    uint32_t efirst = ph_tab_get32(list_rec + 16), ecount = ph_tab_get32(list_rec + 20);
    for (uint32_t b = (uint32_t)h & mask;; b = (b + 1) & mask) {
        const uint8_t *s = t->slots + (size_t)b * PH_TAB_SLOT_SIZE;
        uint32_t v = ph_tab_get32(s + PH_TAB_SLOT_ENTRY);
        if (v == 0)
            return NULL;
        if (ph_tab_get32(s + PH_TAB_SLOT_TAG) != tag ||
            ph_tab_get16(s + PH_TAB_SLOT_HOST_LEN) != len ||
            s[PH_TAB_SLOT_KIND] != kind || v - 1 - efirst >= ecount)
            continue;
        /* A 40-byte rule record may straddle two cache lines: fetch both. */
        const uint8_t *rule =
            t->rules + (size_t)ph_tab_get32(s + PH_TAB_SLOT_RULE) * PH_TAB_RULE_SIZE;
        __builtin_prefetch(rule);
        __builtin_prefetch(rule + PH_TAB_RULE_SIZE - 1);
        if (memcmp(t->strings + ph_tab_get32(s + PH_TAB_SLOT_HOST_OFF), host, len) == 0)
            return s;
    }
}

static const uint8_t *list_record(const ph_table *t, uint32_t li)
{
    return t->lists + (size_t)li * PH_TAB_LIST_SIZE;
}

static const uint8_t *probe(const ph_table *t, uint32_t list, uint32_t kind, const char *host,
                            size_t len)
{
    return probe_hashed(t, ph_tab_hash(list, kind, host, len), list_record(t, list), kind, host,
                        len);
}

static void prefetch_slot(const ph_table *t, uint64_t h)
{
    size_t b = (uint32_t)h & (t->nslots - 1);
    __builtin_prefetch(t->slots + b * PH_TAB_SLOT_SIZE);
}

/* The ENTRIES record behind a slot. */
static const uint8_t *slot_entry(const ph_table *t, const uint8_t *slot)
{
    return t->entries +
           (size_t)(ph_tab_get32(slot + PH_TAB_SLOT_ENTRY) - 1) * PH_TAB_ENTRY_SIZE;
}

/* Index (within entry e) of the last range whose lo <= port, or -1. */
static long range_floor(const ph_table *t, const uint8_t *e, uint16_t port)
{
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

static const uint8_t *entry_range(const ph_table *t, const uint8_t *e, long k)
{
    return t->ranges + ((size_t)ph_tab_get32(e + 16) + (size_t)k) * PH_TAB_RANGE_SIZE;
}

/* The rule allowing port on the slot's entry, or NO_INDEX. The first range
 * is in the slot; only a port past it reads the entry and its other ranges. */
static uint32_t match_port(const ph_table *t, const uint8_t *slot, uint16_t port)
{
    if (port < ph_tab_get16(slot + PH_TAB_SLOT_LO))
        return NO_INDEX;
    if (port <= ph_tab_get16(slot + PH_TAB_SLOT_HI))
        return ph_tab_get32(slot + PH_TAB_SLOT_RULE);
    const uint8_t *e = slot_entry(t, slot);
    if (ph_tab_get32(e + 20) == 1)
        return NO_INDEX;
    const uint8_t *rg = entry_range(t, e, range_floor(t, e, port));
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

/* A label of a canonical name: 1..63 bytes of [a-z0-9-], no '-' at an edge. */
static bool label_ok(const char *l, size_t n)
{
    if (n == 0 || n > 63 || l[0] == '-' || l[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (ph_tab_host_class[(unsigned char)l[i]] != PH_TAB_C_LDH)
            return false;
    return true;
}

static ph_status refuse_host(ph_table_result *r)
{
    deny(r, PH_REASON_PARSE_ERROR);
    return PH_E_INVAL;
}

/*
 * The lookup proper; exact and wild receive the slots found (or NULL).
 *
 * A non-canonical host must be refused, never matched, but the full check
 * need not come first: a name equal to a verified entry is canonical, and so
 * is a verified parent behind one canonical label. So the probes go first
 * (their memory reads are what costs) and only a name that matched nothing
 * pays for the full check; a wildcard match checks the first label.
 */
static ph_status decide(const ph_table *t, const char *list, const char *host, size_t len,
                        uint16_t port, ph_table_result *r, uint32_t *li_out,
                        const uint8_t **exact, const uint8_t **wild, uint32_t *rule_out)
{
    *rule_out = NO_INDEX;
    *li_out = NO_INDEX;
    *exact = *wild = NULL;
    if (len == 0 || len > PH_TAB_MAX_NAME)
        return refuse_host(r);
    uint32_t li = find_list(t, list);
    if (li == NO_INDEX) {
        if (!ph_tab_host_canonical(host, len))
            return refuse_host(r);
        deny(r, PH_REASON_UNKNOWN_LIST);
        return PH_OK;
    }
    *li_out = li;
    /* Both home slots are fetched at once: a lookup that needs the parent
     * probe (wildcard hits, misses) then waits for memory once, not twice.
     * The parent is the name after its first label, when it has a dot of
     * its own (a wildcard base has two or more labels). */
    const uint8_t *lrec = list_record(t, li);
    uint64_t he = ph_tab_hash(li, PH_TAB_KIND_EXACT, host, len), hw = 0;
    prefetch_slot(t, he);
    const char *dot = memchr(host, '.', len);
    size_t first_len = dot != NULL ? (size_t)(dot - host) : len;
    const char *parent = dot != NULL ? dot + 1 : host;
    size_t plen = dot != NULL ? len - first_len - 1 : 0;
    bool has_parent = plen > 0 && memchr(parent, '.', plen) != NULL;
    if (has_parent) {
        hw = ph_tab_hash(li, PH_TAB_KIND_WILDCARD, parent, plen);
        prefetch_slot(t, hw);
    }
    uint32_t rule = NO_INDEX;
    *exact = probe_hashed(t, he, lrec, PH_TAB_KIND_EXACT, host, len);
    if (*exact != NULL)
        rule = match_port(t, *exact, port);
    if (rule == NO_INDEX && has_parent) {
        *wild = probe_hashed(t, hw, lrec, PH_TAB_KIND_WILDCARD, parent, plen);
        if (*wild != NULL && *exact == NULL && !label_ok(host, first_len)) {
            *wild = NULL;
            return refuse_host(r);
        }
        if (*wild != NULL)
            rule = match_port(t, *wild, port);
    }
    if (rule == NO_INDEX) {
        bool named = *exact != NULL || *wild != NULL;
        if (!named && !ph_tab_host_canonical(host, len))
            return refuse_host(r);
        deny(r, named ? PH_REASON_PORT_NOT_ALLOWED : PH_REASON_NOT_ALLOWLISTED);
        return PH_OK;
    }
    *rule_out = rule;
    /* A rule naming a wildcard-DNS service allows every address a name can
     * spell: refused here too, so a table compiled before policyc refused
     * the name (or by anything else) cannot allow it. Only names a rule
     * allows pay for the check. */
    if (ph_wildcard_dns_find(host, len) != NULL) {
        deny(r, PH_REASON_WILDCARD_DNS);
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
    uint32_t li, rule;
    const uint8_t *exact, *wild;
    return decide(table, list, host, hostlen, port, result, &li, &exact, &wild, &rule);
}

/* The rule of the range of the slot's entry closest to port ("wrong port"). */
static uint32_t nearest_rule(const ph_table *t, const uint8_t *slot, uint16_t port)
{
    const uint8_t *e = slot_entry(t, slot);
    long n = (long)ph_tab_get32(e + 20), k = range_floor(t, e, port);
    if (k < 0)
        k = 0;
    else if (k + 1 < n) {
        const uint8_t *below = entry_range(t, e, k), *above = entry_range(t, e, k + 1);
        if (ph_tab_get16(above) - port < port - ph_tab_get16(below + 2))
            k++;
    }
    return ph_tab_get32(entry_range(t, e, k) + 4);
}

static void set_near(const ph_table *t, ph_table_explanation *out, ph_table_near near,
                     const uint8_t *slot, uint16_t port)
{
    out->near = near;
    out->has_near_rule = true;
    ph_table_fill_rule(t, nearest_rule(t, slot, port), &out->near_rule);
}

ph_status ph_table_explain(const ph_table *table, const char *list, const char *host,
                           size_t hostlen, uint16_t port, ph_table_explanation *out)
{
    if (table == NULL || list == NULL || host == NULL || out == NULL)
        return PH_E_INVAL;
    memset(out, 0, sizeof *out);
    uint32_t li, rule;
    const uint8_t *exact, *wild;
    ph_status st =
        decide(table, list, host, hostlen, port, &out->result, &li, &exact, &wild, &rule);
    if (st != PH_OK || out->result.allowed)
        return st;
    if (out->result.reason == PH_REASON_WILDCARD_DNS) {
        out->near = PH_TABLE_NEAR_WILDCARD_DNS;
        out->has_near_rule = true;
        ph_table_fill_rule(table, rule, &out->near_rule);
        return PH_OK;
    }
    if (li == NO_INDEX) {
        out->near = PH_TABLE_NEAR_UNKNOWN_LIST;
        return PH_OK;
    }
    if (exact != NULL || wild != NULL) {
        set_near(table, out, PH_TABLE_NEAR_WRONG_PORT, exact != NULL ? exact : wild, port);
        return PH_OK;
    }
    const uint8_t *apex = probe(table, li, PH_TAB_KIND_WILDCARD, host, hostlen);
    if (apex != NULL) {
        set_near(table, out, PH_TABLE_NEAR_APEX, apex, port);
        return PH_OK;
    }
    /* Ancestors above the parent: "*.example.com" for "a.b.example.com". */
    const char *p = host;
    size_t plen = hostlen;
    if (parent_of(p, plen, &p, &plen)) {
        while (parent_of(p, plen, &p, &plen)) {
            const uint8_t *e = probe(table, li, PH_TAB_KIND_WILDCARD, p, plen);
            if (e != NULL) {
                set_near(table, out, PH_TABLE_NEAR_TOO_DEEP, e, port);
                return PH_OK;
            }
        }
    }
    out->near = PH_TABLE_NEAR_NONE;
    return PH_OK;
}
