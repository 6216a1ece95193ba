/* limits.c - connection slots: overall (one atomic) and per lease (a small
 * locked table, bounded: a lease not in it when it is full is refused, which
 * fails closed rather than growing without limit). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "proxy-int.h"

#define LEASE_SLOTS 8192 /* distinct leases with open tunnels at once */

static atomic_long g_active;

bool px_limits_conn_acquire(long max)
{
    long n = atomic_fetch_add(&g_active, 1);
    if (n >= max) {
        atomic_fetch_sub(&g_active, 1);
        return false;
    }
    return true;
}

void px_limits_conn_release(void)
{
    atomic_fetch_sub(&g_active, 1);
}

long px_limits_conn_active(void)
{
    return atomic_load(&g_active);
}

typedef struct lease_slot {
    char key[2 * PH_GRANT_FIELD_MAX + 2]; /* tenant '\n' lease; "" = free */
    long count;
} lease_slot;

static lease_slot g_leases[LEASE_SLOTS];
static pthread_mutex_t g_lease_lock = PTHREAD_MUTEX_INITIALIZER;

static void lease_key(char *key, size_t cap, const char *tenant, const char *lease)
{
    snprintf(key, cap, "%s\n%s", tenant, lease);
}

static size_t lease_hash(const char *s)
{
    size_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

/* Open addressing within a fixed probe window: a slot is freed when its count
 * drops to zero, so a lookup scans the whole window (no tombstones needed).
 * A lease whose window is full is refused: fail closed, never grow. */
#define PROBE_WINDOW 64
static lease_slot *find(const char *key, bool insert)
{
    size_t h = lease_hash(key);
    lease_slot *free_slot = NULL;
    for (size_t k = 0; k < PROBE_WINDOW; k++) {
        lease_slot *s = &g_leases[(h + k) % LEASE_SLOTS];
        if (s->key[0] == '\0') {
            if (free_slot == NULL)
                free_slot = s;
            continue;
        }
        if (strcmp(s->key, key) == 0)
            return s;
    }
    if (insert && free_slot) {
        snprintf(free_slot->key, sizeof free_slot->key, "%s", key);
        free_slot->count = 0;
        return free_slot;
    }
    return NULL;
}

bool px_limits_lease_acquire(const char *tenant, const char *lease, long max)
{
    char key[sizeof g_leases[0].key];
    lease_key(key, sizeof key, tenant, lease);
    pthread_mutex_lock(&g_lease_lock);
    lease_slot *s = find(key, true);
    bool ok = s != NULL && s->count < max;
    if (ok)
        s->count++;
    else if (s && s->count == 0)
        s->key[0] = '\0';
    pthread_mutex_unlock(&g_lease_lock);
    return ok;
}

void px_limits_lease_release(const char *tenant, const char *lease)
{
    char key[sizeof g_leases[0].key];
    lease_key(key, sizeof key, tenant, lease);
    pthread_mutex_lock(&g_lease_lock);
    lease_slot *s = find(key, false);
    if (s && --s->count == 0)
        s->key[0] = '\0';
    pthread_mutex_unlock(&g_lease_lock);
}
