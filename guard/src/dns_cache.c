/* dns_cache.c - the one DNS answer cache (dns_cache-int.h): an open-addressed
 * table of fixed size, a short probe window, the soonest-expiring entry
 * evicted when the window is full; one mutex around every access. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/diag.h"
#include "dns_cache-int.h"
#include "pinhole/clock.h"
#include "pinhole/host.h"

#define CACHE_PROBE 8

/* One cached outcome; addresses without port (the query's is set on load). */
typedef struct cache_entry {
    char host[PH_HOST_MAX + 1];
    int64_t expires_ms; /* monotonic; 0 = empty */
    ph_status st;
    ph_reason reason;
    char detail[PH_DIAG_MESSAGE_MAX];
    unsigned naddrs;
    struct {
        sa_family_t family;
        uint8_t bytes[16];
    } addrs[PH_PINNED_MAX];
} cache_entry;

struct ph_dns_cache {
    atomic_uint refs;     /* the creator's and one per resolver sharing it */
    pthread_mutex_t lock; /* guards slot[] */
    size_t n;
    cache_entry slot[];
};

ph_status ph_dns_cache_new(unsigned entries, ph_dns_cache **out, ph_diag *diag)
{
    *out = NULL;
    if (entries == 0)
        return PH_OK;
    ph_dns_cache *c = calloc(1, sizeof *c + (size_t)entries * sizeof c->slot[0]);
    if (c == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory for the DNS cache");
    atomic_init(&c->refs, 1u);
    pthread_mutex_init(&c->lock, NULL);
    c->n = entries;
    *out = c;
    return PH_OK;
}

ph_dns_cache *ph_dns_cache_ref(ph_dns_cache *c)
{
    if (c != NULL)
        atomic_fetch_add(&c->refs, 1u);
    return c;
}

void ph_dns_cache_free(ph_dns_cache **c)
{
    if (c == NULL || *c == NULL)
        return;
    if (atomic_fetch_sub(&(*c)->refs, 1u) != 1u) {
        *c = NULL;
        return;
    }
    pthread_mutex_destroy(&(*c)->lock);
    free(*c);
    *c = NULL;
}

static uint64_t hash_host(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a: names are canonical, no secret */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The slot for host: its own, an empty or expired one, else the one that
 * expires soonest in the probe window (bounded: never grows). */
static cache_entry *slot_for(ph_dns_cache *c, const char *host, int64_t now)
{
    uint64_t h = hash_host(host);
    cache_entry *victim = NULL;
    for (size_t k = 0; k < CACHE_PROBE; k++) {
        cache_entry *e = &c->slot[(h + k) % c->n];
        if (strcmp(e->host, host) == 0 || e->expires_ms <= now)
            return e;
        if (victim == NULL || e->expires_ms < victim->expires_ms)
            victim = e;
    }
    return victim;
}

void ph_pinned_addrs_set_port(ph_pinned_addrs *a, uint16_t port)
{
    for (size_t i = 0; i < a->count; i++) {
        if (a->addr[i].ss_family == AF_INET)
            ((struct sockaddr_in *)(void *)&a->addr[i])->sin_port = htons(port);
        else
            ((struct sockaddr_in6 *)(void *)&a->addr[i])->sin6_port = htons(port);
    }
}

static void load(const cache_entry *e, uint16_t port, ph_resolve_answer *a)
{
    memset(a, 0, sizeof *a);
    a->st = e->st;
    a->reason = e->reason;
    a->from_cache = true;
    snprintf(a->detail, sizeof a->detail, "%s", e->detail);
    a->addrs.count = e->naddrs;
    for (unsigned i = 0; i < e->naddrs; i++) {
        if (e->addrs[i].family == AF_INET) {
            struct sockaddr_in *s = (struct sockaddr_in *)(void *)&a->addrs.addr[i];
            s->sin_family = AF_INET;
            memcpy(&s->sin_addr, e->addrs[i].bytes, 4);
            a->addrs.addr_len[i] = sizeof *s;
        } else {
            struct sockaddr_in6 *s = (struct sockaddr_in6 *)(void *)&a->addrs.addr[i];
            s->sin6_family = AF_INET6;
            memcpy(&s->sin6_addr, e->addrs[i].bytes, 16);
            a->addrs.addr_len[i] = sizeof *s;
        }
    }
    ph_pinned_addrs_set_port(&a->addrs, port);
}

bool ph_dns_cache_find(ph_dns_cache *c, const char *host, uint16_t port, ph_resolve_answer *a)
{
    if (c == NULL)
        return false;
    uint64_t h = hash_host(host);
    bool found = false;
    pthread_mutex_lock(&c->lock);
    int64_t now = ph_monotonic_ms();
    for (size_t k = 0; k < CACHE_PROBE && !found; k++) {
        const cache_entry *e = &c->slot[(h + k) % c->n];
        if (e->expires_ms > now && strcmp(e->host, host) == 0) {
            load(e, port, a);
            found = true;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

void ph_dns_cache_store(ph_dns_cache *c, const char *host, const ph_resolve_answer *a,
                        unsigned ttl_s)
{
    if (c == NULL || ttl_s == 0 || strlen(host) > PH_HOST_MAX)
        return;
    pthread_mutex_lock(&c->lock);
    int64_t now = ph_monotonic_ms();
    cache_entry *e = slot_for(c, host, now);
    memset(e, 0, sizeof *e);
    snprintf(e->host, sizeof e->host, "%s", host);
    e->expires_ms = now + (int64_t)ttl_s * 1000;
    e->st = a->st;
    e->reason = a->reason;
    snprintf(e->detail, sizeof e->detail, "%s", a->detail);
    e->naddrs = (unsigned)(a->addrs.count < PH_PINNED_MAX ? a->addrs.count : PH_PINNED_MAX);
    for (size_t i = 0; i < e->naddrs; i++) {
        const struct sockaddr *sa = (const struct sockaddr *)&a->addrs.addr[i];
        e->addrs[i].family = sa->sa_family;
        if (sa->sa_family == AF_INET)
            memcpy(e->addrs[i].bytes, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        else
            memcpy(e->addrs[i].bytes,
                   &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
    pthread_mutex_unlock(&c->lock);
}

void ph_dns_cache_clear(ph_dns_cache *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n; i++) { /* only the touched pages are written */
        if (c->slot[i].expires_ms != 0) {
            c->slot[i].expires_ms = 0;
            c->slot[i].host[0] = '\0';
        }
    }
    pthread_mutex_unlock(&c->lock);
}
