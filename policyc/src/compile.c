/*
 * compile.c - the table writer: flattens, sorts, merges and serializes a
 * pc_policy into the format of guard/src/table_format.h (see compile.h for
 * the determinism contract, docs/table-format.md for the bytes).
 */
#include "compile.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "compiler-int.h"
#include "load.h"
#include "pinhole/diag.h"
#include "pinhole/host.h"

/* One rule of a flattened list. */
typedef struct frule {
    const char *host; /* as written */
    const char *base; /* host without "*." */
    uint64_t base_key; /* base's first 8 bytes, big-endian, zero-padded: sorts as base does */
    uint32_t host_len, base_len;
    bool wild;
    const char *reason; /* NULL: none */
    uint32_t reason_len;
    const char *file;
    uint32_t file_len, line;
    uint32_t port_first, nports; /* into compiler.ports, normalized */
    uint8_t protocol;            /* PH_TAB_PROTO_* */
    uint32_t host_ref, file_ref, reason_ref; /* string offsets */
} frule;

typedef struct range {
    uint16_t lo, hi;
    uint32_t rule;
} range;

typedef struct entry {
    uint32_t host_ref, host_len, list, kind, range_first, range_count;
} entry;

typedef struct strpool {
    uint8_t *buf;
    size_t len, cap;
    uint32_t *slots; /* pairs (offset, length + 1); length 0 marks an empty slot */
    size_t nslots, used;
} strpool;

typedef struct compiler {
    const pc_policy *policy;
    ph_diag *diag;
    size_t *order; /* policy list indexes sorted by name */
    uint32_t nlists;
    uint32_t *list_rule_first, *list_rule_count, *list_entry_first, *list_entry_count;
    uint32_t *list_name_ref;
    frule *rules;
    size_t nrules, rules_cap;
    pc_port_range *ports;
    size_t nports, ports_cap;
    entry *entries;
    size_t nentries, entries_cap;
    range *ranges;
    size_t nranges, ranges_cap;
    uint8_t *slot_tag;     /* each slot's tag (0: empty) */
    uint32_t *entry_slot;  /* each entry's slot */
    size_t nslots;
    strpool strings;
} compiler;

/* ---------------------------------------------------------------- helpers */

/* Grows *arr (elements of size) to hold at least want; caps at max elements. */
static ph_status grow(compiler *c, void **arr, size_t *cap, size_t want, size_t size, size_t max)
{
    if (want <= *cap)
        return PH_OK;
    if (want > max)
        return ph_diag_set(c->diag, PH_E_LIMIT, 0, "policy too large for a table");
    size_t ncap = *cap ? *cap : 64;
    while (ncap < want)
        ncap = ncap > max / 2 ? max : ncap * 2;
    void *p = realloc(*arr, ncap * size);
    if (p == NULL)
        return ph_diag_set(c->diag, PH_E_NOMEM, 0, "out of memory");
    *arr = p;
    *cap = ncap;
    return PH_OK;
}

#define MAX_RECORDS ((size_t)UINT32_MAX - 1)

static int cmp_bytes(const char *a, uint32_t al, const char *b, uint32_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

static uint64_t str_hash(const char *s, size_t n)
{
    return ph_tab_hash(0, 0, s, n);
}

/* Appends s[0..n) and its NUL to the pool; *off receives its offset. */
static ph_status append_string(compiler *c, const char *s, uint32_t n, uint32_t *off)
{
    strpool *p = &c->strings;
    if (p->len + n + 1 > UINT32_MAX - 1)
        return ph_diag_set(c->diag, PH_E_LIMIT, 0, "policy strings too large for a table");
    ph_status st = grow(c, (void **)&p->buf, &p->cap, p->len + n + 1, 1, UINT32_MAX);
    if (st != PH_OK)
        return st;
    *off = (uint32_t)p->len;
    memcpy(p->buf + p->len, s, n);
    p->buf[p->len + n] = 0;
    p->len += n + 1;
    return PH_OK;
}

/* Interns s[0..n) (no NUL inside) and returns its offset in the pool. */
static ph_status intern(compiler *c, const char *s, uint32_t n, uint32_t *off)
{
    strpool *p = &c->strings;
    if (p->used * 2 >= p->nslots) {
        size_t ns = p->nslots ? p->nslots * 2 : 1024;
        uint32_t *slots = calloc(ns * 2, sizeof *slots);
        if (slots == NULL)
            return ph_diag_set(c->diag, PH_E_NOMEM, 0, "out of memory");
        for (size_t i = 0; i < p->nslots; i++) {
            if (p->slots[2 * i + 1] == 0)
                continue;
            uint32_t o = p->slots[2 * i], l = p->slots[2 * i + 1] - 1;
            size_t j = str_hash((const char *)p->buf + o, l) & (ns - 1);
            while (slots[2 * j + 1] != 0)
                j = (j + 1) & (ns - 1);
            slots[2 * j] = o;
            slots[2 * j + 1] = l + 1;
        }
        free(p->slots);
        p->slots = slots;
        p->nslots = ns;
    }
    size_t mask = p->nslots - 1, j = str_hash(s, n) & mask;
    for (; p->slots[2 * j + 1] != 0; j = (j + 1) & mask) {
        uint32_t o = p->slots[2 * j], l = p->slots[2 * j + 1] - 1;
        if (l == n && memcmp(p->buf + o, s, n) == 0) {
            *off = o;
            return PH_OK;
        }
    }
    ph_status st = append_string(c, s, n, off);
    if (st != PH_OK)
        return st;
    p->slots[2 * j] = *off;
    p->slots[2 * j + 1] = n + 1;
    p->used++;
    return PH_OK;
}

/* ------------------------------------------------------- flatten and sort */

static int cmp_port_range(const void *a, const void *b)
{
    const pc_port_range *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->hi > y->hi) - (x->hi < y->hi);
}

