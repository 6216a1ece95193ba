/*
 * table_verify.c - complete verification of an untrusted table image before
 * anything else reads it. Every check is overflow-safe (sizes are compared by
 * subtraction from known-good bounds, 32-bit counts are multiplied in 64
 * bits) and any failure refuses the whole image with PH_E_FORMAT and a
 * message naming the field. After PH_OK every offset, count and string
 * reference the lookup and enumeration code follows is known to be in bounds
 * and every entry is known to be reachable through the hash index.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/diag.h"
#include "table-int.h"

#define BAD(off, ...) ph_diag_set(diag, PH_E_FORMAT, (off), "corrupt table: " __VA_ARGS__)

static ph_status verify_header(const ph_table *t, ph_diag *diag)
{
    const uint8_t *b = t->bytes;
    if (memcmp(b + PH_TAB_OFF_MAGIC, PH_TAB_MAGIC, PH_TAB_MAGIC_LEN) != 0)
        return ph_diag_set(diag, PH_E_FORMAT, 0, "not a Pinhole table (bad magic)");
    uint32_t version = ph_tab_get32(b + PH_TAB_OFF_VERSION);
    if (version != PH_TAB_VERSION)
        return ph_diag_set(diag, PH_E_FORMAT, PH_TAB_OFF_VERSION,
                           "unsupported table format version %u (this reader knows %u: "
                           "recompile the policy with this policyc)",
                           version, PH_TAB_VERSION);
    if (ph_tab_get32(b + PH_TAB_OFF_HEADER_SIZE) != PH_TAB_HEADER_SIZE)
        return BAD(PH_TAB_OFF_HEADER_SIZE, "header size is not %u", PH_TAB_HEADER_SIZE);
    uint64_t fsize = ph_tab_get64(b + PH_TAB_OFF_FILE_SIZE);
    if (fsize != t->len)
        return BAD(PH_TAB_OFF_FILE_SIZE, "header says %llu bytes, file has %zu (truncated?)",
                   (unsigned long long)fsize, t->len);
    if (ph_tab_get32(b + PH_TAB_OFF_SECTION_COUNT) != PH_TAB_SECTION_COUNT)
        return BAD(PH_TAB_OFF_SECTION_COUNT, "section count is not %u", PH_TAB_SECTION_COUNT);
    if (ph_tab_get32(b + PH_TAB_OFF_FLAGS) != 0)
        return BAD(PH_TAB_OFF_FLAGS, "unknown header flags");
    for (size_t i = 0; i < PH_TAB_RESERVED_LEN; i++)
        if (b[PH_TAB_OFF_RESERVED + i] != 0)
            return BAD(PH_TAB_OFF_RESERVED + i, "reserved header bytes are not zero");
    return PH_OK;
}

/* The section directory: fixed order, each section at the next 64-byte
 * boundary, zero padding, record-size multiples, the last one ending the file. */
static ph_status verify_directory(ph_table *t, ph_diag *diag)
{
    uint64_t end = PH_TAB_FIRST_SECTION;
    uint32_t tags = 0;
    for (uint32_t i = 0; i < PH_TAB_SECTION_COUNT; i++) {
        size_t at = PH_TAB_HEADER_SIZE + (size_t)i * PH_TAB_DIRENT_SIZE;
        const uint8_t *d = t->bytes + at;
        uint32_t id = ph_tab_get32(d + PH_TAB_DIRENT_ID);
        uint32_t count = ph_tab_get32(d + PH_TAB_DIRENT_COUNT);
        uint64_t off = ph_tab_get64(d + PH_TAB_DIRENT_OFFSET);
        uint64_t size = ph_tab_get64(d + PH_TAB_DIRENT_BYTES);
        if (id != i + 1)
            return BAD(at, "section %u has id %u", i, id);
        uint64_t want = (end + PH_TAB_ALIGN - 1) & ~(uint64_t)(PH_TAB_ALIGN - 1);
        if (off != want)
            return BAD(at + PH_TAB_DIRENT_OFFSET, "section %u starts at %llu, expected %llu", id,
                       (unsigned long long)off, (unsigned long long)want);
        if (off > t->len)
            return BAD(at + PH_TAB_DIRENT_OFFSET, "section %u starts past the end of the file", id);
        for (uint64_t p = end; p < off; p++)
            if (t->bytes[p] != 0)
                return BAD(p, "non-zero padding before section %u", id);
        if (size != (uint64_t)count * ph_tab_record_size(id))
            return BAD(at + PH_TAB_DIRENT_BYTES, "section %u size %llu does not hold %u records", id,
                       (unsigned long long)size, count);
        if (size > t->len - off)
            return BAD(at + PH_TAB_DIRENT_BYTES, "section %u runs past the end of the file", id);
        const uint8_t *base = t->bytes + off;
        switch (id) {
        case PH_TAB_SEC_STRINGS: t->strings = base, t->strings_len = count; break;
        case PH_TAB_SEC_LISTS: t->lists = base, t->nlists = count; break;
        case PH_TAB_SEC_RULES: t->rules = base, t->nrules = count; break;
        case PH_TAB_SEC_RULE_PORTS: t->ports = base, t->nports = count; break;
        case PH_TAB_SEC_ENTRIES: t->entries = base, t->nslots = count; break;
        case PH_TAB_SEC_RANGES: t->ranges = base, t->nranges = count; break;
        case PH_TAB_SEC_TAGS: t->tags = base; tags = count; break;
        default: t->order = base, t->nentries = count; break;
        }
        end = off + size;
    }
    if (end != t->len)
        return BAD(end, "%llu bytes of trailing data after the last section",
                   (unsigned long long)(t->len - end));
    if (tags != t->nslots)
        return BAD(0, "%u tags for %u entry slots", tags, t->nslots);
    return PH_OK;
}

