/*
 * table_lookup.c - the decision against a verified table: list by binary
 * search over the (few) sorted list names, host by hash probe (exact name,
 * then the parent name in the wildcard namespace) over entries stored at
 * their hash slots beside a tag per slot, entries that carry their first
 * port range, the other ranges by binary search.
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
        int c = strcmp(ph_tab_str(t, ph_tab_list(t, mid) + PH_TAB_LIST_NAME), name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NO_INDEX;
}

static inline uint64_t load64(const void *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}
static inline uint32_t load32(const void *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* a[0..n) == b[0..n) for n <= PH_TAB_ENTRY_PREFIX_LEN, inline, reading
 * neither past its end (the caller's name has no slack): whole words, the
 * last one overlapping the one before. */
static inline bool short_equal(const uint8_t *a, const char *b, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            if (load64(a + i) != load64(b + i))
                return false;
        return load64(a + n - 8) == load64(b + n - 8);
    }
    if (n >= 4)
        return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    for (size_t i = 0; i < n; i++)
        if (a[i] != (uint8_t)b[i])
            return false;
    return true;
}

/* Whether the entry's host is host[0..len): the inline prefix, then (for a
 * long name only) the rest from STRINGS. */
static inline bool entry_host_is(const ph_table *t, const uint8_t *e, const char *host, size_t len)
{
    if (len <= PH_TAB_ENTRY_PREFIX_LEN)
        return short_equal(e + PH_TAB_ENTRY_PREFIX, host, len);
    return memcmp(e + PH_TAB_ENTRY_PREFIX, host, PH_TAB_ENTRY_PREFIX_LEN) == 0 &&
           memcmp(t->strings + ph_tab_get32(e + PH_TAB_ENTRY_HOST_OFF) + PH_TAB_ENTRY_PREFIX_LEN,
                  host + PH_TAB_ENTRY_PREFIX_LEN, len - PH_TAB_ENTRY_PREFIX_LEN) == 0;
}

/* The entry of (list, kind, host), or NULL. A slot whose tag matches holds
 * an entry, confirmed by its length, kind, list and full name: the hash is
 * public, so a colliding name must never pass for an allowed one. The
 * entry lies between its home slot and the first empty slot after it
 * (verified), and some empty slot ends every cluster before the end of
 * TAGS, so reading PH_TAB_SLOT_CHUNK tags at a time stays inside it. */
static inline const uint8_t *probe_hashed(const ph_table *t, uint64_t h, uint32_t list,
                                          uint32_t kind, const char *host, size_t len)
{
    uint8_t tag = ph_tab_tag(h);
    for (uint32_t s = ph_tab_home(h, t->nhomes);; s += PH_TAB_SLOT_CHUNK) {
        unsigned empty = ph_tab_tags_match(t, s, 0);
        /* The slots before the first empty one (all of them: none empty). */
        unsigned m = ph_tab_tags_match(t, s, tag) & ((empty & (0u - empty)) - 1u);
        for (; m != 0; m &= m - 1) {
            const uint8_t *e = ph_tab_entry(t, s + (unsigned)__builtin_ctz(m));
            if (e[PH_TAB_ENTRY_HOST_LEN] == len && e[PH_TAB_ENTRY_KIND] == kind &&
                ph_tab_get16(e + PH_TAB_ENTRY_LIST) == list && entry_host_is(t, e, host, len))
                return e;
        }
        if (empty != 0)
            return NULL;
    }
}

static const uint8_t *probe(const ph_table *t, uint32_t list, uint32_t kind, const char *host,
                            size_t len)
{
    return probe_hashed(t, ph_tab_hash(list, kind, host, len), list, kind, host, len);
}

/* The home slot's tags and entry: both addresses follow from the hash, so
 * the two reads (and both probes' reads) wait for memory together. */
static void prefetch_home(const ph_table *t, uint64_t h)
{
    uint32_t s = ph_tab_home(h, t->nhomes);
    __builtin_prefetch(t->tags + s);
    __builtin_prefetch(ph_tab_entry(t, s));
}