/* Appends r's ports sorted and merged (overlapping or adjacent ranges join). */
static ph_status add_ports(compiler *c, const pc_rule *r, frule *f)
{
    if (r->nports == 0 || r->ports == NULL)
        return ph_diag_set(c->diag, PH_E_INVAL, 0, "rule %s has no ports", r->host);
    ph_status st = grow(c, (void **)&c->ports, &c->ports_cap, c->nports + r->nports,
                        sizeof *c->ports, MAX_RECORDS);
    if (st != PH_OK)
        return st;
    pc_port_range *p = c->ports + c->nports;
    memcpy(p, r->ports, r->nports * sizeof *p);
    for (size_t i = 0; i < r->nports; i++)
        if (p[i].lo == 0 || p[i].lo > p[i].hi)
            return ph_diag_set(c->diag, PH_E_INVAL, 0, "rule %s has a bad port range", r->host);
    if (r->nports > 1)
        qsort(p, r->nports, sizeof *p, cmp_port_range);
    size_t n = 1;
    for (size_t i = 1; i < r->nports; i++) {
        if ((uint32_t)p[i].lo <= (uint32_t)p[n - 1].hi + 1) {
            if (p[i].hi > p[n - 1].hi)
                p[n - 1].hi = p[i].hi;
        } else {
            p[n++] = p[i];
        }
    }
    f->port_first = (uint32_t)c->nports;
    f->nports = (uint32_t)n;
    c->nports += n;
    return PH_OK;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static ph_status add_rule(compiler *c, const pc_rule *r)
{
    ph_status st = grow(c, (void **)&c->rules, &c->rules_cap, c->nrules + 1, sizeof *c->rules,
                        MAX_RECORDS);
    if (st != PH_OK)
        return st;
    frule *f = &c->rules[c->nrules];
    memset(f, 0, sizeof *f);
    size_t hl = r->host ? strlen(r->host) : 0;
    bool wild = hl > 2 && r->host[0] == '*' && r->host[1] == '.';
    const char *base = wild ? r->host + 2 : r->host;
    if (hl == 0 || wild != r->wildcard ||
        ph_host_check(base, hl - (wild ? 2 : 0), NULL) != PH_HOST_OK)
        return ph_diag_set(c->diag, PH_E_INVAL, 0, "rule host '%s' is not canonical",
                           r->host ? r->host : "");
    f->host = r->host;
    f->host_len = (uint32_t)hl;
    f->base = base;
    f->base_len = (uint32_t)(hl - (wild ? 2 : 0));
    for (uint32_t i = 0; i < 8; i++)
        f->base_key = f->base_key << 8 | (i < f->base_len ? (unsigned char)base[i] : 0u);
    f->wild = wild;
    _Static_assert(PH_PROTOCOL_TLS == PH_TAB_PROTO_TLS && PH_PROTOCOL_HTTP == PH_TAB_PROTO_HTTP &&
                       PH_PROTOCOL_TCP == PH_TAB_PROTO_TCP &&
                       PH_PROTOCOL_DEFAULT == PH_TAB_PROTO_DEFAULT,
                   "the table stores ph_protocol values");
    if ((unsigned)r->protocol > PH_TAB_PROTO_MAX || (wild && r->protocol == PH_PROTOCOL_TCP))
        return ph_diag_set(c->diag, PH_E_INVAL, 0, "rule %s: bad protocol", r->host);
    f->protocol = (uint8_t)r->protocol;
    if (r->reason != NULL && r->reason[0] != '\0') {
        size_t n = strlen(r->reason);
        if (n > PH_TAB_MAX_TEXT)
            return ph_diag_set(c->diag, PH_E_LIMIT, 0, "reason of %s is too long", r->host);
        f->reason = r->reason;
        f->reason_len = (uint32_t)n;
    }
    /* Provenance: the rule's own source, else the policy file's base name. */
    const char *file = r->source_file ? r->source_file
                                      : base_name(c->policy->file ? c->policy->file : "-");
    size_t fl = strlen(file);
    if (fl == 0 || fl > PH_TAB_MAX_TEXT)
        return ph_diag_set(c->diag, PH_E_INVAL, 0, "bad source file name for %s", r->host);
    f->file = file;
    f->file_len = (uint32_t)fl;
    f->line = r->source_file ? r->source_line : r->pos.line;
    if (f->line == 0)
        f->line = r->pos.line ? r->pos.line : 1;
    st = add_ports(c, r, f);
    if (st == PH_OK)
        c->nrules++;
    return st;
}

/* The canonical rule order; table_verify.c checks the same order. */
static int cmp_frule(const void *pa, const void *pb, void *ctx)
{
    const frule *a = pa, *b = pb;
    const compiler *cc = ctx;
    /* Names hold no NUL, so the zero-padded prefixes order as the names do;
     * only equal prefixes need the bytes. */
    if (a->base_key != b->base_key)
        return a->base_key < b->base_key ? -1 : 1;
    int x = cmp_bytes(a->base, a->base_len, b->base, b->base_len);
    if (x != 0)
        return x;
    if (a->wild != b->wild)
        return a->wild ? 1 : -1;
    if (a->protocol != b->protocol)
        return ph_tab_proto_rank(a->protocol) < ph_tab_proto_rank(b->protocol) ? -1 : 1;
    const pc_port_range *p = cc->ports + a->port_first, *q = cc->ports + b->port_first;
    for (uint32_t i = 0; i < a->nports && i < b->nports; i++) {
        if (p[i].lo != q[i].lo)
            return p[i].lo < q[i].lo ? -1 : 1;
        if (p[i].hi != q[i].hi)
            return p[i].hi < q[i].hi ? -1 : 1;
    }
    if (a->nports != b->nports)
        return a->nports < b->nports ? -1 : 1;
    if ((a->reason == NULL) != (b->reason == NULL))
        return a->reason == NULL ? -1 : 1;
    if (a->reason != NULL && (x = cmp_bytes(a->reason, a->reason_len, b->reason, b->reason_len)))
        return x;
    if ((x = cmp_bytes(a->file, a->file_len, b->file, b->file_len)) != 0)
        return x;
    return (a->line > b->line) - (a->line < b->line);
}

static int cmp_list_order(const void *pa, const void *pb, void *ctx)
{
    const pc_list *l = ((const compiler *)ctx)->policy->lists;
    return strcmp(l[*(const size_t *)pa].name, l[*(const size_t *)pb].name);
}

static ph_status flatten(compiler *c)
{
    const pc_policy *pol = c->policy;
    if (pol->nlists == 0 || pol->nlists > PC_MAX_LISTS)
        return ph_diag_set(c->diag, PH_E_INVAL, 0, "a policy needs 1..%u lists", PC_MAX_LISTS);
    c->nlists = (uint32_t)pol->nlists;
    c->order = calloc(pol->nlists, sizeof *c->order);
    uint32_t **arrays[] = {&c->list_rule_first, &c->list_rule_count, &c->list_entry_first,
                           &c->list_entry_count, &c->list_name_ref};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        *arrays[i] = calloc(pol->nlists, sizeof(uint32_t));
    if (c->order == NULL || c->list_name_ref == NULL || c->list_rule_first == NULL ||
        c->list_rule_count == NULL || c->list_entry_first == NULL || c->list_entry_count == NULL)
        return ph_diag_set(c->diag, PH_E_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < pol->nlists; i++) {
        const char *name = pol->lists[i].name;
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > PH_TAB_MAX_NAME)
            return ph_diag_set(c->diag, PH_E_INVAL, 0, "bad list name");
        c->order[i] = i;
    }
    qsort_r(c->order, pol->nlists, sizeof *c->order, cmp_list_order, c);
    for (size_t k = 0; k < pol->nlists; k++) {
        size_t li = c->order[k];
        if (k > 0 && strcmp(pol->lists[c->order[k - 1]].name, pol->lists[li].name) == 0)
            return ph_diag_set(c->diag, PH_E_INVAL, 0, "list '%s' defined twice",
                               pol->lists[li].name);
        const pc_rule **eff = NULL;
        size_t neff = 0;
        ph_status st = pc_policy_effective_rules(pol, li, &eff, &neff);
        if (st != PH_OK)
            return ph_diag_set(c->diag, st, 0, "cannot flatten list '%s'", pol->lists[li].name);
        size_t first = c->nrules;
        for (size_t i = 0; i < neff && st == PH_OK; i++)
            st = add_rule(c, eff[i]);
        free(eff);
        if (st != PH_OK)
            return st;
        frule *fr = c->rules + first;
        size_t n = c->nrules - first;
        if (n == 0)
            return ph_diag_set(c->diag, PH_E_INVAL, 0, "list '%s' has no rules",
                               pol->lists[li].name);
        qsort_r(fr, n, sizeof *fr, cmp_frule, c);
        size_t kept = 1; /* drop exact duplicates (same rule reached twice) */
        for (size_t i = 1; i < n; i++)
            if (cmp_frule(&fr[kept - 1], &fr[i], c) != 0)
                fr[kept++] = fr[i];
        c->nrules = first + kept;
        c->list_rule_first[k] = (uint32_t)first;
        c->list_rule_count[k] = (uint32_t)kept;
    }
    return PH_OK;
}