/* The checksum was computed while the image was copied in (table_open.c). */
static ph_status verify_checksum(const ph_table *t, ph_diag *diag)
{
    uint32_t want = ph_tab_get32(t->bytes + PH_TAB_OFF_CHECKSUM);
    if (t->checksum != want)
        return BAD(PH_TAB_OFF_CHECKSUM, "checksum mismatch (the file is damaged)");
    return PH_OK;
}

/* A string reference: in bounds, NUL right after it, no NUL inside, length
 * in [min, max]. *s and *len receive it. */
static bool str_bounds_ok(const ph_table *t, const uint8_t *ref, uint32_t min, uint32_t max,
                          const char **s, uint32_t *len)
{
    uint32_t off = ph_tab_get32(ref + PH_TAB_STR_OFF), l = ph_tab_get32(ref + PH_TAB_STR_LEN);
    if (l < min || l > max || off >= t->strings_len || l >= t->strings_len - off)
        return false;
    const uint8_t *p = t->strings + off;
    if (p[l] != 0)
        return false;
    *s = (const char *)p;
    *len = l;
    return true;
}

static bool str_ok(const ph_table *t, const uint8_t *ref, uint32_t min, uint32_t max,
                   const char **s, uint32_t *len)
{
    return str_bounds_ok(t, ref, min, max, s, len) && memchr(*s, 0, *len) == NULL;
}

/* A text reference (file, reason) equal to the one verified just before is
 * not verified again: files and reasons are interned, so most rules share
 * them with the previous rule. */
typedef struct text_seen {
    uint64_t ref; /* offset | length << 32 */
    bool valid;
} text_seen;

static bool text_ok(const ph_table *t, const uint8_t *ref, text_seen *seen)
{
    uint64_t v = ph_tab_get64(ref);
    if (seen->valid && seen->ref == v)
        return true;
    const char *s;
    uint32_t l;
    if (!str_ok(t, ref, 1, PH_TAB_MAX_TEXT, &s, &l))
        return false;
    seen->ref = v;
    seen->valid = true;
    return true;
}

/* Bytes of the image from p to its end. */
static size_t image_after(const ph_table *t, const void *p)
{
    return (size_t)(t->bytes + t->len - (const uint8_t *)p);
}

/* Whether h[0..len) (inside the image) is canonical: a short name that can
 * be read wide (the image goes on past it) by masks, others byte by byte. */
static bool canonical(const ph_table *t, const char *h, uint32_t len)
{
    if (len <= PH_TAB_HOST_WIDE && image_after(t, h) >= PH_TAB_HOST_WIDE)
        return ph_tab_host_canonical_wide(h, len);
    return ph_tab_host_canonical(h, len);
}

/* A rule's host: canonical, or "*." + a canonical base. */
static bool host_ok(const ph_table *t, const char *h, uint32_t len)
{
    if (len > 2 && h[0] == '*' && h[1] == '.')
        return canonical(t, h + 2, len - 2);
    return canonical(t, h, len);
}

/* Sorted, non-empty, inclusive ranges; merged ones may not even touch. */
static bool ports_ok(const uint8_t *p, uint32_t n, uint32_t recsize, bool merged)
{
    uint32_t prev_hi = 0;
    for (uint32_t i = 0; i < n; i++, p += recsize) {
        /* RULE_PORTS and RANGES records both start with u16 lo, u16 hi. */
        uint32_t lo = ph_tab_get16(p + PH_TAB_RANGE_LO), hi = ph_tab_get16(p + PH_TAB_RANGE_HI);
        if (lo == 0 || lo > hi)
            return false;
        if (i > 0 && (merged ? lo <= prev_hi + 1 : lo <= prev_hi))
            return false;
        prev_hi = hi;
    }
    return true;
}

