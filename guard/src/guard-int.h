/* guard-int.h - the guard's table snapshots, shared by guard.c (lifecycle,
 * reload) and guard_check.c (decisions), and what dial.c and redirect.c
 * build on the decision. */
#ifndef PINHOLE_GUARD_INT_H
#define PINHOLE_GUARD_INT_H

#include <stdatomic.h>

#include "dns_cache-int.h"
#include "pinhole/grant.h"
#include "pinhole/guard.h"

/* One version of the policy: a loaded table and (for a guard opened with a
 * key file) the grant keyring and revocation list loaded with it, and the
 * references to them: the guard's "current" pointer holds one, every
 * decision in flight holds one. The last release closes them. */
struct ph_guard_snapshot {
    ph_table *table;
    ph_keyring *keyring; /* NULL: the guard has no key file */
    ph_revocations *revocations; /* NULL: the guard has no revocation list */
    uint64_t generation;
    atomic_uint refs;
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    char keyring_id[PH_KEYRING_ID_HEX_LEN + 1]; /* "" without a keyring */
};

/* The resolver settings checks use (cache_entries 0: the guard's cache is
 * ph_guard_dns_cache, shared, not a per-resolver one). */
const ph_resolver_config *ph_guard_resolver_config(const ph_guard *g);
/* The guard's DNS cache (NULL when off); owned by the guard, lives until
 * ph_guard_close. */
ph_dns_cache *ph_guard_dns_cache(const ph_guard *g);
/* Runs the automatic reload when its interval has passed; never waits
 * behind another reload, never fails a check (errors are remembered). */
void ph_guard_reload_if_due(ph_guard *g);

/* ph_decision_resolve with the guard's DNS timeout capped at timeout_ms
 * (0: not capped), for a caller under a deadline of its own (dial.c). */
ph_status ph_decision_resolve_within(ph_guard *g, ph_decision *d, unsigned timeout_ms,
                                     ph_pinned_addrs *addrs);

/* A refusal after (or instead of) the decision: v keeps host, port and
 * rule, and says why (v->detail and diag, if not NULL, get detail).
 * Returns st. For the calls built on the decision (dial.c, redirect.c). */
ph_status ph_verdict_refuse(ph_verdict *v, ph_reason reason, ph_status st, const char *detail,
                            ph_diag *diag);

#endif