/* -------------------------------------------------------- entries, ranges */

typedef struct heap_item {
    uint32_t rule;
    uint32_t hi;
} heap_item;

static void heap_push(heap_item *h, size_t *n, heap_item it)
{
    size_t i = (*n)++;
    while (i > 0 && h[(i - 1) / 2].rule > it.rule) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = it;
}

static void heap_pop(heap_item *h, size_t *n)
{
    heap_item last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < *n && h[l].rule < last.rule)
            m = l;
        if (l + 1 < *n && h[l + 1].rule < (m == i ? last.rule : h[l].rule))
            m = l + 1;
        if (m == i)
            break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0)
        h[i] = last;
}

static int cmp_by_lo(const void *pa, const void *pb)
{
    const range *a = pa, *b = pb;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return (a->rule > b->rule) - (a->rule < b->rule);
}

static ph_status emit_range(compiler *c, uint32_t lo, uint32_t hi, uint32_t rule, size_t first)
{
    if (c->nranges > first) {
        range *prev = &c->ranges[c->nranges - 1];
        if (prev->rule == rule && (uint32_t)prev->hi + 1 == lo) {
            prev->hi = (uint16_t)hi;
            return PH_OK;
        }
    }
    ph_status st = grow(c, (void **)&c->ranges, &c->ranges_cap, c->nranges + 1,
                        sizeof *c->ranges, MAX_RECORDS);
    if (st == PH_OK)
        c->ranges[c->nranges++] = (range){(uint16_t)lo, (uint16_t)hi, rule};
    return st;
}

