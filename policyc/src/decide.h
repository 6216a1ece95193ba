/* decide.h - a destination decided exactly as the proxy decides it: the
 * guard's ph_decide_connect on the table (the proxy's authority parser and
 * canonicalization included), with the list named by the caller instead of
 * a grant; and the text form of a rule's ports. */
#ifndef POLICYC_DECIDE_H
#define POLICYC_DECIDE_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/guard.h"
#include "pinhole/table.h"

/* A guard around one table, for deciding destinations, with the table's
 * version pinned so the explanations read the table that decided. */
typedef struct pc_decider {
    ph_guard *guard;
    ph_guard_snapshot *pin;
    const ph_table *table; /* borrowed from pin */
} pc_decider;

/* Takes *table (set to NULL on success; closed on failure too). */
ph_status pc_decider_open(ph_table **table, pc_decider *out, ph_diag *diag);
void pc_decider_close(pc_decider *dc);

/* Decides the CONNECT authority text destination (as a client would write
 * it, e.g. "API.GitHub.com:443") against list. *d is always filled. */
void pc_decide(const pc_decider *dc, const char *list, const char *destination, ph_decision *d);

/* The rule a decision names (allowed by, or refused by), when it names one. */
bool pc_decision_rule(const pc_decider *dc, const ph_decision *d, ph_table_rule *rule);

/* Writes rule i's ports as "443, 8000-8010" into buf (truncated to cap). */
void pc_format_rule_ports(const ph_table *t, size_t rule, char *buf, size_t cap);

#endif