/* The i-th range of entry e. */
static const uint8_t *entry_range(const ph_table *t, const uint8_t *e, long k)
{
    return ph_tab_range(t, (size_t)ph_tab_get32(e + PH_TAB_ENTRY_RANGE_FIRST) + (size_t)k);
}

/* Index (within entry e) of the last range whose lo <= port, or -1. */
static long range_floor(const ph_table *t, const uint8_t *e, uint16_t port)
{
    uint32_t lo = 0, hi = ph_tab_get16(e + PH_TAB_ENTRY_RANGE_COUNT);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ph_tab_get16(entry_range(t, e, mid) + PH_TAB_RANGE_LO) <= port)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

/* The rule allowing port on entry e, or NO_INDEX. The first range is in the
 * entry record; only a port past it reads the other ranges. */
static uint32_t match_port(const ph_table *t, const uint8_t *e, uint16_t port)
{
    if (port < ph_tab_get16(e + PH_TAB_ENTRY_FIRST_LO))
        return NO_INDEX;
    if (port <= ph_tab_get16(e + PH_TAB_ENTRY_FIRST_HI))
        return ph_tab_get32(e + PH_TAB_ENTRY_FIRST_RULE);
    if (ph_tab_get16(e + PH_TAB_ENTRY_RANGE_COUNT) == 1)
        return NO_INDEX;
    const uint8_t *rg = entry_range(t, e, range_floor(t, e, port));
    return port <= ph_tab_get16(rg + PH_TAB_RANGE_HI) ? ph_tab_get32(rg + PH_TAB_RANGE_RULE)
                                                     : NO_INDEX;
}

/* The result's rule for a hit on entry e's first range, from the copies in
 * the entry itself (verified equal to the rule's own fields), so the hit
 * reads no RULES record: its host is the entry's host string ("*." and the
 * base for a wildcard), the list the entry's. */
static void fill_rule_from_entry(const ph_table *t, const uint8_t *e, ph_table_rule *rule)
{
    size_t skip = e[PH_TAB_ENTRY_KIND] == PH_TAB_KIND_WILDCARD ? 2 : 0;
    uint32_t reason = ph_tab_get32(e + PH_TAB_ENTRY_RULE_REASON);
    rule->index = ph_tab_get32(e + PH_TAB_ENTRY_FIRST_RULE);
    rule->list = ph_tab_str(t, ph_tab_list(t, ph_tab_get16(e + PH_TAB_ENTRY_LIST)) + PH_TAB_LIST_NAME);
    rule->host = (const char *)t->strings + ph_tab_get32(e + PH_TAB_ENTRY_HOST_OFF) - skip;
    rule->host_len = e[PH_TAB_ENTRY_HOST_LEN] + skip;
    rule->file = (const char *)t->strings + ph_tab_get32(e + PH_TAB_ENTRY_RULE_FILE);
    rule->reason = reason == 0 ? NULL : (const char *)t->strings + reason;
    rule->line = ph_tab_get32(e + PH_TAB_ENTRY_RULE_LINE);
    rule->nports = ph_tab_get16(e + PH_TAB_ENTRY_RULE_NPORTS);
    rule->protocol = (ph_protocol)e[PH_TAB_ENTRY_PROTOCOL];
}

/* The offsets of the first two dots of host[0..len) (len: none), for a name
 * that may not be read past its end: 16-byte chunks inside it, the last one
 * overlapping the one before, as bit masks over its first 64 bytes; a name
 * whose first two dots are not there (rare) is searched by memchr. */
static inline void two_dots(const char *host, size_t len, size_t *first, size_t *second)
{
    uint64_t m = 0;
#if defined(__SSE2__)
    if (len >= 16) {
        const __m128i dot = _mm_set1_epi8('.');
        size_t k = 0;
        for (; k + 16 <= len && k < 64; k += 16)
            m |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
                     _mm_loadu_si128((const __m128i *)(const void *)(host + k)), dot))
                 << k;
        if (k < len && k < 64)
            m |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(
                     _mm_loadu_si128((const __m128i *)(const void *)(host + len - 16)), dot))
                 << (len - 16);
    } else
