/*
 * table_format.h - THE definition of the compiled allowlist table on disk
 * (docs/table-format.md explains it for humans). policyc's compiler writes it,
 * guard's reader verifies and reads it; both include this header, so the two
 * can never disagree about an offset.
 *
 * Everything is little-endian and written field by field (never a struct
 * dump), so the bytes do not depend on the compiler, the ABI or padding.
 *
 *   header (PH_TAB_HEADER_SIZE bytes)
 *   section directory (PH_TAB_SECTION_COUNT entries of PH_TAB_DIRENT_SIZE)
 *   sections, in id order, each starting at the next 64-byte (cache-line)
 *   boundary after the previous one; padding bytes are zero; the last
 *   section ends the file.
 *
 * A string reference is (u32 offset, u32 length) into the STRINGS section;
 * the byte at offset+length is NUL and the referenced bytes contain no NUL,
 * so the reader can hand out C strings without copying.
 */
#ifndef PINHOLE_TABLE_FORMAT_H
#define PINHOLE_TABLE_FORMAT_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* 0x89 is not valid UTF-8, so no YAML file (and no text file) starts with the
 * magic; "\r\n" catches text-mode transfer damage, as in PNG. */
#define PH_TAB_MAGIC "\x89PHTAB\r\n"
#define PH_TAB_MAGIC_LEN 8
/* Version 6: 64-byte entries carrying their first port range, its rule's
 * provenance and protocol and the start of their host, stored at their hash
 * slots (linear probing) beside a byte array of their tags, the
 * destinations' order in a section of their own, a CRC-32C file checksum,
 * and each rule's protocol (what a CONNECT tunnel may carry). Older versions
 * are refused (recompile the policy): a version 5 table reaches its entries
 * through an index of groups, a version 3 table has no protocol. */
#define PH_TAB_VERSION 6u

/* Header field offsets. */
#define PH_TAB_OFF_MAGIC 0
#define PH_TAB_OFF_VERSION 8        /* u32 = PH_TAB_VERSION */
#define PH_TAB_OFF_HEADER_SIZE 12   /* u32 = PH_TAB_HEADER_SIZE */
#define PH_TAB_OFF_FILE_SIZE 16     /* u64 = the whole file */
#define PH_TAB_OFF_SECTION_COUNT 24 /* u32 = PH_TAB_SECTION_COUNT */
#define PH_TAB_OFF_FLAGS 28         /* u32 = 0 (no flags defined) */
#define PH_TAB_OFF_POLICY_ID 32     /* 32 bytes: SHA-256 of the canonical policy */
#define PH_TAB_OFF_CHECKSUM 64      /* u32: ph_tab_checksum() of the file */
#define PH_TAB_OFF_RESERVED 68      /* 28 bytes, zero */
#define PH_TAB_HEADER_SIZE 96u
#define PH_TAB_ID_LEN 32u
#define PH_TAB_CHECKSUM_LEN 4u
#define PH_TAB_RESERVED_LEN 28u

/* Section directory entry: u32 id, u32 count (records), u64 offset, u64 size
 * (bytes = count * record size of the section). */
#define PH_TAB_DIRENT_SIZE 24u
#define PH_TAB_DIRENT_ID 0     /* u32 */
#define PH_TAB_DIRENT_COUNT 4  /* u32 */
#define PH_TAB_DIRENT_OFFSET 8 /* u64 */
#define PH_TAB_DIRENT_BYTES 16 /* u64 */
#define PH_TAB_ALIGN 64u

enum ph_tab_section {
    PH_TAB_SEC_STRINGS = 1,    /* bytes; every string NUL-terminated */
    PH_TAB_SEC_LISTS = 2,      /* lists sorted by name */
    PH_TAB_SEC_RULES = 3,      /* flattened rules, grouped by list, canonical order */
    PH_TAB_SEC_RULE_PORTS = 4, /* each rule's own ports, sorted and merged */
    PH_TAB_SEC_ENTRIES = 5,    /* (list, kind, host) lookup keys at their hash slots */
    PH_TAB_SEC_RANGES = 6,     /* each entry's port ranges with the winning rule */
    PH_TAB_SEC_TAGS = 7,       /* the tag of each ENTRIES slot (0: empty) */
    PH_TAB_SEC_ORDER = 8,      /* u32: each destination's slot, grouped by list */
};
#define PH_TAB_SECTION_COUNT 8u

/* A string reference (8 bytes): u32 offset into STRINGS, u32 length. */
#define PH_TAB_STR_OFF 0
#define PH_TAB_STR_LEN 4
#define PH_TAB_STR_SIZE 8u

