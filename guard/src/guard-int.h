/* guard-int.h - the guard's table snapshots, shared by guard.c (lifecycle,
 * reload) and guard_check.c (decisions). */
#ifndef PINHOLE_GUARD_INT_H
#define PINHOLE_GUARD_INT_H

#include <stdatomic.h>

#include "pinhole/guard.h"

/* One loaded table and the references to it: the guard's "current" pointer
 * holds one, every check in flight holds one. The last release closes it. */
struct ph_guard_snapshot {
    ph_table *table;
    atomic_uint refs;
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
};

/* The resolver settings checks use. */
const ph_resolver_config *ph_guard_resolver_config(const ph_guard *g);
/* Runs the automatic reload when its interval has passed; never waits
 * behind another reload, never fails a check (errors are remembered). */
void ph_guard_reload_if_due(ph_guard *g);

#endif