static int cmp_str(const char *a, uint32_t al, const char *b, uint32_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c != 0 ? c : (al > bl) - (al < bl);
}

/* cmp_str for two strings inside the image, eight bytes at a time: a word
 * read past a string's end stays inside the image and the bytes past the
 * shorter length are masked off (the last eight bytes of the image go byte
 * by byte). Rules and entries are verified in order, so each compares its
 * host with its neighbour's: this is the verifier's hottest compare. */
static int cmp_image(const ph_table *t, const char *a, uint32_t al, const char *b, uint32_t bl)
{
    const unsigned char *pa = (const unsigned char *)a, *pb = (const unsigned char *)b;
    uint32_t n = al < bl ? al : bl;
    size_t room = image_after(t, pa) < image_after(t, pb) ? image_after(t, pa) : image_after(t, pb);
    for (uint32_t i = 0; i < n; i += 8) {
        if (room - i < 8)
            return cmp_str(a + i, al - i, b + i, bl - i);
        uint64_t x = ph_tab_word(pa + i) ^ ph_tab_word(pb + i);
        if (n - i < 8)
            x &= ((uint64_t)1 << (8 * (n - i))) - 1;
        if (x != 0) {
            unsigned k = (unsigned)__builtin_ctzll(x) / 8;
            return pa[i + k] < pb[i + k] ? -1 : 1;
        }
    }
    return (al > bl) - (al < bl);
}

static int cmp_ref(const ph_table *t, const uint8_t *a, const uint8_t *b)
{
    return cmp_str(ph_tab_str(t, a), ph_tab_get32(a + PH_TAB_STR_LEN), ph_tab_str(t, b),
                   ph_tab_get32(b + PH_TAB_STR_LEN));
}

/* The canonical rule order (the compiler sorts with the same key): base host,
 * kind (exact first), protocol (ph_tab_proto_rank), ports, reason (none
 * first), file, line. *key_differs
 * receives whether a and b differ in the first two (the entry key). */
static int cmp_rules(const ph_table *t, const uint8_t *a, const uint8_t *b, bool *key_differs)
{
    const char *ha = ph_tab_str(t, a + PH_TAB_RULE_HOST), *hb = ph_tab_str(t, b + PH_TAB_RULE_HOST);
    uint32_t la = ph_tab_get32(a + PH_TAB_RULE_HOST + PH_TAB_STR_LEN);
    uint32_t lb = ph_tab_get32(b + PH_TAB_RULE_HOST + PH_TAB_STR_LEN);
    bool wa = ha[0] == '*', wb = hb[0] == '*';
    int c = cmp_image(t, ha + (wa ? 2 : 0), la - (wa ? 2 : 0), hb + (wb ? 2 : 0),
                      lb - (wb ? 2 : 0));
    *key_differs = c != 0 || wa != wb;
    if (*key_differs)
        return c != 0 ? c : (wa ? 1 : -1);
    unsigned pra = ph_tab_proto_rank(a[PH_TAB_RULE_PROTOCOL]);
    unsigned prb = ph_tab_proto_rank(b[PH_TAB_RULE_PROTOCOL]);
    if (pra != prb)
        return pra < prb ? -1 : 1;
    uint32_t na = ph_tab_get32(a + PH_TAB_RULE_PORT_COUNT), nb = ph_tab_get32(b + PH_TAB_RULE_PORT_COUNT);
    const uint8_t *pa = ph_tab_port(t, ph_tab_get32(a + PH_TAB_RULE_PORT_FIRST));
    const uint8_t *pb = ph_tab_port(t, ph_tab_get32(b + PH_TAB_RULE_PORT_FIRST));
    for (uint32_t i = 0; i < na && i < nb; i++, pa += PH_TAB_PORT_SIZE, pb += PH_TAB_PORT_SIZE) {
        uint32_t xlo = ph_tab_get16(pa + PH_TAB_PORT_LO), ylo = ph_tab_get16(pb + PH_TAB_PORT_LO);
        uint32_t xhi = ph_tab_get16(pa + PH_TAB_PORT_HI), yhi = ph_tab_get16(pb + PH_TAB_PORT_HI);
        if (xlo != ylo)
            return xlo < ylo ? -1 : 1;
        if (xhi != yhi)
            return xhi < yhi ? -1 : 1;
    }
    if (na != nb)
        return na < nb ? -1 : 1;
    uint32_t ra = ph_tab_get32(a + PH_TAB_RULE_REASON + PH_TAB_STR_LEN);
    uint32_t rb = ph_tab_get32(b + PH_TAB_RULE_REASON + PH_TAB_STR_LEN);
    if ((ra == 0) != (rb == 0))
        return ra == 0 ? -1 : 1;
    c = cmp_ref(t, a + PH_TAB_RULE_REASON, b + PH_TAB_RULE_REASON);
    if (c != 0)
        return c;
    c = cmp_ref(t, a + PH_TAB_RULE_FILE, b + PH_TAB_RULE_FILE);
    if (c != 0)
        return c;
    uint32_t xa = ph_tab_get32(a + PH_TAB_RULE_LINE), xb = ph_tab_get32(b + PH_TAB_RULE_LINE);
    return (xa > xb) - (xa < xb);
}

