/*
 * pinhole/connect.h - dialing the pinned addresses (DESIGN section 4, step 6).
 *
 * The addresses come from ph_resolve_* (every one already checked against the
 * denylist); this helper dials them in answer order and never resolves
 * anything itself, so what was checked is what is dialed.
 */
#ifndef PINHOLE_CONNECT_H
#define PINHOLE_CONNECT_H

#include "pinhole/resolve.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default overall connect timeout. */
#define PH_CONNECT_TIMEOUT_MS_DEFAULT 10000

/*
 * Connects a TCP socket to addrs->addr[0], then [1], ... until one accepts,
 * within timeout_ms overall (0 = PH_CONNECT_TIMEOUT_MS_DEFAULT). Each attempt
 * gets an equal share of the time left (time left / addresses left), so one
 * black-holed address cannot starve the rest.
 *
 * On PH_OK *fd is the connected socket (close-on-exec, NON-BLOCKING; the
 * caller owns it) and *index (may be NULL) the address used. Otherwise *fd is
 * -1 and the call returns PH_E_DENIED with *reason
 * PH_REASON_UPSTREAM_TIMEOUT (the deadline passed while an attempt was still
 * pending) or PH_REASON_UPSTREAM_UNREACHABLE (every address refused or
 * failed; the diagnostic names the last error), or PH_E_INVAL for an empty
 * list.
 */
PH_API ph_status ph_connect_pinned(const ph_pinned_addrs *addrs, unsigned timeout_ms, int *fd,
                                   size_t *index, ph_reason *reason, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_CONNECT_H */
