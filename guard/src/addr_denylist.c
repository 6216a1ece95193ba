/*
 * addr_denylist.c - classifying an address against the fixed denylist
 * (pinhole/addr.h; the blocks themselves are in addr_blocks.c).
 *
 * Speed matters (every resolved address of every request, >= 20 M/s): on
 * first use the table is indexed by the address's first byte, each bucket
 * listing the blocks that can contain such addresses, most specific first.
 * Blocks are nested or disjoint, so the first match is the most specific
 * block. Most public addresses land in an empty bucket and are decided
 * after one load.
 */
#include "pinhole/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#include "addr-int.h"
#include "pinhole/diag.h"

/* Longest bucket; checked when indexing (a longer one would be a table bug
 * caught by test_addr_table, and the lookup then denies everything). */
#define BUCKET_MAX 24

typedef struct v4_mask {
    uint32_t net, mask;
} v4_mask;

typedef struct v6_mask {
    uint64_t net_hi, net_lo, mask_hi, mask_lo;
} v6_mask;

typedef struct bucket {
    uint8_t n;
    uint8_t block[BUCKET_MAX]; /* indexes into ph_addr_blocks */
} bucket;

static struct {
    bucket v4[256], v6[256];
    v4_mask m4[256];
    v6_mask m6[256];
    size_t loopback_v4, loopback_v6; /* exempted blocks in test builds */
    bool broken;                     /* the table could not be indexed */
} idx;

static pthread_once_t idx_once = PTHREAD_ONCE_INIT;

static uint32_t load_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t load_be64(const uint8_t *p)
{
    return (uint64_t)load_be32(p) << 32 | load_be32(p + 4);
}

/* Mask of the first `bits` (0..64) bits of a 64-bit word. */
static uint64_t mask64(unsigned bits)
{
    return bits == 0 ? 0 : bits >= 64 ? ~(uint64_t)0 : ~(uint64_t)0 << (64 - bits);
}

static void bucket_add(bucket *b, size_t block)
{
    if (b->n == BUCKET_MAX || block > UINT8_MAX) {
        idx.broken = true;
        return;
    }
    /* Insert keeping longer prefixes first. */
    size_t i = b->n++;
    while (i > 0 && ph_addr_blocks[b->block[i - 1]].prefix_len < ph_addr_blocks[block].prefix_len) {
        b->block[i] = b->block[i - 1];
        i--;
    }
    b->block[i] = (uint8_t)block;
}

static void build_index(void)
{
    idx.loopback_v4 = idx.loopback_v6 = SIZE_MAX;
    if (ph_addr_blocks_len > 256) {
        idx.broken = true;
        return;
    }
    for (size_t i = 0; i < ph_addr_blocks_len; i++) {
        const ph_addr_block *b = &ph_addr_blocks[i];
        unsigned first_bits = b->prefix_len < 8 ? b->prefix_len : 8;
        unsigned span = 1u << (8 - first_bits); /* first bytes the block covers */
        unsigned lo = b->addr[0] & (0xffu << (8 - first_bits) & 0xffu);
        if (b->family == AF_INET) {
            idx.m4[i].mask = b->prefix_len == 0 ? 0 : ~(uint32_t)0 << (32 - b->prefix_len);
            idx.m4[i].net = load_be32(b->addr) & idx.m4[i].mask;
            for (unsigned f = lo; f < lo + span; f++)
                bucket_add(&idx.v4[f], i);
            if (b->prefix_len == 8 && b->addr[0] == 127)
                idx.loopback_v4 = i;
        } else {
            unsigned len = b->prefix_len;
            idx.m6[i].mask_hi = mask64(len > 64 ? 64 : len);
            idx.m6[i].mask_lo = mask64(len > 64 ? len - 64 : 0);
            idx.m6[i].net_hi = load_be64(b->addr) & idx.m6[i].mask_hi;
            idx.m6[i].net_lo = load_be64(b->addr + 8) & idx.m6[i].mask_lo;
            for (unsigned f = lo; f < lo + span; f++)
                bucket_add(&idx.v6[f], i);
            static const uint8_t one[16] = {[15] = 1};
            if (len == 128 && memcmp(b->addr, one, 16) == 0)
                idx.loopback_v6 = i;
        }
    }
}

bool ph_build_is_test_loopback(void)
{
#ifdef PINHOLE_TEST_LOOPBACK_UPSTREAM
    return true;
#else
    return false;
#endif
}