/* LISTS record (24 bytes); its entry range is a range of ORDER (the list's
 * destinations, in canonical order). */
#define PH_TAB_LIST_SIZE 24u
#define PH_TAB_LIST_NAME 0         /* str */
#define PH_TAB_LIST_RULE_FIRST 8   /* u32 */
#define PH_TAB_LIST_RULE_COUNT 12  /* u32 */
#define PH_TAB_LIST_ENTRY_FIRST 16 /* u32 */
#define PH_TAB_LIST_ENTRY_COUNT 20 /* u32 */

/* RULES record (48 bytes). */
#define PH_TAB_RULE_SIZE 48u
#define PH_TAB_RULE_HOST 0        /* str, as written ("*.x.y" for wildcards) */
#define PH_TAB_RULE_FILE 8        /* str, source base name */
#define PH_TAB_RULE_REASON 16     /* str; offset 0 and length 0: no reason */
#define PH_TAB_RULE_LINE 24       /* u32, >= 1 */
#define PH_TAB_RULE_LIST 28       /* u32, the list it is filed under */
#define PH_TAB_RULE_PORT_FIRST 32 /* u32, into RULE_PORTS */
#define PH_TAB_RULE_PORT_COUNT 36 /* u32, >= 1 */
#define PH_TAB_RULE_PROTOCOL 40   /* u8: PH_TAB_PROTO_* (pinhole/table.h ph_protocol) */
#define PH_TAB_RULE_ZERO 41       /* 7 zero bytes */
#define PH_TAB_RULE_ZERO_LEN 7u
#define PH_TAB_PROTO_DEFAULT 0u   /* TLS or HTTP/1, inspected */
#define PH_TAB_PROTO_TLS 1u
#define PH_TAB_PROTO_HTTP 2u
#define PH_TAB_PROTO_TCP 3u       /* not inspected; an exact host only */
#define PH_TAB_PROTO_MAX 3u

/* Where a protocol sorts among a host's rules: the strictest first (tls,
 * http, the default, tcp), so where rules of one list allow the same host
 * and port with different protocols, the rule that wins the port (the
 * canonically first: RANGES) is the strictest. */
static inline unsigned ph_tab_proto_rank(unsigned proto)
{
    return proto == PH_TAB_PROTO_TLS ? 0u : proto == PH_TAB_PROTO_HTTP ? 1u
                                          : proto == PH_TAB_PROTO_DEFAULT ? 2u : 3u;
}

/* RULE_PORTS record (4 bytes). */
#define PH_TAB_PORT_SIZE 4u
#define PH_TAB_PORT_LO 0 /* u16 */
#define PH_TAB_PORT_HI 2 /* u16 */

/* ENTRIES record (64 bytes, so with 64-byte sections one cache line): what a
 * lookup hit on the entry's first port range reads, all in one line: the
 * first range, the provenance and protocol of its rule (copies of that
 * rule's fields, so the hit reads no RULES record: spread over a large
 * table that would be one more cache miss after the entry's) and the first
 * PH_TAB_ENTRY_PREFIX_LEN bytes of the host (zero-padded), so a name of up
 * to that length is compared without reading STRINGS. The host is the string of the entry's rules (the
 * same bytes; a wildcard's base is its rules' host after "*."). */
#define PH_TAB_ENTRY_SIZE 64u
#define PH_TAB_ENTRY_HOST_OFF 0     /* u32, into STRINGS */
#define PH_TAB_ENTRY_HOST_LEN 4     /* u8 (a host is at most 253 bytes) */
#define PH_TAB_ENTRY_KIND 5         /* u8: PH_TAB_KIND_* */
#define PH_TAB_ENTRY_LIST 6         /* u16 */
#define PH_TAB_ENTRY_RANGE_FIRST 8  /* u32, into RANGES */
#define PH_TAB_ENTRY_RANGE_COUNT 12 /* u16, >= 1 (disjoint ranges of 16-bit ports) */
#define PH_TAB_ENTRY_RULE_NPORTS 14 /* u16, copy of the first range's rule's port count */
#define PH_TAB_ENTRY_FIRST_LO 16    /* u16, copy of the first range */
#define PH_TAB_ENTRY_FIRST_HI 18    /* u16 */
#define PH_TAB_ENTRY_FIRST_RULE 20  /* u32 */
#define PH_TAB_ENTRY_RULE_FILE 24   /* u32, copy of that rule's file string offset */
#define PH_TAB_ENTRY_RULE_REASON 28 /* u32, copy of its reason offset (0: none) */
#define PH_TAB_ENTRY_RULE_LINE 32   /* u32, copy of its line */
#define PH_TAB_ENTRY_PREFIX 36      /* the host's first bytes, zero-padded */
#define PH_TAB_ENTRY_PREFIX_LEN 27u
#define PH_TAB_ENTRY_PROTOCOL 63    /* u8, copy of that rule's protocol */
#define PH_TAB_KIND_EXACT 0u
#define PH_TAB_KIND_WILDCARD 1u /* host is the parent of every name it matches */