/* The rules of one list, verified in order, resumably: the entries are
 * verified in the same pass, each as soon as the rules it names are (a rule
 * is then still in cache when its entry reads it again). keyrank[r] counts
 * the (base, kind) changes from the list's first rule to rule r, so with
 * the rules in order keyrank[a] < keyrank[b] exactly when rule a's key
 * sorts before rule b's. */
typedef struct rule_walk {
    uint32_t li, first, end; /* the list and its rules [first, end) */
    uint32_t next;           /* the first rule not yet verified */
    uint32_t next_port;      /* the first port the next rule must own */
    text_seen file, reason;
    uint32_t *keyrank;
} rule_walk;

/* Rules are verified this many ahead of the entry that needs them. */
#define RULES_AHEAD 256u

/* Verifies the list's rules up to at least rule upto (exclusive). */
static ph_status verify_rules(const ph_table *t, rule_walk *w, uint32_t upto, ph_diag *diag)
{
    uint32_t first = w->first, li = w->li, *keyrank = w->keyrank;
    upto = w->end - upto > RULES_AHEAD ? upto + RULES_AHEAD : w->end;
    for (uint32_t r = w->next; r < upto; r++) {
        const uint8_t *rec = ph_tab_rule(t, r);
        size_t at = (size_t)(rec - t->bytes);
        const char *s;
        uint32_t l;
        /* A host equal to the previous rule's (same reference) is verified. */
        bool same_host = r > first && ph_tab_get64(rec + PH_TAB_RULE_HOST) ==
                                          ph_tab_get64(rec - PH_TAB_RULE_SIZE + PH_TAB_RULE_HOST);
        if (!same_host &&
            (!str_bounds_ok(t, rec + PH_TAB_RULE_HOST, 3, PH_TAB_MAX_NAME + 2, &s, &l) ||
             !host_ok(t, s, l))) /* a canonical host has no NUL: no memchr */
            return BAD(at + PH_TAB_RULE_HOST, "rule %u: bad host", r);
        if (!text_ok(t, rec + PH_TAB_RULE_FILE, &w->file))
            return BAD(at + PH_TAB_RULE_FILE, "rule %u: bad source file", r);
        if (ph_tab_get32(rec + PH_TAB_RULE_REASON + PH_TAB_STR_LEN) == 0
                ? ph_tab_get32(rec + PH_TAB_RULE_REASON + PH_TAB_STR_OFF) != 0
                : !text_ok(t, rec + PH_TAB_RULE_REASON, &w->reason))
            return BAD(at + PH_TAB_RULE_REASON, "rule %u: bad reason", r);
        if (ph_tab_get32(rec + PH_TAB_RULE_LINE) == 0)
            return BAD(at + PH_TAB_RULE_LINE, "rule %u: line 0", r);
        uint8_t proto = rec[PH_TAB_RULE_PROTOCOL];
        bool zero = true;
        for (uint32_t z = 0; z < PH_TAB_RULE_ZERO_LEN; z++)
            zero = zero && rec[PH_TAB_RULE_ZERO + z] == 0;
        if (proto > PH_TAB_PROTO_MAX || !zero)
            return BAD(at + PH_TAB_RULE_PROTOCOL, "rule %u: bad protocol", r);
        /* tcp is never on a wildcard (docs/allowlist.md): a table saying so
         * was not written by policyc. */
        if (proto == PH_TAB_PROTO_TCP &&
            t->strings[ph_tab_get32(rec + PH_TAB_RULE_HOST + PH_TAB_STR_OFF)] == '*')
            return BAD(at + PH_TAB_RULE_PROTOCOL, "rule %u: protocol tcp on a wildcard", r);
        if (ph_tab_get32(rec + PH_TAB_RULE_LIST) != li)
            return BAD(at + PH_TAB_RULE_LIST, "rule %u: belongs to list %u, filed under %u", r,
                       ph_tab_get32(rec + PH_TAB_RULE_LIST), li);
        uint32_t pf = ph_tab_get32(rec + PH_TAB_RULE_PORT_FIRST);
        uint32_t pc = ph_tab_get32(rec + PH_TAB_RULE_PORT_COUNT);
        if (pf != w->next_port || pc == 0 || pc > t->nports - pf)
            return BAD(at + PH_TAB_RULE_PORT_FIRST, "rule %u: bad port range reference", r);
        if (!ports_ok(ph_tab_port(t, pf), pc, PH_TAB_PORT_SIZE, true))
            return BAD(at + PH_TAB_RULE_PORT_FIRST, "rule %u: ports not sorted and merged", r);
        w->next_port = pf + pc;
        bool key_differs = false;
        if (r > first && cmp_rules(t, rec - PH_TAB_RULE_SIZE, rec, &key_differs) >= 0)
            return BAD(at, "rule %u: rules out of canonical order or duplicated", r);
        keyrank[r] = r > first ? keyrank[r - 1] + key_differs : 0;
        w->next = r + 1;
    }
    return PH_OK;
}