/* The ranges of one entry (rules [rf, rf+rn)): every port any rule allows,
 * attributed to the lowest rule id allowing it, adjacent pieces of the same
 * rule joined. A sweep over ranges sorted by start with a min-heap of the
 * active rules: O(n log n) however the ranges overlap. */
static ph_status entry_ranges(compiler *c, size_t rf, size_t rn, range **iv, size_t *ivcap,
                              heap_item **heap, size_t *heapcap)
{
    size_t n = 0;
    for (size_t r = rf; r < rf + rn; r++)
        n += c->rules[r].nports;
    ph_status st = grow(c, (void **)iv, ivcap, n, sizeof **iv, MAX_RECORDS);
    if (st == PH_OK)
        st = grow(c, (void **)heap, heapcap, n, sizeof **heap, MAX_RECORDS);
    if (st != PH_OK)
        return st;
    size_t k = 0;
    for (size_t r = rf; r < rf + rn; r++)
        for (uint32_t i = 0; i < c->rules[r].nports; i++) {
            const pc_port_range *p = &c->ports[c->rules[r].port_first + i];
            (*iv)[k++] = (range){p->lo, p->hi, (uint32_t)r};
        }
    if (rn > 1)
        qsort(*iv, n, sizeof **iv, cmp_by_lo);
    size_t first = c->nranges, hn = 0, i = 0;
    uint32_t pos = 0;
    while (i < n || hn > 0) {
        if (hn == 0 && pos < (*iv)[i].lo)
            pos = (*iv)[i].lo;
        while (i < n && (*iv)[i].lo <= pos) {
            heap_push(*heap, &hn, (heap_item){(*iv)[i].rule, (*iv)[i].hi});
            i++;
        }
        while (hn > 0 && (*heap)[0].hi < pos)
            heap_pop(*heap, &hn);
        if (hn == 0)
            continue;
        uint32_t end = (*heap)[0].hi;
        if (i < n && (uint32_t)(*iv)[i].lo - 1 < end)
            end = (uint32_t)(*iv)[i].lo - 1;
        st = emit_range(c, pos, end, (*heap)[0].rule, first);
        if (st != PH_OK)
            return st;
        pos = end + 1;
    }
    return PH_OK;
}