/* RANGES record (8 bytes). */
#define PH_TAB_RANGE_SIZE 8u
#define PH_TAB_RANGE_LO 0   /* u16 */
#define PH_TAB_RANGE_HI 2   /* u16 */
#define PH_TAB_RANGE_RULE 4 /* u32, into RULES */

/* The hash index is ENTRIES itself, SwissTable style but flat: an entry
 * lives at the first free slot from its home slot on (linear probing, entries
 * inserted in destination order), and TAGS holds a one-byte tag per slot, so
 * one 16-byte compare tells which of 16 slots may hold a name and where its
 * cluster ends (the first empty slot). A lookup knows the addresses of the
 * home slot's entry and tags from the hash alone and fetches both at once:
 * a hit at its home slot waits for memory once. An empty slot is all zero
 * (tag and entry). Slots [0, homes) are home slots; the slots after them hold
 * the clusters that run past the last home slot and end with
 * PH_TAB_SLOT_CHUNK empty slots, so a lookup reading PH_TAB_SLOT_CHUNK tags
 * at a time from any home slot finds an empty slot before the end. */
#define PH_TAB_TAG_SIZE 1u
#define PH_TAB_ORDER_SIZE 4u
#define PH_TAB_SLOT_CHUNK 16u

/* The one number of home slots for n entries: at most seven tenths full (a
 * hit is mostly at its home slot or the next, a miss's cluster mostly
 * within one 16-tag compare). */
static inline uint64_t ph_tab_home_count(uint64_t nentries)
{
    return nentries + nentries * 3 / 7 + 1;
}

/* The home slot of hash h among homes slots (homes < 2^32): the low 32 bits
 * scaled, so any slot count works; the tag comes from the top bits. */
static inline uint32_t ph_tab_home(uint64_t h, uint32_t homes)
{
    return (uint32_t)(((h & 0xffffffffu) * (uint64_t)homes) >> 32);
}

/* A slot's tag: the top 8 bits of the hash, never 0 (0 marks an empty
 * slot). */
static inline uint8_t ph_tab_tag(uint64_t h)
{
    uint8_t t = (uint8_t)(h >> 56);
    return t != 0 ? t : 1;
}

/* Size limits the reader enforces (the compiler stays well inside them). */
#define PH_TAB_MAX_FILE_SIZE ((uint64_t)2 << 30) /* 2 GiB */
#define PH_TAB_MAX_NAME 253u                     /* list names and hosts */
#define PH_TAB_MAX_TEXT 4096u                    /* reasons and file names */

/* The lookup hash: fixed constants (no per-process seed), so compiling twice
 * gives the same bytes. It mixes the list index, the kind and the host eight
 * bytes at a time (little-endian words, the last one zero-padded) with a
 * multiply-xorshift round, then a final avalanche. Queried names cannot
 * lengthen a probe beyond the longest cluster the compiler laid out, and the
 * reader verifies every entry is reachable, so the hash only affects speed. */
#define PH_TAB_HASH_K1 0x9e3779b97f4a7c15ull
#define PH_TAB_HASH_K2 0xbf58476d1ce4e5b9ull
#define PH_TAB_HASH_K3 0x94d049bb133111ebull
static inline uint64_t ph_tab_hash_round(uint64_t h, uint64_t w)
{
    h = (h ^ w) * PH_TAB_HASH_K2;
    return h ^ (h >> 31);
}
/* Eight bytes at p as a little-endian word: one load on a little-endian
 * host (compilers do not merge the byte loop into one: it cost most of a
 * lookup's instructions), the bytes assembled elsewhere; the same value. */
