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
#include <string.h>

/* 0x89 is not valid UTF-8, so no YAML file (and no text file) starts with the
 * magic; "\r\n" catches text-mode transfer damage, as in PNG. */
#define PH_TAB_MAGIC "\x89PHTAB\r\n"
#define PH_TAB_MAGIC_LEN 8
/* Version 2: 24-byte hash slots carrying the entry's lookup fields inline
 * (version 1 had 8-byte buckets pointing at entries). */
#define PH_TAB_VERSION 2u

/* Header field offsets. */
#define PH_TAB_OFF_MAGIC 0
#define PH_TAB_OFF_VERSION 8        /* u32 = PH_TAB_VERSION */
#define PH_TAB_OFF_HEADER_SIZE 12   /* u32 = PH_TAB_HEADER_SIZE */
#define PH_TAB_OFF_FILE_SIZE 16     /* u64 = the whole file */
#define PH_TAB_OFF_SECTION_COUNT 24 /* u32 = PH_TAB_SECTION_COUNT */
#define PH_TAB_OFF_FLAGS 28         /* u32 = 0 (no flags defined in v1) */
#define PH_TAB_OFF_POLICY_ID 32     /* 32 bytes: SHA-256 of the canonical policy */
#define PH_TAB_OFF_CHECKSUM 64      /* 32 bytes: SHA-256 of the file minus this field */
#define PH_TAB_HEADER_SIZE 96u
#define PH_TAB_ID_LEN 32u
#define PH_TAB_CHECKSUM_LEN 32u

/* Section directory entry: u32 id, u32 count (records), u64 offset, u64 size
 * (bytes = count * record size of the section). */
#define PH_TAB_DIRENT_SIZE 24u
#define PH_TAB_ALIGN 64u

enum ph_tab_section {
    PH_TAB_SEC_STRINGS = 1,    /* bytes; every string NUL-terminated */
    PH_TAB_SEC_LISTS = 2,      /* lists sorted by name */
    PH_TAB_SEC_RULES = 3,      /* flattened rules, grouped by list, canonical order */
    PH_TAB_SEC_RULE_PORTS = 4, /* each rule's own ports, sorted and merged */
    PH_TAB_SEC_ENTRIES = 5,    /* (list, kind, host) lookup keys, grouped by list */
    PH_TAB_SEC_RANGES = 6,     /* each entry's port ranges with the winning rule */
    PH_TAB_SEC_SLOTS = 7,      /* open-addressing hash index over ENTRIES */
};
#define PH_TAB_SECTION_COUNT 7u

/* LISTS record: name str(8) | u32 rule_first | u32 rule_count
 *             | u32 entry_first | u32 entry_count */
#define PH_TAB_LIST_SIZE 24u
/* RULES record: host str (as written, "*.x.y" for wildcards) | file str
 *             | reason str (length 0 and offset 0: no reason) | u32 line
 *             | u32 list | u32 port_first | u32 port_count */
#define PH_TAB_RULE_SIZE 40u
/* RULE_PORTS record: u16 lo | u16 hi */
#define PH_TAB_PORT_SIZE 4u
/* ENTRIES record: host str (the base name of a wildcard) | u32 list | u32 kind
 *               | u32 range_first | u32 range_count */
#define PH_TAB_ENTRY_SIZE 24u
#define PH_TAB_KIND_EXACT 0u
#define PH_TAB_KIND_WILDCARD 1u /* host is the parent of every name it matches */
/* RANGES record: u16 lo | u16 hi | u32 rule (index into RULES) */
#define PH_TAB_RANGE_SIZE 8u
/* SLOTS record (24 bytes): the hash index over ENTRIES, carrying a copy of
 * what a lookup needs, so that a miss reads one cache line (rarely two) and
 * a hit on the entry's first port range reads the slot, then its host
 * string and its rule in parallel:
 *   u32 entry+1 (0 = empty; an empty slot is all zero) | u32 tag (high half
 *   of the hash) | u32 host offset | u16 host length | u8 kind | u8 zero
 *   | u16 lo | u16 hi | u32 rule (the entry's first range)
 * Every copied field equals the entry's (verified). The slot count is the
 * smallest power of two above twice the entry count (load < 1/2, so every
 * probe sequence meets an empty slot); linear probing from hash & (n-1). */
#define PH_TAB_SLOT_SIZE 24u
#define PH_TAB_SLOT_ENTRY 0
#define PH_TAB_SLOT_TAG 4
#define PH_TAB_SLOT_HOST_OFF 8
#define PH_TAB_SLOT_HOST_LEN 12
#define PH_TAB_SLOT_KIND 14
#define PH_TAB_SLOT_ZERO 15
#define PH_TAB_SLOT_LO 16
#define PH_TAB_SLOT_HI 18
#define PH_TAB_SLOT_RULE 20

/* The one slot count for n entries: the smallest power of two above 2n. */
static inline uint64_t ph_tab_slot_count(uint64_t nentries)
{
    uint64_t n = 2;
    while (n < 2 * nentries + 1)
        n *= 2;
    return n;
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
/* Eight bytes at p as a little-endian word (compilers make this one load). */
static inline uint64_t ph_tab_word(const unsigned char *p)
{
    uint64_t w = 0;
    for (int i = 0; i < 8; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
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
    case PH_TAB_SEC_SLOTS: return PH_TAB_SLOT_SIZE;
    default: return 0;
    }
}

/* Where the directory ends (the first section starts at the next
 * PH_TAB_ALIGN boundary). */
#define PH_TAB_FIRST_SECTION (PH_TAB_HEADER_SIZE + PH_TAB_SECTION_COUNT * PH_TAB_DIRENT_SIZE)

#endif /* PINHOLE_TABLE_FORMAT_H */