#endif
    {
        for (size_t i = 0; i < len && i < 64; i++)
            m |= (uint64_t)(host[i] == '.') << i;
    }
    uint64_t rest = m & (m - 1);
    if (rest != 0) {
        *first = (size_t)__builtin_ctzll(m);
        *second = (size_t)__builtin_ctzll(rest);
        return;
    }
    /* Fewer than two dots in the first 64 bytes (or the name is shorter). */
    const char *d = m != 0 ? host + __builtin_ctzll(m) : memchr(host, '.', len);
    *first = d != NULL ? (size_t)(d - host) : len;
    const char *e = d != NULL ? memchr(d + 1, '.', len - *first - 1) : NULL;
    *second = e != NULL ? (size_t)(e - host) : len;
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
 * The lookup proper; exact and wild receive the entries found (or NULL).
 *
 * A non-canonical host must be refused, never matched, but the full check
 * need not come first: a name equal to a verified entry is canonical, and so
 * is a verified parent behind one canonical label. So the probes go first
 * (their memory reads are what costs) and only a name that matched nothing
 * pays for the full check; a wildcard match checks the first label.
 */
static inline __attribute__((always_inline)) ph_status
decide(const ph_table *t, const char *list, const char *host, size_t len,
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
        if (!ph_tab_host_canonical_exact(host, len))
            return refuse_host(r);
        deny(r, PH_REASON_UNKNOWN_LIST);
        return PH_OK;
    }
    *li_out = li;
    /* Both home slots are fetched at once: a lookup that needs the parent
     * probe (wildcard hits, misses) then waits for memory once, not twice.
     * The parent is the name after its first label, when it has a dot of
     * its own (a wildcard base has two or more labels). */
    uint64_t he = ph_tab_hash(li, PH_TAB_KIND_EXACT, host, len), hw = 0;
    prefetch_home(t, he);
    size_t first_len, second;
    two_dots(host, len, &first_len, &second);
    const char *parent = first_len < len ? host + first_len + 1 : host;
    size_t plen = first_len < len ? len - first_len - 1 : 0;
    bool has_parent = second < len;
    if (has_parent) {
        hw = ph_tab_hash(li, PH_TAB_KIND_WILDCARD, parent, plen);
        prefetch_home(t, hw);
    }
    uint32_t rule = NO_INDEX;
    const uint8_t *hit = NULL;
    *exact = probe_hashed(t, he, li, PH_TAB_KIND_EXACT, host, len);
    if (*exact != NULL)
        rule = match_port(t, *exact, port), hit = *exact;
    if (rule == NO_INDEX && has_parent) {
        *wild = probe_hashed(t, hw, li, PH_TAB_KIND_WILDCARD, parent, plen);
        if (*wild != NULL && *exact == NULL && !label_ok(host, first_len)) {
            *wild = NULL;
            return refuse_host(r);
        }
        if (*wild != NULL)
            rule = match_port(t, *wild, port), hit = *wild;
    }
    if (rule == NO_INDEX) {
        bool named = *exact != NULL || *wild != NULL;
        if (!named && !ph_tab_host_canonical_exact(host, len))
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
    if (rule == ph_tab_get32(hit + PH_TAB_ENTRY_FIRST_RULE))
        fill_rule_from_entry(t, hit, &r->rule);
    else
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

/* The rule of the range of entry e closest to port ("wrong port"). */
static uint32_t nearest_rule(const ph_table *t, const uint8_t *e, uint16_t port)
{
    long n = (long)ph_tab_get16(e + PH_TAB_ENTRY_RANGE_COUNT), k = range_floor(t, e, port);
    if (k < 0)
        k = 0;
    else if (k + 1 < n) {
        const uint8_t *below = entry_range(t, e, k), *above = entry_range(t, e, k + 1);
        if (ph_tab_get16(above + PH_TAB_RANGE_LO) - port < port - ph_tab_get16(below + PH_TAB_RANGE_HI))
            k++;
    }
    return ph_tab_get32(entry_range(t, e, k) + PH_TAB_RANGE_RULE);
}

static void set_near(const ph_table *t, ph_table_explanation *out, ph_table_near near,
                     const uint8_t *entry, uint16_t port)
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