static ph_status build_entries(compiler *c)
{
    range *iv = NULL;
    heap_item *heap = NULL;
    size_t ivcap = 0, heapcap = 0;
    ph_status st = PH_OK;
    for (uint32_t k = 0; k < c->nlists && st == PH_OK; k++) {
        size_t rf = c->list_rule_first[k], rend = rf + c->list_rule_count[k];
        c->list_entry_first[k] = (uint32_t)c->nentries;
        for (size_t r = rf; r < rend && st == PH_OK;) {
            const frule *f = &c->rules[r];
            size_t e = r + 1;
            while (e < rend && c->rules[e].wild == f->wild &&
                   cmp_bytes(c->rules[e].base, c->rules[e].base_len, f->base, f->base_len) == 0)
                e++;
            st = grow(c, (void **)&c->entries, &c->entries_cap, c->nentries + 1,
                      sizeof *c->entries, MAX_RECORDS);
            if (st != PH_OK)
                break;
            entry *en = &c->entries[c->nentries++];
            en->host_ref = f->host_ref + (f->wild ? 2 : 0);
            en->host_len = f->base_len;
            en->list = k;
            en->kind = f->wild ? PH_TAB_KIND_WILDCARD : PH_TAB_KIND_EXACT;
            en->range_first = (uint32_t)c->nranges;
            st = entry_ranges(c, r, e - r, &iv, &ivcap, &heap, &heapcap);
            en = &c->entries[c->nentries - 1];
            en->range_count = (uint32_t)(c->nranges - en->range_first);
            r = e;
        }
        c->list_entry_count[k] = (uint32_t)(c->nentries - c->list_entry_first[k]);
    }
    free(iv);
    free(heap);
    return st;
}

static ph_status build_strings(compiler *c)
{
    uint32_t zero;
    ph_status st = intern(c, "", 0, &zero); /* offset 0: the empty string */
    for (uint32_t k = 0; k < c->nlists && st == PH_OK; k++) {
        const char *name = c->policy->lists[c->order[k]].name;
        st = intern(c, name, (uint32_t)strlen(name), &c->list_name_ref[k]);
    }
    for (size_t i = 0; i < c->nrules && st == PH_OK; i++) {
        frule *f = &c->rules[i];
        /* Hosts are nearly all distinct, and rules of one host are adjacent
         * in canonical order: reuse the previous rule's copy when it is the
         * same name, else append without a hash lookup. Files and reasons
         * repeat a lot and go through the interning table. */
        const frule *prev = i > 0 ? &c->rules[i - 1] : NULL;
        if (prev != NULL && prev->host_len == f->host_len &&
            memcmp(prev->host, f->host, f->host_len) == 0)
            f->host_ref = prev->host_ref;
        else
            st = append_string(c, f->host, f->host_len, &f->host_ref);
        /* Most rules come from the file of the rule before them. */
        if (st == PH_OK && prev != NULL && prev->file_len == f->file_len &&
            memcmp(prev->file, f->file, f->file_len) == 0)
            f->file_ref = prev->file_ref;
        else if (st == PH_OK)
            st = intern(c, f->file, f->file_len, &f->file_ref);
        if (st == PH_OK && f->reason != NULL)
            st = intern(c, f->reason, f->reason_len, &f->reason_ref);
    }
    return st;
}

/* The hash index: ph_tab_home_count home slots, entries placed in entry
 * order, each at the first free slot from its home slot on (linear probing:
 * the layout is deterministic), then PH_TAB_SLOT_CHUNK empty slots after
 * the last occupied one or the last home slot, whichever is later. */
static ph_status build_slots(compiler *c)
{
    uint64_t homes = ph_tab_home_count(c->nentries);
    /* At most homes + nentries + PH_TAB_SLOT_CHUNK slots: each entry is at
     * most nentries - 1 slots past the last home slot. */
    uint64_t cap = homes + c->nentries + PH_TAB_SLOT_CHUNK;
    if (cap > MAX_RECORDS)
        return ph_diag_set(c->diag, PH_E_LIMIT, 0, "too many hosts for a table");
    c->slot_tag = calloc((size_t)cap, sizeof *c->slot_tag);
    c->entry_slot = calloc(c->nentries + 1, sizeof *c->entry_slot);
    if (c->slot_tag == NULL || c->entry_slot == NULL)
        return ph_diag_set(c->diag, PH_E_NOMEM, 0, "out of memory");
    size_t used = (size_t)homes;
    for (size_t e = 0; e < c->nentries; e++) {
        const entry *en = &c->entries[e];
        uint64_t h = ph_tab_hash(en->list, en->kind, (const char *)c->strings.buf + en->host_ref,
                                 en->host_len);
        size_t s = ph_tab_home(h, (uint32_t)homes);
        while (c->slot_tag[s] != 0)
            s++;
        c->slot_tag[s] = ph_tab_tag(h);
        c->entry_slot[e] = (uint32_t)s;
        if (s + 1 > used)
            used = s + 1;
    }
    c->nslots = used + PH_TAB_SLOT_CHUNK;
    return PH_OK;
}

