/* forward_decide.h - a forwarded request's head to the guard's decision
 * (forward_decide.c), for forward.c, which takes an allowed one on to its
 * upstream. Ownership: forward.h. */
#ifndef PX_FORWARD_DECIDE_H
#define PX_FORWARD_DECIDE_H

#include <stddef.h>
#include <stdint.h>

#include "forward-int.h"
#include "http1.h"
#include "pinhole/guard.h"

/* The longest URL a request is decided on: an origin-form request in a
 * tunnel made absolute, "http://" + its Host field + its target. */
#define PX_FWD_URL_MAX (2 * PH_H1_REQUEST_HEAD_MAX + 16)

/*
 * Decides the request head h of f (parsed from buf): the URL it names (in a
 * tunnel, its Host field checked against the tunnel's host and port, and an
 * origin-form target made absolute into url), ph_decide_url on it into *d,
 * and the refusals forwarding adds around the guard's. Sets the request's
 * log fields (host, port, grant, rule, policy id) from the decision. Returns
 * the URL decided (buf's target, or url), which d->path_offset counts from,
 * or NULL when the request was refused (answered with px_fwd_refuse).
 */
const char *px_fwd_decide(px_fwd *f, const uint8_t *buf, const ph_h1_head *h,
                          char url[static PX_FWD_URL_MAX], ph_decision *d);

#endif