/* An entry's host is its rules' host string itself (a wildcard's: after its
 * "*."), so checking every range's rule points at the same bytes proves the
 * entry's host in bounds, NUL-terminated and canonical: the rule's was
 * verified. */
static bool entry_host_ok(const ph_table *t, const uint8_t *e, const uint8_t *rule, uint32_t kind)
{
    uint32_t eo = ph_tab_get32(e + PH_TAB_ENTRY_HOST_OFF), el = e[PH_TAB_ENTRY_HOST_LEN];
    uint32_t ro = ph_tab_get32(rule + PH_TAB_RULE_HOST + PH_TAB_STR_OFF);
    uint32_t rl = ph_tab_get32(rule + PH_TAB_RULE_HOST + PH_TAB_STR_LEN);
    uint32_t skip = kind == PH_TAB_KIND_WILDCARD ? 2 : 0;
    bool wild_rule = t->strings[ro] == '*';
    return eo == ro + skip && el + skip == rl && el > 0 && wild_rule == (skip != 0);
}

/* The low n bytes of a word (n may be past 8 or negative). */
static uint64_t low_bytes(long n)
{
    return n >= 8 ? ~(uint64_t)0 : n <= 0 ? 0 : ((uint64_t)1 << (8 * n)) - 1;
}

/* p[0..PH_TAB_ENTRY_PREFIX_LEN) is h[0..n) then zeros: by words when the
 * image goes on past h (the host's bytes beyond n are masked off). */
static bool prefix_ok(const ph_table *t, const uint8_t *p, const uint8_t *h, uint32_t n)
{
    _Static_assert(PH_TAB_ENTRY_PREFIX_LEN == 27, "prefix compare is by 3 words and 3 bytes");
    /* The word compare reads 28 bytes of h (the last masked off). */
    if (image_after(t, h) < PH_TAB_ENTRY_PREFIX_LEN + 1) {
        if (memcmp(p, h, n) != 0)
            return false;
        for (uint32_t i = n; i < PH_TAB_ENTRY_PREFIX_LEN; i++)
            if (p[i] != 0)
                return false;
        return true;
    }
    uint64_t diff = 0;
    for (long k = 0; k < 24; k += 8)
        diff |= (ph_tab_word(h + k) & low_bytes((long)n - k)) ^ ph_tab_word(p + k);
    diff |= (ph_tab_get32(h + 24) & (uint32_t)low_bytes((long)n - 24) & 0xffffffu) ^
            (ph_tab_get32(p + 24) & 0xffffffu);
    return diff == 0;
}

/* The inline host prefix equals the host's first bytes, the rest zero; the
 * first range and its rule's provenance and protocol equal the originals. */
