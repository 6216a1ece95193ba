/* limits.c - connection slots: overall (one atomic, capped by what the
 * descriptor limit allows, shared with the relay's splice pipes),
 * connections still sending their request head (one atomic), and per key:
 * per lease (tenant+lease, from the grant), per peer (who connected) and
 * per peer in the head phase. Keyed slots live in small locked tables,
 * bounded: a key not in its table when its probe window is full is refused,
 * which fails closed rather than growing without limit. A slot's place
 * comes from a keyed hash (SipHash-2-4 under a key drawn at start): peer
 * keys are chosen by clients (a source address), and with a hash they could
 * compute, PROBE_WINDOW connections from addresses that land in another
 * peer's window would refuse that peer every connection. */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <time.h>

#include "pinhole/clock.h"
#include "proxy_limits.h"

#define KEY_SLOTS 8192 /* distinct leases (or peers) with connections at once */

static atomic_long g_active, g_heads, g_pipes, g_fd_cap = LONG_MAX;

void px_limits_set_fd_cap(long cap)
{
    atomic_store(&g_fd_cap, cap);
}

/* One more of *counter unless it would pass max. */
static bool counter_acquire(atomic_long *counter, long max)
{
    long n = atomic_fetch_add(counter, 1);
    if (n >= max) {
        atomic_fetch_sub(counter, 1);
        return false;
    }
    return true;
}

/* Connections and splice pipes share the descriptor room: each counts two
 * descriptors. A slot is taken first and the sum checked after, so two
 * threads taking the last slot at once cannot both keep it. */
static bool fd_room_acquire(atomic_long *counter, atomic_long *other, long max)
{
    long cap = atomic_load(&g_fd_cap);
    long n = atomic_fetch_add(counter, 1);
    if (n >= max || n + atomic_load(other) >= cap) {
        atomic_fetch_sub(counter, 1);
        return false;
    }
    return true;
}

bool px_limits_conn_acquire(long max)
{
    return fd_room_acquire(&g_active, &g_pipes, max);
}

bool px_limits_pipe_acquire(void)
{
    return fd_room_acquire(&g_pipes, &g_active, LONG_MAX);
}

void px_limits_pipe_release(void)
{
    atomic_fetch_sub(&g_pipes, 1);
}

void px_limits_conn_release(void)
{
    atomic_fetch_sub(&g_active, 1);
}

long px_limits_conn_active(void)
{
    return atomic_load(&g_active);
}

bool px_limits_head_acquire(long max)
{
    return counter_acquire(&g_heads, max);
}

void px_limits_head_release(void)
{
    atomic_fetch_sub(&g_heads, 1);
}

typedef struct key_slot {
    char key[PX_LIMIT_KEY_MAX];
    long count;
} key_slot;

/* tag[i] is 0 when slots[i] is free, else bits of its key's hash (never
 * 0): a lookup scans the window's tags, one cache line per 16 slots, and
 * reads a slot's key only where the tag matches. */
typedef struct key_table {
    uint32_t tag[KEY_SLOTS];
    key_slot slots[KEY_SLOTS];
    pthread_mutex_t lock;
} key_table;

static key_table g_leases = { .lock = PTHREAD_MUTEX_INITIALIZER };
static key_table g_peers = { .lock = PTHREAD_MUTEX_INITIALIZER };
static key_table g_peer_heads = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t g_hash_key[2];
static pthread_once_t g_hash_once = PTHREAD_ONCE_INIT;

static void hash_key_init(void)
{
    if (getrandom(g_hash_key, sizeof g_hash_key, 0) != (ssize_t)sizeof g_hash_key) {
        /* No entropy source: a key that differs per process and start time
         * still keeps a client from computing windows offline. */
        int64_t now = ph_monotonic_ns();
        g_hash_key[0] = (uint64_t)now * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
        g_hash_key[1] = (uint64_t)(now / 1000000000) ^ (uint64_t)(uintptr_t)&now;
    }
}

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                   \
    do {                                                                           \
        v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);                  \
        v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                                     \
        v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                                     \
        v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);                  \
    } while (0)

