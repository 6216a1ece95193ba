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

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "diag-int.h"
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
    return PH_OK;
}

/* The section directory: fixed order, each section at the next 8-byte
 * boundary, zero padding, record-size multiples, the last one ending the file. */
static ph_status verify_directory(ph_table *t, ph_diag *diag)
{
    uint64_t end = PH_TAB_FIRST_SECTION;
    for (uint32_t i = 0; i < PH_TAB_SECTION_COUNT; i++) {
        size_t at = PH_TAB_HEADER_SIZE + (size_t)i * PH_TAB_DIRENT_SIZE;
        const uint8_t *d = t->bytes + at;
        uint32_t id = ph_tab_get32(d), count = ph_tab_get32(d + 4);
        uint64_t off = ph_tab_get64(d + 8), size = ph_tab_get64(d + 16);
        if (id != i + 1)
            return BAD(at, "section %u has id %u", i, id);
        uint64_t want = (end + PH_TAB_ALIGN - 1) & ~(uint64_t)(PH_TAB_ALIGN - 1);
        if (off != want)
            return BAD(at + 8, "section %u starts at %llu, expected %llu", id,
                       (unsigned long long)off, (unsigned long long)want);
        if (off > t->len)
            return BAD(at + 8, "section %u starts past the end of the file", id);
        for (uint64_t p = end; p < off; p++)
            if (t->bytes[p] != 0)
                return BAD(p, "non-zero padding before section %u", id);
        if (size != (uint64_t)count * ph_tab_record_size(id))
            return BAD(at + 16, "section %u size %llu does not hold %u records", id,
                       (unsigned long long)size, count);
        if (size > t->len - off)
            return BAD(at + 16, "section %u runs past the end of the file", id);
        const uint8_t *base = t->bytes + off;
        switch (id) {
        case PH_TAB_SEC_STRINGS: t->strings = base, t->strings_len = count; break;
        case PH_TAB_SEC_LISTS: t->lists = base, t->nlists = count; break;
        case PH_TAB_SEC_RULES: t->rules = base, t->nrules = count; break;
        case PH_TAB_SEC_RULE_PORTS: t->ports = base, t->nports = count; break;
        case PH_TAB_SEC_ENTRIES: t->entries = base, t->nentries = count; break;
        case PH_TAB_SEC_RANGES: t->ranges = base, t->nranges = count; break;
        default: t->slots = base, t->nslots = count; break;
        }
        end = off + size;
    }
    if (end != t->len)
        return BAD(end, "%llu bytes of trailing data after the last section",
                   (unsigned long long)(t->len - end));
    return PH_OK;
}

static ph_status verify_checksum(const ph_table *t, ph_diag *diag)
{
    uint8_t md[32];
    unsigned mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
              EVP_DigestUpdate(ctx, t->bytes, PH_TAB_OFF_CHECKSUM) == 1 &&
              EVP_DigestUpdate(ctx, t->bytes + PH_TAB_OFF_CHECKSUM + PH_TAB_CHECKSUM_LEN,
                               t->len - PH_TAB_OFF_CHECKSUM - PH_TAB_CHECKSUM_LEN) == 1 &&
              EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == sizeof md;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 failed");
    if (CRYPTO_memcmp(md, t->bytes + PH_TAB_OFF_CHECKSUM, sizeof md) != 0)
        return BAD(PH_TAB_OFF_CHECKSUM, "checksum mismatch (the file is damaged)");
    return PH_OK;
}

/* A string reference: in bounds, NUL right after it, no NUL inside, length
 * in [min, max]. *s and *len receive it. */
static bool str_ok(const ph_table *t, const uint8_t *ref, uint32_t min, uint32_t max,
                   const char **s, uint32_t *len)
{
    uint32_t off = ph_tab_get32(ref), l = ph_tab_get32(ref + 4);
    if (l < min || l > max || off >= t->strings_len || l >= t->strings_len - off)
        return false;
    const uint8_t *p = t->strings + off;
    if (p[l] != 0 || memchr(p, 0, l) != NULL)
        return false;
    *s = (const char *)p;
    *len = l;
    return true;
}

/* A rule's or entry's host: canonical, and for a rule "*." + canonical base. */
static bool host_ok(const char *h, uint32_t len, bool allow_wildcard)
{
    if (allow_wildcard && len > 2 && h[0] == '*' && h[1] == '.')
        return ph_tab_host_canonical(h + 2, len - 2);
    return ph_tab_host_canonical(h, len);
}