static bool entry_copies_ok(const ph_table *t, const uint8_t *e)
{
    const uint8_t *h = t->strings + ph_tab_get32(e + PH_TAB_ENTRY_HOST_OFF);
    uint32_t l = e[PH_TAB_ENTRY_HOST_LEN];
    uint32_t n = l < PH_TAB_ENTRY_PREFIX_LEN ? l : PH_TAB_ENTRY_PREFIX_LEN;
    const uint8_t *p = e + PH_TAB_ENTRY_PREFIX;
    if (!prefix_ok(t, p, h, n))
        return false;
    const uint8_t *r0 = ph_tab_range(t, ph_tab_get32(e + PH_TAB_ENTRY_RANGE_FIRST));
    uint32_t rule = ph_tab_get32(r0 + PH_TAB_RANGE_RULE);
    const uint8_t *rr = ph_tab_rule(t, rule); /* verified: inside the list */
    return ph_tab_get16(e + PH_TAB_ENTRY_FIRST_LO) == ph_tab_get16(r0 + PH_TAB_RANGE_LO) &&
           ph_tab_get16(e + PH_TAB_ENTRY_FIRST_HI) == ph_tab_get16(r0 + PH_TAB_RANGE_HI) &&
           ph_tab_get32(e + PH_TAB_ENTRY_FIRST_RULE) == rule &&
           ph_tab_get16(e + PH_TAB_ENTRY_RULE_NPORTS) ==
               ph_tab_get32(rr + PH_TAB_RULE_PORT_COUNT) &&
           ph_tab_get32(e + PH_TAB_ENTRY_RULE_FILE) ==
               ph_tab_get32(rr + PH_TAB_RULE_FILE + PH_TAB_STR_OFF) &&
           ph_tab_get32(e + PH_TAB_ENTRY_RULE_REASON) ==
               ph_tab_get32(rr + PH_TAB_RULE_REASON + PH_TAB_STR_OFF) &&
           ph_tab_get32(e + PH_TAB_ENTRY_RULE_LINE) == ph_tab_get32(rr + PH_TAB_RULE_LINE) &&
           e[PH_TAB_ENTRY_PROTOCOL] == rr[PH_TAB_RULE_PROTOCOL];
}

/* The entry at slot s is reachable by a lookup for its key, whose hash is
 * h: its tag is the key's, and no empty slot lies between its home slot and
 * it (a lookup stops at the first empty slot). */
static bool entry_slot_ok(const ph_table *t, uint32_t s, uint64_t h)
{
    uint32_t home = ph_tab_home(h, t->nhomes);
    return t->tags[s] == ph_tab_tag(h) && home <= s &&
           memchr(t->tags + home, 0, s - home) == NULL;
}

/* The hash of the key of the entry at ORDER position e, when its slot and
 * host reference lie inside their sections (not yet verified: an entry
 * ahead of the one being verified), else 0. */
static uint64_t entry_hash_early(const ph_table *t, uint32_t e)
{
    uint32_t slot = ph_tab_get32(t->order + (size_t)e * PH_TAB_ORDER_SIZE);
    if (slot >= t->nslots)
        return 0;
    const uint8_t *rec = ph_tab_entry(t, slot);
    uint32_t off = ph_tab_get32(rec + PH_TAB_ENTRY_HOST_OFF), len = rec[PH_TAB_ENTRY_HOST_LEN];
    if (off >= t->strings_len || len > t->strings_len - off)
        return 0;
    return ph_tab_hash(ph_tab_get16(rec + PH_TAB_ENTRY_LIST), rec[PH_TAB_ENTRY_KIND],
                       (const char *)t->strings + off, len);
}

/* Entries hashed ahead of their verification, so their home slots' tags
 * (read at random) are fetched while the entries before them are verified;
 * the entries themselves (read at random too) are fetched further ahead:
 * 32 rather than 16 took a 1,000,000-rule open from 86-88 to 78-79 ms of
 * CPU, 64 no further. */
#define HASH_AHEAD 8u
#define FETCH_AHEAD 32u

/* Entries must be in (host, kind) order, without duplicates. An entry's
 * host and kind are its rules' base and kind (entry_host_ok), and the rules
 * are in order with their keys numbered (verify_rules), so the order of two
 * entries is the order of their first ranges' rules' key numbers: no string
 * compare. */