/* SipHash-2-4 of the NUL-terminated s under g_hash_key. */
static uint64_t key_hash(const char *s)
{
    pthread_once(&g_hash_once, hash_key_init);
    size_t len = strlen(s);
    uint64_t k0 = g_hash_key[0], k1 = g_hash_key[1];
    uint64_t v0 = k0 ^ 0x736f6d6570736575ULL, v1 = k1 ^ 0x646f72616e646f6dULL;
    uint64_t v2 = k0 ^ 0x6c7967656e657261ULL, v3 = k1 ^ 0x7465646279746573ULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t m = 0;
        for (int b = 0; b < 8; b++)
            m |= (uint64_t)p[i + (size_t)b] << (8 * b);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    uint64_t m = (uint64_t)len << 56;
    for (int b = 0; i + (size_t)b < len; b++)
        m |= (uint64_t)p[i + (size_t)b] << (8 * b);
    v3 ^= m;
    SIPROUND;
    SIPROUND;
    v0 ^= m;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* Open addressing within a fixed probe window: a slot is freed when its count
 * drops to zero, so a lookup scans the whole window (no tombstones needed).
 * A key whose window is full is refused: fail closed, never grow. The
 * slot's index, or -1. */
#define PROBE_WINDOW 64
static long find(key_table *t, const char *key, bool insert)
{
    uint64_t h = key_hash(key);
    uint32_t tag = (uint32_t)(h >> 32) | 1u;
    long free_slot = -1;
    for (size_t k = 0; k < PROBE_WINDOW; k++) {
        size_t i = (h + k) % KEY_SLOTS;
        if (t->tag[i] == 0) {
            if (free_slot < 0)
                free_slot = (long)i;
            continue;
        }
        if (t->tag[i] == tag && strcmp(t->slots[i].key, key) == 0)
            return (long)i;
    }
    if (insert && free_slot >= 0) {
        key_slot *s = &t->slots[free_slot];
        snprintf(s->key, sizeof s->key, "%s", key);
        s->count = 0;
        t->tag[free_slot] = tag;
    }
    return insert ? free_slot : -1;
}

static bool key_acquire(key_table *t, const char *key, long max)
{
    pthread_mutex_lock(&t->lock);
    long i = find(t, key, true);
    bool ok = i >= 0 && t->slots[i].count < max;
    if (ok)
        t->slots[i].count++;
    else if (i >= 0 && t->slots[i].count == 0)
        t->tag[i] = 0;
    pthread_mutex_unlock(&t->lock);
    return ok;
}

static void key_release(key_table *t, const char *key)
{
    pthread_mutex_lock(&t->lock);
    long i = find(t, key, false);
    if (i >= 0 && --t->slots[i].count == 0)
        t->tag[i] = 0;
    pthread_mutex_unlock(&t->lock);
}

static void lease_key(char key[PX_LIMIT_KEY_MAX], const char *tenant, const char *lease)
{
    snprintf(key, PX_LIMIT_KEY_MAX, "%s\n%s", tenant, lease);
}

bool px_limits_lease_acquire(const char *tenant, const char *lease, long max)
{
    char key[PX_LIMIT_KEY_MAX];
    lease_key(key, tenant, lease);
    return key_acquire(&g_leases, key, max);
}

void px_limits_lease_release(const char *tenant, const char *lease)
{
    char key[PX_LIMIT_KEY_MAX];
    lease_key(key, tenant, lease);
    key_release(&g_leases, key);
}

bool px_limits_peer_acquire(const char *peer_key, long max)
{
    return key_acquire(&g_peers, peer_key, max);
}

void px_limits_peer_release(const char *peer_key)
{
    key_release(&g_peers, peer_key);
}

bool px_limits_peer_head_acquire(const char *peer_key, long max)
{
    return key_acquire(&g_peer_heads, peer_key, max);
}

void px_limits_peer_head_release(const char *peer_key)
{
    key_release(&g_peer_heads, peer_key);
}
