/* dns_cache-int.h - the one DNS answer cache: bounded, thread-safe, keyed by
 * canonical name. A resolver keeps one of its own (pinhole/resolve.h), a
 * guard keeps one that every worker call on it shares (pinhole/guard.h). */
#ifndef PINHOLE_DNS_CACHE_INT_H
#define PINHOLE_DNS_CACHE_INT_H

#include <stdint.h>

#include "pinhole/resolve.h"

/* Ownership: reference-counted. ph_dns_cache_new returns the creator's
 * reference (a resolver's own cache, or a guard's), ph_dns_cache_ref takes
 * another (a resolver sharing a guard's cache, which may outlive the guard),
 * ph_dns_cache_free drops one and frees the cache with the last. Every other
 * call may run on any thread concurrently (one mutex). */
typedef struct ph_dns_cache ph_dns_cache;

/* A cache of `entries` slots (never grows). entries 0: *out NULL, PH_OK (a
 * NULL cache finds nothing and stores nothing). PH_E_NOMEM. */
ph_status ph_dns_cache_new(unsigned entries, ph_dns_cache **out, ph_diag *diag);
/* Another reference to c (NULL: NULL), for any thread. */
ph_dns_cache *ph_dns_cache_ref(ph_dns_cache *c);
/* Drops the reference *c (the cache freed with the last) and sets *c to
 * NULL; NULL-safe. */
void ph_dns_cache_free(ph_dns_cache **c);

/* The unexpired outcome cached for host, into *a (from_cache set, ports set
 * to port); false when none. */
bool ph_dns_cache_find(ph_dns_cache *c, const char *host, uint16_t port, ph_resolve_answer *a);

/* Keeps a (a checked outcome: st, reason, detail, addrs) for host for ttl_s
 * seconds; ttl_s 0 or a NULL cache: nothing kept. */
void ph_dns_cache_store(ph_dns_cache *c, const char *host, const ph_resolve_answer *a,
                        unsigned ttl_s);

/* Forgets every entry. */
void ph_dns_cache_clear(ph_dns_cache *c);

/* Sets the port of every address of a. */
void ph_pinned_addrs_set_port(ph_pinned_addrs *a, uint16_t port);

#endif