static ph_status verify_entries(const ph_table *t, rule_walk *w, uint32_t first, uint32_t count,
                                uint32_t *next_range, uint8_t *seen, ph_diag *diag)
{
    uint32_t li = w->li, rfirst = w->first, rcount = w->end - w->first;
    const uint32_t *keyrank = w->keyrank;
    uint32_t prev_key = 0;
    uint64_t ahead[HASH_AHEAD];
    for (uint32_t e = first; e < first + count && e < first + HASH_AHEAD; e++)
        ahead[e % HASH_AHEAD] = entry_hash_early(t, e);
    for (uint32_t e = first; e < first + count; e++) {
        /* The slots are visited in destination order, i.e. at random: fetch
         * entries and hash them a few destinations ahead, and fetch their
         * home slots' tags, so those reads overlap. */
        uint64_t h = ahead[e % HASH_AHEAD];
        if (e + FETCH_AHEAD < first + count) {
            uint32_t far = ph_tab_get32(t->order + (size_t)(e + FETCH_AHEAD) * PH_TAB_ORDER_SIZE);
            if (far < t->nslots)
                __builtin_prefetch(ph_tab_entry(t, far));
        }
        if (e + HASH_AHEAD < first + count) {
            uint64_t later = entry_hash_early(t, e + HASH_AHEAD);
            ahead[e % HASH_AHEAD] = later;
            __builtin_prefetch(t->tags + ph_tab_home(later, t->nhomes));
        }
        size_t oat = (size_t)(t->order - t->bytes) + (size_t)e * PH_TAB_ORDER_SIZE;
        uint32_t slot = ph_tab_get32(t->bytes + oat);
        /* Occupied, and no other destination's: with as many occupied slots
         * as destinations (verify_slots), every entry is verified here. */
        if (slot >= t->nslots || t->tags[slot] == 0 || (seen[slot / 8] >> (slot % 8)) & 1)
            return BAD(oat, "destination %u: bad or repeated slot", e);
        seen[slot / 8] |= (uint8_t)(1u << (slot % 8));
        const uint8_t *rec = ph_tab_entry(t, slot);
        size_t at = (size_t)(rec - t->bytes);
        uint32_t kind = rec[PH_TAB_ENTRY_KIND];
        if (ph_tab_get16(rec + PH_TAB_ENTRY_LIST) != li)
            return BAD(at + PH_TAB_ENTRY_LIST, "entry %u: bad list", e);
        if (kind > PH_TAB_KIND_WILDCARD)
            return BAD(at + PH_TAB_ENTRY_KIND, "entry %u: bad kind", e);
        uint32_t rf = ph_tab_get32(rec + PH_TAB_ENTRY_RANGE_FIRST);
        uint32_t rc = ph_tab_get16(rec + PH_TAB_ENTRY_RANGE_COUNT);
        if (rf != *next_range || rc == 0 || rc > t->nranges - rf)
            return BAD(at + PH_TAB_ENTRY_RANGE_FIRST, "entry %u: bad port range reference", e);
        const uint8_t *rg = ph_tab_range(t, rf);
        if (!ports_ok(rg, rc, PH_TAB_RANGE_SIZE, false))
            return BAD(at + PH_TAB_ENTRY_RANGE_FIRST, "entry %u: port ranges not sorted", e);
        for (uint32_t k = 0; k < rc; k++, rg += PH_TAB_RANGE_SIZE) {
            uint32_t rule = ph_tab_get32(rg + PH_TAB_RANGE_RULE);
            if (rule < rfirst || rule - rfirst >= rcount)
                return BAD((size_t)(rg - t->bytes), "entry %u: rule id outside its list", e);
            if (rule >= w->next) {
                ph_status st = verify_rules(t, w, rule + 1, diag);
                if (st != PH_OK)
                    return st;
            }
            if (!entry_host_ok(t, rec, ph_tab_rule(t, rule), kind))
                return BAD((size_t)(rg - t->bytes), "entry %u: rule %u is for another host", e,
                           rule);
        }
        /* Hosts are known good now: order, copies, slot. */
        uint32_t key = keyrank[ph_tab_get32(ph_tab_range(t, rf) + PH_TAB_RANGE_RULE)];
        if (e > first && key <= prev_key)
            return BAD(at, "entry %u: entries out of order or duplicated", e);
        prev_key = key;
        if (!entry_copies_ok(t, rec))
            return BAD(at + PH_TAB_ENTRY_FIRST_LO, "entry %u: a copied field differs", e);
        /* The early hash read the same bytes, now verified (0: it could not). */
        if (h == 0)
            h = entry_hash_early(t, e);
        if (!entry_slot_ok(t, slot, h))
            return BAD(at, "entry %u is not where its hash leads", e);
        *next_range = rf + rc;
    }
    return PH_OK;
}