/* ------------------------------------------------------------- policy id */

/* The policy id hashes what the policy allows and says, not where it was
 * written: for each list (sorted) its name and its rules (canonical order,
 * rules differing only in provenance counted once) as host, ports, reason
 * and protocol, every field length-prefixed. Provenance and layout are excluded so
 * moving a rule to another line keeps the id. */
typedef struct idbuf {
    EVP_MD_CTX *ctx;
    uint8_t buf[8192];
    size_t len;
    bool ok;
} idbuf;

static void id_put(idbuf *b, const void *data, size_t n)
{
    if (b->len + n > sizeof b->buf) {
        b->ok = b->ok && EVP_DigestUpdate(b->ctx, b->buf, b->len) == 1;
        b->len = 0;
        if (n > sizeof b->buf) {
            b->ok = b->ok && EVP_DigestUpdate(b->ctx, data, n) == 1;
            return;
        }
    }
    memcpy(b->buf + b->len, data, n);
    b->len += n;
}

static void id_u32(idbuf *b, uint32_t v)
{
    uint8_t x[4];
    ph_tab_put32(x, v);
    id_put(b, x, 4);
}

static void id_str(idbuf *b, const char *s, uint32_t n)
{
    id_u32(b, n);
    id_put(b, s, n);
}

static bool same_semantics(const compiler *c, const frule *a, const frule *b)
{
    return a->wild == b->wild && a->nports == b->nports && a->protocol == b->protocol &&
           cmp_bytes(a->base, a->base_len, b->base, b->base_len) == 0 &&
           memcmp(c->ports + a->port_first, c->ports + b->port_first,
                  a->nports * sizeof *c->ports) == 0 &&
           (a->reason == NULL) == (b->reason == NULL) &&
           (a->reason == NULL ||
            cmp_bytes(a->reason, a->reason_len, b->reason, b->reason_len) == 0);
}

static ph_status policy_id(const compiler *c, uint8_t id[static 32])
{
    idbuf b = {.ctx = EVP_MD_CTX_new(), .ok = true};
    b.ok = b.ctx != NULL && EVP_DigestInit_ex(b.ctx, EVP_sha256(), NULL) == 1;
    id_put(&b, "pinhole-policy-v1", 17);
    id_u32(&b, c->nlists);
    for (uint32_t k = 0; k < c->nlists; k++) {
        const char *name = c->policy->lists[c->order[k]].name;
        id_str(&b, name, (uint32_t)strlen(name));
        size_t rf = c->list_rule_first[k], rn = c->list_rule_count[k];
        for (size_t r = rf; r < rf + rn; r++) {
            const frule *f = &c->rules[r];
            if (r > rf && same_semantics(c, &c->rules[r - 1], f))
                continue;
            id_put(&b, "R", 1);
            id_str(&b, f->host, f->host_len);
            id_u32(&b, f->nports);
            for (uint32_t i = 0; i < f->nports; i++) {
                id_u32(&b, c->ports[f->port_first + i].lo);
                id_u32(&b, c->ports[f->port_first + i].hi);
            }
            id_str(&b, f->reason ? f->reason : "", f->reason ? f->reason_len : 0);
            /* Only a protocol other than the default is hashed: a policy
             * without the key keeps the id it had before the key existed. */
            if (f->protocol != PH_TAB_PROTO_DEFAULT) {
                id_put(&b, "P", 1);
                id_u32(&b, f->protocol);
            }
        }
        id_put(&b, "E", 1);
    }
    unsigned mdlen = 0;
    b.ok = b.ok && EVP_DigestUpdate(b.ctx, b.buf, b.len) == 1 &&
           EVP_DigestFinal_ex(b.ctx, id, &mdlen) == 1 && mdlen == 32;
    EVP_MD_CTX_free(b.ctx);
    return b.ok ? PH_OK : ph_diag_set(c->diag, PH_E_INTERNAL, 0, "SHA-256 failed");
}

/* ------------------------------------------------------------- serialize */

static void put_ref(uint8_t *p, uint32_t off, uint32_t len)
{
    ph_tab_put32(p, off);
    ph_tab_put32(p + 4, len);
}