/* Sorted, non-empty, inclusive ranges; merged ones may not even touch. */
static bool ports_ok(const uint8_t *p, uint32_t n, uint32_t recsize, bool merged)
{
    uint32_t prev_hi = 0;
    for (uint32_t i = 0; i < n; i++, p += recsize) {
        uint32_t lo = ph_tab_get16(p), hi = ph_tab_get16(p + 2);
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

/* The canonical rule order (the compiler sorts with the same key): base host,
 * kind (exact first), ports, reason (none first), file, line. */
static int cmp_rules(const ph_table *t, const uint8_t *a, const uint8_t *b)
{
    const char *ha = ph_tab_str(t, a), *hb = ph_tab_str(t, b);
    uint32_t la = ph_tab_get32(a + 4), lb = ph_tab_get32(b + 4);
    bool wa = ha[0] == '*', wb = hb[0] == '*';
    int c = cmp_str(ha + (wa ? 2 : 0), la - (wa ? 2 : 0), hb + (wb ? 2 : 0), lb - (wb ? 2 : 0));
    if (c != 0 || wa != wb)
        return c != 0 ? c : (wa ? 1 : -1);
    uint32_t na = ph_tab_get32(a + 36), nb = ph_tab_get32(b + 36);
    const uint8_t *pa = t->ports + (size_t)ph_tab_get32(a + 32) * PH_TAB_PORT_SIZE;
    const uint8_t *pb = t->ports + (size_t)ph_tab_get32(b + 32) * PH_TAB_PORT_SIZE;
    for (uint32_t i = 0; i < na && i < nb; i++) {
        uint32_t x = ph_tab_get32(pa + 4 * i), y = ph_tab_get32(pb + 4 * i);
        uint32_t xlo = x & 0xffff, ylo = y & 0xffff, xhi = x >> 16, yhi = y >> 16;
        if (xlo != ylo)
            return xlo < ylo ? -1 : 1;
        if (xhi != yhi)
            return xhi < yhi ? -1 : 1;
    }
    if (na != nb)
        return na < nb ? -1 : 1;
    uint32_t ra = ph_tab_get32(a + 20), rb = ph_tab_get32(b + 20);
    if ((ra == 0) != (rb == 0))
        return ra == 0 ? -1 : 1;
    c = cmp_str(ph_tab_str(t, a + 16), ra, ph_tab_str(t, b + 16), rb);
    if (c != 0)
        return c;
    c = cmp_str(ph_tab_str(t, a + 8), ph_tab_get32(a + 12), ph_tab_str(t, b + 8),
                ph_tab_get32(b + 12));
    if (c != 0)
        return c;
    uint32_t xa = ph_tab_get32(a + 24), xb = ph_tab_get32(b + 24);
    return (xa > xb) - (xa < xb);
}

static ph_status verify_rules(const ph_table *t, uint32_t li, uint32_t first, uint32_t count,
                              uint32_t *next_port, ph_diag *diag)
{
    for (uint32_t r = first; r < first + count; r++) {
        const uint8_t *rec = t->rules + (size_t)r * PH_TAB_RULE_SIZE;
        size_t at = (size_t)(rec - t->bytes);
        const char *s;
        uint32_t l;
        if (!str_ok(t, rec, 3, PH_TAB_MAX_NAME + 2, &s, &l) || !host_ok(s, l, true))
            return BAD(at, "rule %u: bad host", r);
        if (!str_ok(t, rec + 8, 1, PH_TAB_MAX_TEXT, &s, &l))
            return BAD(at + 8, "rule %u: bad source file", r);
        if (ph_tab_get32(rec + 20) == 0 ? ph_tab_get32(rec + 16) != 0
                                        : !str_ok(t, rec + 16, 1, PH_TAB_MAX_TEXT, &s, &l))
            return BAD(at + 16, "rule %u: bad reason", r);
        if (ph_tab_get32(rec + 24) == 0)
            return BAD(at + 24, "rule %u: line 0", r);
        if (ph_tab_get32(rec + 28) != li)
            return BAD(at + 28, "rule %u: belongs to list %u, filed under %u", r,
                       ph_tab_get32(rec + 28), li);
        uint32_t pf = ph_tab_get32(rec + 32), pc = ph_tab_get32(rec + 36);
        if (pf != *next_port || pc == 0 || pc > t->nports - pf)
            return BAD(at + 32, "rule %u: bad port range reference", r);
        if (!ports_ok(t->ports + (size_t)pf * PH_TAB_PORT_SIZE, pc, PH_TAB_PORT_SIZE, true))
            return BAD(at + 32, "rule %u: ports not sorted and merged", r);
        *next_port = pf + pc;
        if (r > first && cmp_rules(t, rec - PH_TAB_RULE_SIZE, rec) >= 0)
            return BAD(at, "rule %u: rules out of canonical order or duplicated", r);
    }
    return PH_OK;
}

static ph_status verify_entries(const ph_table *t, uint32_t li, uint32_t rfirst, uint32_t rcount,
                                uint32_t first, uint32_t count, uint32_t *next_range,
                                ph_diag *diag)
{
    const char *prev = NULL;
    uint32_t prev_len = 0, prev_kind = 0;
    for (uint32_t e = first; e < first + count; e++) {
        const uint8_t *rec = t->entries + (size_t)e * PH_TAB_ENTRY_SIZE;
        size_t at = (size_t)(rec - t->bytes);
        const char *h;
        uint32_t hl;
        if (!str_ok(t, rec, 1, PH_TAB_MAX_NAME, &h, &hl) || !host_ok(h, hl, false))
            return BAD(at, "entry %u: bad host", e);
        uint32_t kind = ph_tab_get32(rec + 12);
        if (ph_tab_get32(rec + 8) != li || kind > PH_TAB_KIND_WILDCARD)
            return BAD(at + 8, "entry %u: bad list or kind", e);
        if (prev != NULL) {
            int c = cmp_str(prev, prev_len, h, hl);
            if (c > 0 || (c == 0 && prev_kind >= kind))
                return BAD(at, "entry %u: entries out of order or duplicated", e);
        }
        prev = h, prev_len = hl, prev_kind = kind;
        uint32_t rf = ph_tab_get32(rec + 16), rc = ph_tab_get32(rec + 20);
        if (rf != *next_range || rc == 0 || rc > t->nranges - rf)
            return BAD(at + 16, "entry %u: bad port range reference", e);
        const uint8_t *rg = t->ranges + (size_t)rf * PH_TAB_RANGE_SIZE;
        if (!ports_ok(rg, rc, PH_TAB_RANGE_SIZE, false))
            return BAD(at + 16, "entry %u: port ranges not sorted", e);
        for (uint32_t k = 0; k < rc; k++, rg += PH_TAB_RANGE_SIZE) {
            uint32_t rule = ph_tab_get32(rg + 4);
            if (rule < rfirst || rule - rfirst >= rcount)
                return BAD((size_t)(rg - t->bytes), "entry %u: rule id outside its list", e);
            const uint8_t *rr = t->rules + (size_t)rule * PH_TAB_RULE_SIZE;
            const char *rh = ph_tab_str(t, rr);
            uint32_t rl = ph_tab_get32(rr + 4), skip = kind == PH_TAB_KIND_WILDCARD ? 2 : 0;
            if (rl != hl + skip || (skip && rh[0] != '*') || memcmp(rh + skip, h, hl) != 0)
                return BAD((size_t)(rg - t->bytes), "entry %u: rule %u is for another host", e,
                           rule);
        }
        *next_range = rf + rc;
    }
    return PH_OK;
}

static ph_status verify_lists(const ph_table *t, ph_diag *diag)
{
    uint32_t next_rule = 0, next_entry = 0, next_port = 0, next_range = 0;
    const char *prev = NULL;
    uint32_t prev_len = 0;
    for (uint32_t li = 0; li < t->nlists; li++) {
        const uint8_t *rec = t->lists + (size_t)li * PH_TAB_LIST_SIZE;
        size_t at = (size_t)(rec - t->bytes);
        const char *name;
        uint32_t nl;
        if (!str_ok(t, rec, 1, PH_TAB_MAX_NAME, &name, &nl))
            return BAD(at, "list %u: bad name", li);
        if (prev != NULL && cmp_str(prev, prev_len, name, nl) >= 0)
            return BAD(at, "list %u: lists out of order or duplicated", li);
        prev = name, prev_len = nl;
        uint32_t rf = ph_tab_get32(rec + 8), rc = ph_tab_get32(rec + 12);
        uint32_t ef = ph_tab_get32(rec + 16), ec = ph_tab_get32(rec + 20);
        if (rf != next_rule || rc == 0 || rc > t->nrules - rf)
            return BAD(at + 8, "list %u: bad rule range", li);
        if (ef != next_entry || ec == 0 || ec > t->nentries - ef)
            return BAD(at + 16, "list %u: bad entry range", li);
        ph_status st = verify_rules(t, li, rf, rc, &next_port, diag);
        if (st == PH_OK)
            st = verify_entries(t, li, rf, rc, ef, ec, &next_range, diag);
        if (st != PH_OK)
            return st;
        next_rule = rf + rc;
        next_entry = ef + ec;
    }
    if (next_rule != t->nrules || next_entry != t->nentries || next_port != t->nports ||
        next_range != t->nranges)
        return BAD(0, "records not owned by any list");
    return PH_OK;
}

/* The hash index: the canonical slot count; every empty slot all zero; every
 * entry in exactly one slot, with its tag, and reachable by linear probing
 * from its home slot (no empty slot between); every field a slot copies from
 * its entry equal to it. Two sequential passes, because random access into a
 * large table is what costs: pass 1 walks the slots once from an empty one,
 * counting `run`, the occupied slots ending at the current one, and records
 * for each entry its slot and run; pass 2 walks the entries in order (their
 * strings and ranges are laid out in the same order), hashes each one and
 * checks its slot's tag, distance and copied fields, fetching slots ahead. */
typedef struct slot_info {
    uint32_t slot, run;
} slot_info;

static bool slot_copies_entry(const ph_table *t, const uint8_t *s, const uint8_t *e)
{
    const uint8_t *rg = t->ranges + (size_t)ph_tab_get32(e + 16) * PH_TAB_RANGE_SIZE;
    return ph_tab_get32(s + PH_TAB_SLOT_HOST_OFF) == ph_tab_get32(e) &&
           ph_tab_get16(s + PH_TAB_SLOT_HOST_LEN) == ph_tab_get32(e + 4) &&
           s[PH_TAB_SLOT_KIND] == ph_tab_get32(e + 12) && s[PH_TAB_SLOT_ZERO] == 0 &&
           memcmp(s + PH_TAB_SLOT_LO, rg, PH_TAB_RANGE_SIZE) == 0;
}

static bool slot_is_zero(const uint8_t *s)
{
    static const uint8_t zero[PH_TAB_SLOT_SIZE];
    return memcmp(s, zero, PH_TAB_SLOT_SIZE) == 0;
}

static ph_status verify_slots(const ph_table *t, ph_diag *diag)
{
    uint32_t n = t->nslots;
    if (n != ph_tab_slot_count(t->nentries))
        return BAD(0, "hash index has %u slots for %u entries (expected %llu)", n, t->nentries,
                   (unsigned long long)ph_tab_slot_count(t->nentries));
    uint32_t mask = n - 1, start = UINT32_MAX;
    for (uint32_t b = 0; b < n && start == UINT32_MAX; b++)
        if (ph_tab_get32(t->slots + (size_t)b * PH_TAB_SLOT_SIZE) == 0)
            start = b;
    /* where[] is written at random (only written: stores do not stall);
     * the small seen[] bitmap, read at random, stays in cache. */
    slot_info *where = malloc(((size_t)t->nentries + 1) * sizeof *where);
    uint8_t *seen = calloc((size_t)t->nentries / 8 + 1, 1);
    if (where == NULL || seen == NULL) {
        free(where);
        free(seen);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    ph_status st = PH_OK;
    uint32_t run = 0, found = 0;
    for (uint32_t i = 1; i <= n && st == PH_OK; i++) {
        uint32_t b = (start + i) & mask;
        const uint8_t *rec = t->slots + (size_t)b * PH_TAB_SLOT_SIZE;
        uint32_t v = ph_tab_get32(rec);
        if (v == 0) {
            run = 0;
            if (!slot_is_zero(rec))
                st = BAD((size_t)(rec - t->bytes), "empty slot %u is not all zero", b);
            continue;
        }
        run++;
        uint32_t e = v - 1;
        if (e >= t->nentries || (seen[e / 8] >> (e % 8)) & 1) {
            st = BAD((size_t)(rec - t->bytes), "slot %u: bad or repeated entry", b);
            break;
        }
        seen[e / 8] |= (uint8_t)(1u << (e % 8));
        where[e] = (slot_info){b, run};
        found++;
    }
    if (st == PH_OK && found != t->nentries)
        st = BAD(0, "%u entries missing from the hash index", t->nentries - found);
    for (uint32_t e = 0; e < t->nentries && st == PH_OK; e++) {
        /* The slots are visited in entry order, i.e. at random: fetch a few
         * entries ahead so those reads overlap instead of queueing. */
        if (e + 8 < t->nentries)
            __builtin_prefetch(t->slots + (size_t)where[e + 8].slot * PH_TAB_SLOT_SIZE);
        const uint8_t *er = t->entries + (size_t)e * PH_TAB_ENTRY_SIZE;
        uint64_t h = ph_tab_hash(ph_tab_get32(er + 8), ph_tab_get32(er + 12), ph_tab_str(t, er),
                                 ph_tab_get32(er + 4));
        const slot_info *w = &where[e];
        const uint8_t *s = t->slots + (size_t)w->slot * PH_TAB_SLOT_SIZE;
        if ((uint32_t)(h >> 32) != ph_tab_get32(s + PH_TAB_SLOT_TAG) ||
            ((w->slot - (uint32_t)h) & mask) >= w->run)
            st = BAD((size_t)(er - t->bytes), "entry %u is not where its hash leads", e);
        else if (!slot_copies_entry(t, s, er))
            st = BAD((size_t)(s - t->bytes), "slot %u does not match entry %u", w->slot, e);
    }
    free(where);
    free(seen);
    return st;
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
    st = verify_lists(t, diag);
    if (st == PH_OK)
        st = verify_slots(t, diag);
    return st;
}