static ph_status verify_lists(const ph_table *t, uint32_t *keyrank, uint8_t *seen,
                              ph_diag *diag)
{
    uint32_t next_rule = 0, next_entry = 0, next_port = 0, next_range = 0;
    const char *prev = NULL;
    uint32_t prev_len = 0;
    for (uint32_t li = 0; li < t->nlists; li++) {
        const uint8_t *rec = ph_tab_list(t, li);
        size_t at = (size_t)(rec - t->bytes);
        const char *name;
        uint32_t nl;
        if (!str_ok(t, rec + PH_TAB_LIST_NAME, 1, PH_TAB_MAX_NAME, &name, &nl))
            return BAD(at + PH_TAB_LIST_NAME, "list %u: bad name", li);
        if (prev != NULL && cmp_str(prev, prev_len, name, nl) >= 0)
            return BAD(at, "list %u: lists out of order or duplicated", li);
        prev = name, prev_len = nl;
        uint32_t rf = ph_tab_get32(rec + PH_TAB_LIST_RULE_FIRST);
        uint32_t rc = ph_tab_get32(rec + PH_TAB_LIST_RULE_COUNT);
        uint32_t ef = ph_tab_get32(rec + PH_TAB_LIST_ENTRY_FIRST);
        uint32_t ec = ph_tab_get32(rec + PH_TAB_LIST_ENTRY_COUNT);
        if (rf != next_rule || rc == 0 || rc > t->nrules - rf)
            return BAD(at + PH_TAB_LIST_RULE_FIRST, "list %u: bad rule range", li);
        if (ef != next_entry || ec == 0 || ec > t->nentries - ef)
            return BAD(at + PH_TAB_LIST_ENTRY_FIRST, "list %u: bad entry range", li);
        rule_walk w = {.li = li, .first = rf, .end = rf + rc, .next = rf,
                       .next_port = next_port, .keyrank = keyrank};
        ph_status st = verify_entries(t, &w, ef, ec, &next_range, seen, diag);
        if (st == PH_OK) /* rules no range names (every port of theirs shadowed) */
            st = verify_rules(t, &w, w.end, diag);
        if (st != PH_OK)
            return st;
        next_port = w.next_port;
        next_rule = rf + rc;
        next_entry = ef + ec;
    }
    if (next_rule != t->nrules || next_entry != t->nentries || next_port != t->nports ||
        next_range != t->nranges)
        return BAD(0, "records not owned by any list");
    return PH_OK;
}

/* The hash index, pass 1: the canonical number of home slots; the slots
 * after them at most as many as the entries plus PH_TAB_SLOT_CHUNK, the
 * last PH_TAB_SLOT_CHUNK of them empty; an empty slot's entry all zero; as
 * many occupied slots as destinations. One sequential walk. Pass 2 is in
 * verify_entries: each destination names an occupied slot no other one
 * names, and its entry, hashed while its host is at hand, must be found by
 * its lookup's probe (entry_slot_ok). */
static ph_status verify_slots(ph_table *t, ph_diag *diag)
{
    uint64_t homes = ph_tab_home_count(t->nentries);
    if (t->nslots < homes + PH_TAB_SLOT_CHUNK ||
        t->nslots - homes > (uint64_t)t->nentries + PH_TAB_SLOT_CHUNK)
        return BAD(0, "hash index has %u slots for %u entries", t->nslots, t->nentries);
    t->nhomes = (uint32_t)homes;
    static const uint8_t zero[PH_TAB_ENTRY_SIZE];
    uint32_t occupied = 0;
    for (uint32_t s = 0; s < t->nslots; s++) {
        if (t->tags[s] != 0) {
            if (s >= t->nslots - PH_TAB_SLOT_CHUNK)
                return BAD((size_t)(t->tags + s - t->bytes), "slot %u: the last slots must be empty", s);
            occupied++;
        } else if (memcmp(ph_tab_entry(t, s), zero, PH_TAB_ENTRY_SIZE) != 0)
            return BAD((size_t)(ph_tab_entry(t, s) - t->bytes), "slot %u: empty slot not zero", s);
    }
    if (occupied != t->nentries)
        return BAD(0, "%u occupied slots for %u destinations", occupied, t->nentries);
    return PH_OK;
}

ph_status ph_table_verify(ph_table *t, ph_diag *diag)
{
    if (t->len < PH_TAB_FIRST_SECTION)
        return ph_diag_set(diag, PH_E_FORMAT, t->len, "not a Pinhole table: too short");
    ph_status st = verify_header(t, diag);
    if (st == PH_OK)
        st = verify_directory(t, diag);
    if (st == PH_OK)
        st = verify_checksum(t, diag);
    if (st != PH_OK)
        return st;
    if (t->strings_len == 0 || t->strings[0] != 0 || t->strings[t->strings_len - 1] != 0)
        return BAD((size_t)(t->strings - t->bytes), "string section must start and end with NUL");
    uint32_t *keyrank = malloc(((size_t)t->nrules + 1) * sizeof *keyrank);
    if (keyrank == NULL) {
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    uint8_t *seen = calloc((size_t)t->nslots / 8 + 1, 1);
    if (seen == NULL) {
        free(keyrank);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    st = verify_slots(t, diag);
    if (st == PH_OK)
        st = verify_lists(t, keyrank, seen, diag);
    free(seen);
    free(keyrank);
    return st;
}
