/*
 * table_checksum.c - the table file checksum (table_format.h): CRC-32C of
 * each PH_TAB_CRC_BLOCK-byte block, then CRC-32C of the block values. The
 * compiler and the reader both call this file, so they cannot disagree.
 *
 * Why CRC-32C in blocks: the checksum guards against accidental damage
 * (structural verification guards against hostile content), and verifying
 * a large table is bound by how fast it is summed. One CRC chain waits three
 * cycles per eight bytes for the previous step; four independent blocks
 * keep four chains in flight, so the SSE 4.2 instruction runs at its full
 * rate. The portable path (a byte table) gives the same values.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "table_format.h"

#define POLY 0x82f63b78u /* CRC-32C, reflected */

static uint32_t crc_table[256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        crc_table[i] = c;
    }
}

/* The raw CRC state (no pre/post inversion) advanced over p[0..n). */
static uint32_t raw_portable(uint32_t c, const uint8_t *p, size_t n)
{
    pthread_once(&crc_table_once, crc_table_init);
    for (size_t i = 0; i < n; i++)
        c = crc_table[(c ^ p[i]) & 0xffu] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_HW 1

__attribute__((target("sse4.2"))) static uint32_t raw_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = _mm_crc32_u64(c64, w);
    }
    c = (uint32_t)c64;
    for (; n > 0; p++, n--)
        c = _mm_crc32_u8(c, *p);
    return c;
}

/* Four whole blocks at p, one chain each (raw states from ~0). */
__attribute__((target("sse4.2"))) static void blocks4_hw(const uint8_t *p, uint32_t out[4])
{
    uint64_t a = 0xffffffffu, b = a, c = a, d = a;
    const uint8_t *q1 = p + PH_TAB_CRC_BLOCK, *q2 = q1 + PH_TAB_CRC_BLOCK,
                  *q3 = q2 + PH_TAB_CRC_BLOCK;
    for (size_t i = 0; i < PH_TAB_CRC_BLOCK; i += 8) {
        uint64_t w0, w1, w2, w3;
        memcpy(&w0, p + i, 8);
        memcpy(&w1, q1 + i, 8);
        memcpy(&w2, q2 + i, 8);
        memcpy(&w3, q3 + i, 8);
        a = _mm_crc32_u64(a, w0);
        b = _mm_crc32_u64(b, w1);
        c = _mm_crc32_u64(c, w2);
        d = _mm_crc32_u64(d, w3);
    }
    out[0] = ~(uint32_t)a;
    out[1] = ~(uint32_t)b;
    out[2] = ~(uint32_t)c;
    out[3] = ~(uint32_t)d;
}

static int have_hw(void)
{
    static int cached = -1; /* benign: every thread computes the same value */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        v = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
}
#else
#define HAVE_HW 0
#endif

static uint32_t raw(uint32_t c, const uint8_t *p, size_t n)
{
#if HAVE_HW
    if (have_hw())
        return raw_hw(c, p, n);
#endif
    return raw_portable(c, p, n);
}

uint32_t ph_tab_crc32c(uint32_t crc, const void *p, size_t n)
{
    return ~raw(~crc, p, n);
}

uint32_t ph_tab_crc32c_portable(uint32_t crc, const void *p, size_t n)
{
    return ~raw_portable(~crc, p, n);
}

/* The CRC-32C of the block [at, at + n) of the image, the checksum field
 * read as zero (it lies in block 0). */
static uint32_t block_crc(const uint8_t *image, size_t at, size_t n)
{
    if (at >= PH_TAB_OFF_CHECKSUM + PH_TAB_CHECKSUM_LEN || at + n <= PH_TAB_OFF_CHECKSUM)
        return ~raw(0xffffffffu, image + at, n);
    static const uint8_t zero[PH_TAB_CHECKSUM_LEN];
    size_t a = PH_TAB_OFF_CHECKSUM - at, b = a + PH_TAB_CHECKSUM_LEN;
    uint32_t c = raw(0xffffffffu, image + at, a);
    c = raw(c, zero, n < b ? n - a : PH_TAB_CHECKSUM_LEN);
    if (n > b)
        c = raw(c, image + at + b, n - b);
    return ~c;
}

static void absorb(ph_tab_crc *c, uint32_t block)
{
    uint8_t le[4];
    ph_tab_put32(le, block);
    c->acc = raw(c->acc, le, sizeof le);
}

void ph_tab_crc_init(ph_tab_crc *c)
{
    c->acc = 0xffffffffu;
    c->done = 0;
}

void ph_tab_crc_feed(ph_tab_crc *c, const uint8_t *image, size_t avail, int last)
{
    /* Block 0 holds the checksum field: summed on its own. */
    if (c->done == 0 && (avail >= PH_TAB_CRC_BLOCK || (last && avail > 0))) {
        size_t n = avail < PH_TAB_CRC_BLOCK ? avail : PH_TAB_CRC_BLOCK;
        absorb(c, block_crc(image, 0, n));
        c->done = n;
    }
#if HAVE_HW
    if (have_hw()) {
        while (c->done > 0 && avail - c->done >= 4 * (size_t)PH_TAB_CRC_BLOCK) {
            uint32_t v[4];
            blocks4_hw(image + c->done, v);
            for (int i = 0; i < 4; i++)
                absorb(c, v[i]);
            c->done += 4 * (size_t)PH_TAB_CRC_BLOCK;
        }
    }
#endif
    while (c->done > 0 && avail - c->done >= PH_TAB_CRC_BLOCK) {
        absorb(c, block_crc(image, c->done, PH_TAB_CRC_BLOCK));
        c->done += PH_TAB_CRC_BLOCK;
    }
    if (last && c->done > 0 && avail > c->done) {
        absorb(c, block_crc(image, c->done, avail - c->done));
        c->done = avail;
    }
}

uint32_t ph_tab_crc_final(const ph_tab_crc *c)
{
    return ~c->acc;
}

uint32_t ph_tab_checksum(const uint8_t *image, size_t len)
{
    ph_tab_crc c;
    ph_tab_crc_init(&c);
    ph_tab_crc_feed(&c, image, len, 1);
    return ph_tab_crc_final(&c);
}