/* Turns the block hit (or none) into the verdict and status. */
static ph_status verdict(size_t hit, size_t exempt, ph_addr_verdict *out)
{
    out->loopback_exempt = false;
    if (hit == SIZE_MAX) {
        out->reason = PH_REASON_ALLOWED;
        out->block = NULL;
        return PH_OK;
    }
    out->block = &ph_addr_blocks[hit];
    if (ph_build_is_test_loopback() && hit == exempt) {
        out->reason = PH_REASON_ALLOWED;
        out->loopback_exempt = true;
        return PH_OK;
    }
    out->reason = PH_REASON_DENIED_ADDRESS;
    return PH_E_DENIED;
}

static ph_status deny_unindexed(ph_addr_verdict *out)
{
    /* Fail closed: a table we could not index denies everything. */
    out->reason = PH_REASON_DENIED_ADDRESS;
    out->block = NULL;
    out->loopback_exempt = false;
    return PH_E_DENIED;
}

ph_status ph_addr_classify_v4(const uint8_t addr[static 4], ph_addr_verdict *out)
{
    pthread_once(&idx_once, build_index);
    if (idx.broken)
        return deny_unindexed(out);
    const bucket *b = &idx.v4[addr[0]];
    size_t hit = SIZE_MAX;
    if (b->n > 0) {
        uint32_t a = load_be32(addr);
        for (unsigned i = 0; i < b->n; i++) {
            const v4_mask *m = &idx.m4[b->block[i]];
            if ((a & m->mask) == m->net) {
                hit = b->block[i];
                break;
            }
        }
    }
    return verdict(hit, idx.loopback_v4, out);
}

ph_status ph_addr_classify_v6(const uint8_t addr[static 16], ph_addr_verdict *out)
{
    pthread_once(&idx_once, build_index);
    if (idx.broken)
        return deny_unindexed(out);
    const bucket *b = &idx.v6[addr[0]];
    size_t hit = SIZE_MAX;
    if (b->n > 0) {
        uint64_t hi = load_be64(addr), lo = load_be64(addr + 8);
        for (unsigned i = 0; i < b->n; i++) {
            const v6_mask *m = &idx.m6[b->block[i]];
            if ((hi & m->mask_hi) == m->net_hi && (lo & m->mask_lo) == m->net_lo) {
                hit = b->block[i];
                break;
            }
        }
    }
    return verdict(hit, idx.loopback_v6, out);
}

ph_status ph_addr_classify(const struct sockaddr *sa, socklen_t len, ph_addr_verdict *out)
{
    ph_addr_verdict dummy;
    if (out == NULL)
        out = &dummy; /* still classify: the status alone is the answer */
    if (sa != NULL && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return ph_addr_classify_v4((const uint8_t *)&in->sin_addr, out);
    }
    if (sa != NULL && sa->sa_family == AF_INET6 &&
        len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        return ph_addr_classify_v6(in6->sin6_addr.s6_addr, out);
    }
    deny_unindexed(out);
    return PH_E_INVAL;
}

ph_status ph_addr_parse_and_classify(const char *text, ph_addr *addr, ph_addr_verdict *out,
                                     ph_diag *diag)
{
    ph_addr dummy_addr;
    ph_addr_verdict dummy_verdict;
    if (addr == NULL)
        addr = &dummy_addr;
    if (out == NULL)
        out = &dummy_verdict;
    memset(addr, 0, sizeof *addr);
    deny_unindexed(out);
    if (text == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no address");
    size_t n = strlen(text);
    const char *p = text;
    if (n >= 2 && text[0] == '[' && text[n - 1] == ']') {
        p = text + 1;
        n -= 2;
    }
    char buf[INET6_ADDRSTRLEN];
    if (n == 0 || n >= sizeof buf)
        return ph_diag_set(diag, PH_E_INVAL, 0, "not an IPv4 or IPv6 address");
    memcpy(buf, p, n);
    buf[n] = '\0';
    if (memchr(buf, '%', n) != NULL)
        return ph_diag_set(diag, PH_E_INVAL, (size_t)((const char *)memchr(buf, '%', n) - buf) +
                                                 (size_t)(p - text),
                           "zone identifiers are not accepted");
    if (inet_pton(AF_INET, buf, addr->bytes) == 1) {
        addr->family = AF_INET;
        return ph_addr_classify_v4(addr->bytes, out);
    }
    if (inet_pton(AF_INET6, buf, addr->bytes) == 1) {
        addr->family = AF_INET6;
        return ph_addr_classify_v6(addr->bytes, out);
    }
    return ph_diag_set(diag, PH_E_INVAL, 0,
                       "not an IPv4 (dotted quad) or IPv6 address");
}

size_t ph_addr_block_count(void)
{
    return ph_addr_blocks_len;
}

const ph_addr_block *ph_addr_block_at(size_t i)
{
    return i < ph_addr_blocks_len ? &ph_addr_blocks[i] : NULL;
}