static inline uint64_t ph_tab_word(const unsigned char *p)
{
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
#else
    uint64_t w = 0;
    for (int i = 0; i < 8; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
#endif
}
static inline uint64_t ph_tab_hash(uint32_t list, uint32_t kind, const char *host, size_t len)
{
    uint64_t h = PH_TAB_HASH_K1 ^ ((uint64_t)list << 8) ^ (uint64_t)(kind & 0xffu) ^
                 ((uint64_t)len << 40);
    const unsigned char *p = (const unsigned char *)host, *end = p + len;
    for (; end - p >= 8; p += 8)
        h = ph_tab_hash_round(h, ph_tab_word(p));
    size_t rest = (size_t)(end - p);
    if (rest > 0 && len >= 8) {
        /* The last word zero-padded, read as the eight bytes ending the name
         * shifted down: one load instead of a byte loop, same value. */
        h = ph_tab_hash_round(h, ph_tab_word(end - 8) >> (8 * (8 - rest)));
    } else if (rest > 0) {
        uint64_t w = 0;
        for (size_t i = 0; i < rest; i++)
            w |= (uint64_t)p[i] << (8 * i);
        h = ph_tab_hash_round(h, w);
    }
    h ^= h >> 30;
    h *= PH_TAB_HASH_K3;
    return h ^ (h >> 31);
}

/* Explicit little-endian access, independent of host byte order and alignment. */
static inline uint16_t ph_tab_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t ph_tab_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t ph_tab_get64(const uint8_t *p)
{
    return (uint64_t)ph_tab_get32(p) | ((uint64_t)ph_tab_get32(p + 4) << 32);
}
static inline void ph_tab_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ph_tab_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ph_tab_put64(uint8_t *p, uint64_t v)
{
    ph_tab_put32(p, (uint32_t)v);
    ph_tab_put32(p + 4, (uint32_t)(v >> 32));
}

/* The file checksum, for integrity against accidental damage (what a
 * malicious file could do is bounded by the structural verification, not by
 * the checksum): CRC-32C (Castagnoli) of each PH_TAB_CRC_BLOCK-byte block of
 * the file (the last one shorter) with the checksum field read as zero, then
 * CRC-32C of those block values as u32 little-endian, in order. Blocks are
 * independent, so four are computed at once (with SSE 4.2 where the CPU has
 * it, a table otherwise: the same value). The writer and the reader both
 * call these (table_checksum.c). ph_tab_crc_feed absorbs the whole blocks of
 * image[c->done, avail) (image is the start of the table, avail how many of
 * its bytes are present), and with last the final short block too, so a
 * reader can checksum each chunk it reads while the chunk is in cache. */
#define PH_TAB_CRC_BLOCK 16384u
typedef struct ph_tab_crc {
    uint32_t acc;  /* running CRC-32C state over the block values */
    size_t done;   /* bytes of the image absorbed */
} ph_tab_crc;
void ph_tab_crc_init(ph_tab_crc *c);
void ph_tab_crc_feed(ph_tab_crc *c, const uint8_t *image, size_t avail, int last);
uint32_t ph_tab_crc_final(const ph_tab_crc *c);
uint32_t ph_tab_checksum(const uint8_t *image, size_t len);
/* Standard CRC-32C of p[0..n) continuing crc (0 to start), by the fastest
 * path and by the portable table (tests compare the two). */
uint32_t ph_tab_crc32c(uint32_t crc, const void *p, size_t n);
uint32_t ph_tab_crc32c_portable(uint32_t crc, const void *p, size_t n);

/* Record size of each section, indexed by section id (0 unused). */
static inline uint32_t ph_tab_record_size(uint32_t id)
{
    switch (id) {
    case PH_TAB_SEC_STRINGS: return 1;
    case PH_TAB_SEC_LISTS: return PH_TAB_LIST_SIZE;
    case PH_TAB_SEC_RULES: return PH_TAB_RULE_SIZE;
    case PH_TAB_SEC_RULE_PORTS: return PH_TAB_PORT_SIZE;
    case PH_TAB_SEC_ENTRIES: return PH_TAB_ENTRY_SIZE;
    case PH_TAB_SEC_RANGES: return PH_TAB_RANGE_SIZE;
    case PH_TAB_SEC_TAGS: return PH_TAB_TAG_SIZE;
    case PH_TAB_SEC_ORDER: return PH_TAB_ORDER_SIZE;
    default: return 0;
    }
}

/* Where the directory ends (the first section starts at the next
 * PH_TAB_ALIGN boundary). */
#define PH_TAB_FIRST_SECTION (PH_TAB_HEADER_SIZE + PH_TAB_SECTION_COUNT * PH_TAB_DIRENT_SIZE)

#endif /* PINHOLE_TABLE_FORMAT_H */
