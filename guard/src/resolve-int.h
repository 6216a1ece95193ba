/* resolve-int.h - the c-ares side of the resolution rules, private to the
 * guard (resolve.c, resolver.c) and its tests: the public header exposes no
 * c-ares type. */
#ifndef PINHOLE_RESOLVE_INT_H
#define PINHOLE_RESOLVE_INT_H

#include <ares.h>

#include "dns_cache-int.h"
#include "pinhole/resolve.h"

/* Fills *opts and *optmask with the options every Pinhole channel uses
 * (pinhole/resolve.h), with a per-try timeout derived from timeout_ms
 * (0 = default). The caller may add options (ARES_OPT_SOCK_STATE_CB) but
 * not remove these. opts points to static data; nothing to free. */
void ph_resolver_channel_options(struct ares_options *opts, int *optmask, unsigned timeout_ms);

/* Sets the channel's servers from the ph_resolver_config.servers syntax.
 * servers NULL or "" keeps resolv.conf's. PH_E_INVAL / PH_E_LIMIT. */
ph_status ph_resolver_set_servers(ares_channel channel, const char *servers, ph_diag *diag);

/* Checks a c-ares answer for port: every address classified, the first
 * PH_PINNED_MAX into *out in order. PH_OK, or PH_E_DENIED with *reason
 * PH_REASON_DENIED_ADDRESS (diag names the address, block and RFC) or
 * PH_REASON_DNS_FAILURE (no address); *out is then empty. ai may be NULL.
 * Does not free ai. */
ph_status ph_resolve_check_answer(const struct ares_addrinfo *ai, uint16_t port,
                                  ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag);

/* The one mapping of a c-ares completion (status, answer) to an outcome:
 * fills *a (st, reason, addrs with port, detail) and returns how long it may
 * be cached in seconds (0: not at all) given the caps. */
unsigned ph_resolve_outcome(int status, const struct ares_addrinfo *res, const char *name,
                            uint16_t port, unsigned max_ttl_s, unsigned negative_ttl_s,
                            ph_resolve_answer *a);

/* ph_resolver_new whose cache is shared (not NULL: used instead of one of
 * cfg->cache_entries slots; the resolver takes a reference of its own, so
 * it may outlive the cache's creator). The TTL caps stay cfg's. */
ph_status ph_resolver_new_shared(const ph_resolver_config *cfg, const ph_resolver_loop *loop,
                                 ph_dns_cache *shared, ph_resolver **out, ph_diag *diag);

/* ph_resolve_blocking answered from cache when it holds the name (no DNS
 * channel made), else on a private resolver sharing cache, which the answer
 * then fills (cfg's TTL caps). cache NULL: exactly ph_resolve_blocking.
 * Thread-safe. *from_cache (may be NULL) says which. */
ph_status ph_resolve_blocking_shared(const ph_resolver_config *cfg, ph_dns_cache *cache,
                                     const char *name, uint16_t port, ph_pinned_addrs *out,
                                     ph_reason *reason, bool *from_cache, ph_diag *diag);

#endif