static ph_status serialize(compiler *c, uint8_t **out, size_t *outlen)
{
    uint64_t counts[PH_TAB_SECTION_COUNT + 1] = {
        0,           c->strings.len, c->nlists, c->nrules, c->nports,
        c->nslots,   c->nranges,     c->nslots, c->nentries};
    uint64_t offs[PH_TAB_SECTION_COUNT + 1] = {0};
    uint64_t end = PH_TAB_FIRST_SECTION;
    for (uint32_t id = 1; id <= PH_TAB_SECTION_COUNT; id++) {
        if (counts[id] > UINT32_MAX)
            return ph_diag_set(c->diag, PH_E_LIMIT, 0, "policy too large for a table");
        offs[id] = (end + PH_TAB_ALIGN - 1) & ~(uint64_t)(PH_TAB_ALIGN - 1);
        end = offs[id] + counts[id] * ph_tab_record_size(id);
    }
    if (end > PH_TAB_MAX_FILE_SIZE)
        return ph_diag_set(c->diag, PH_E_LIMIT, 0, "table would be %llu bytes, over the limit",
                           (unsigned long long)end);
    uint8_t *b = calloc(1, (size_t)end); /* zeroed: padding is zero */
    if (b == NULL)
        return ph_diag_set(c->diag, PH_E_NOMEM, 0, "out of memory");
    memcpy(b + PH_TAB_OFF_MAGIC, PH_TAB_MAGIC, PH_TAB_MAGIC_LEN);
    ph_tab_put32(b + PH_TAB_OFF_VERSION, PH_TAB_VERSION);
    ph_tab_put32(b + PH_TAB_OFF_HEADER_SIZE, PH_TAB_HEADER_SIZE);
    ph_tab_put64(b + PH_TAB_OFF_FILE_SIZE, end);
    ph_tab_put32(b + PH_TAB_OFF_SECTION_COUNT, PH_TAB_SECTION_COUNT);
    for (uint32_t id = 1; id <= PH_TAB_SECTION_COUNT; id++) {
        uint8_t *d = b + PH_TAB_HEADER_SIZE + (id - 1) * PH_TAB_DIRENT_SIZE;
        ph_tab_put32(d + PH_TAB_DIRENT_ID, id);
        ph_tab_put32(d + PH_TAB_DIRENT_COUNT, (uint32_t)counts[id]);
        ph_tab_put64(d + PH_TAB_DIRENT_OFFSET, offs[id]);
        ph_tab_put64(d + PH_TAB_DIRENT_BYTES, counts[id] * ph_tab_record_size(id));
    }
    memcpy(b + offs[PH_TAB_SEC_STRINGS], c->strings.buf, c->strings.len);
    for (uint32_t k = 0; k < c->nlists; k++) {
        uint8_t *p = b + offs[PH_TAB_SEC_LISTS] + (size_t)k * PH_TAB_LIST_SIZE;
        put_ref(p + PH_TAB_LIST_NAME, c->list_name_ref[k],
                (uint32_t)strlen(c->policy->lists[c->order[k]].name));
        ph_tab_put32(p + PH_TAB_LIST_RULE_FIRST, c->list_rule_first[k]);
        ph_tab_put32(p + PH_TAB_LIST_RULE_COUNT, c->list_rule_count[k]);
        ph_tab_put32(p + PH_TAB_LIST_ENTRY_FIRST, c->list_entry_first[k]);
        ph_tab_put32(p + PH_TAB_LIST_ENTRY_COUNT, c->list_entry_count[k]);
        for (size_t r = c->list_rule_first[k]; r < c->list_rule_first[k] + c->list_rule_count[k];
             r++) {
            const frule *f = &c->rules[r];
            uint8_t *q = b + offs[PH_TAB_SEC_RULES] + r * PH_TAB_RULE_SIZE;
            put_ref(q + PH_TAB_RULE_HOST, f->host_ref, f->host_len);
            put_ref(q + PH_TAB_RULE_FILE, f->file_ref, f->file_len);
            put_ref(q + PH_TAB_RULE_REASON, f->reason ? f->reason_ref : 0,
                    f->reason ? f->reason_len : 0);
            ph_tab_put32(q + PH_TAB_RULE_LINE, f->line);
            ph_tab_put32(q + PH_TAB_RULE_LIST, k);
            ph_tab_put32(q + PH_TAB_RULE_PORT_COUNT, f->nports); /* port_first: below */
            q[PH_TAB_RULE_PROTOCOL] = f->protocol;
        }
    }
    /* Rules were compacted after dedup, so their ports are re-laid in rule
     * order: a rule's port_first must be the running total. */
    uint32_t next = 0;
    for (size_t r = 0; r < c->nrules; r++) {
        const frule *f = &c->rules[r];
        uint8_t *q = b + offs[PH_TAB_SEC_RULES] + r * PH_TAB_RULE_SIZE;
        ph_tab_put32(q + PH_TAB_RULE_PORT_FIRST, next);
        for (uint32_t i = 0; i < f->nports; i++, next++) {
            uint8_t *p = b + offs[PH_TAB_SEC_RULE_PORTS] + (size_t)next * PH_TAB_PORT_SIZE;
            ph_tab_put16(p + PH_TAB_PORT_LO, c->ports[f->port_first + i].lo);
            ph_tab_put16(p + PH_TAB_PORT_HI, c->ports[f->port_first + i].hi);
        }
    }
    for (size_t e = 0; e < c->nentries; e++) {
        const entry *en = &c->entries[e];
        uint8_t *p = b + offs[PH_TAB_SEC_ENTRIES] + (size_t)c->entry_slot[e] * PH_TAB_ENTRY_SIZE;
        ph_tab_put32(b + offs[PH_TAB_SEC_ORDER] + e * PH_TAB_ORDER_SIZE, c->entry_slot[e]);
        const range *first = &c->ranges[en->range_first];
        const frule *fr = &c->rules[first->rule];
        ph_tab_put32(p + PH_TAB_ENTRY_HOST_OFF, en->host_ref);
        p[PH_TAB_ENTRY_HOST_LEN] = (uint8_t)en->host_len;
        p[PH_TAB_ENTRY_KIND] = (uint8_t)en->kind;
        ph_tab_put16(p + PH_TAB_ENTRY_LIST, (uint16_t)en->list);
        ph_tab_put32(p + PH_TAB_ENTRY_RANGE_FIRST, en->range_first);
        ph_tab_put16(p + PH_TAB_ENTRY_RANGE_COUNT, (uint16_t)en->range_count);
        ph_tab_put16(p + PH_TAB_ENTRY_RULE_NPORTS, (uint16_t)fr->nports);
        ph_tab_put16(p + PH_TAB_ENTRY_FIRST_LO, first->lo);
        ph_tab_put16(p + PH_TAB_ENTRY_FIRST_HI, first->hi);
        ph_tab_put32(p + PH_TAB_ENTRY_FIRST_RULE, first->rule);
        ph_tab_put32(p + PH_TAB_ENTRY_RULE_FILE, fr->file_ref);
        ph_tab_put32(p + PH_TAB_ENTRY_RULE_REASON, fr->reason ? fr->reason_ref : 0);
        ph_tab_put32(p + PH_TAB_ENTRY_RULE_LINE, fr->line);
        p[PH_TAB_ENTRY_PROTOCOL] = fr->protocol;
        memcpy(p + PH_TAB_ENTRY_PREFIX, c->strings.buf + en->host_ref,
               en->host_len < PH_TAB_ENTRY_PREFIX_LEN ? en->host_len : PH_TAB_ENTRY_PREFIX_LEN);
    }
    for (size_t i = 0; i < c->nranges; i++) {
        uint8_t *p = b + offs[PH_TAB_SEC_RANGES] + i * PH_TAB_RANGE_SIZE;
        ph_tab_put16(p + PH_TAB_RANGE_LO, c->ranges[i].lo);
        ph_tab_put16(p + PH_TAB_RANGE_HI, c->ranges[i].hi);
        ph_tab_put32(p + PH_TAB_RANGE_RULE, c->ranges[i].rule);
    }
    memcpy(b + offs[PH_TAB_SEC_TAGS], c->slot_tag, c->nslots); /* empty slots: zero */
    ph_status st = policy_id(c, b + PH_TAB_OFF_POLICY_ID);
    if (st == PH_OK)
        ph_tab_put32(b + PH_TAB_OFF_CHECKSUM, ph_tab_checksum(b, (size_t)end));
    if (st != PH_OK) {
        free(b);
        return st;
    }
    *out = b;
    *outlen = (size_t)end;
    return PH_OK;
}

static void compiler_free(compiler *c)
{
    free(c->order);
    free(c->list_rule_first);
    free(c->list_rule_count);
    free(c->list_entry_first);
    free(c->list_entry_count);
    free(c->list_name_ref);
    free(c->rules);
    free(c->ports);
    free(c->entries);
    free(c->ranges);
    free(c->slot_tag);
    free(c->entry_slot);
    free(c->strings.buf);
    free(c->strings.slots);
}

ph_status pc_compile(const pc_policy *policy, uint8_t **out, size_t *len, ph_diag *diag)
{
    if (out == NULL || len == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no output buffer");
    *out = NULL;
    *len = 0;
    if (policy == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no policy");
    compiler c = {.policy = policy, .diag = diag};
    ph_status st = flatten(&c);
    if (st == PH_OK)
        st = build_strings(&c);
    if (st == PH_OK)
        st = build_entries(&c);
    if (st == PH_OK)
        st = build_slots(&c);
    if (st == PH_OK)
        st = serialize(&c, out, len);
    compiler_free(&c);
    return st;
}
