/* decide.c - destinations decided through the guard (decide.h). */
#include "decide.h"

#include <stdio.h>
#include <string.h>

ph_status pc_decider_open(ph_table **table, pc_decider *out, ph_diag *diag)
{
    memset(out, 0, sizeof *out);
    ph_status st = ph_guard_from_table(table, NULL, &out->guard, diag);
    if (st != PH_OK) {
        ph_table_close(table);
        return st;
    }
    out->pin = ph_guard_snapshot_acquire(out->guard);
    out->table = ph_guard_snapshot_table(out->pin);
    return PH_OK;
}

void pc_decider_close(pc_decider *dc)
{
    ph_guard_snapshot_release(&dc->pin);
    ph_guard_close(&dc->guard);
    dc->table = NULL;
}

void pc_decide(const pc_decider *dc, const char *list, const char *destination, ph_decision *d)
{
    ph_connect_request req = {
        .authority = destination,
        .authority_len = strlen(destination),
        .list = list,
    };
    ph_decide_connect(dc->guard, &req, d);
}

bool pc_decision_rule(const pc_decider *dc, const ph_decision *d, ph_table_rule *rule)
{
    return d->verdict.has_rule &&
           ph_table_rule_at(dc->table, d->verdict.rule_index, rule) == PH_OK;
}

void pc_format_rule_ports(const ph_table *t, size_t rule, char *buf, size_t cap)
{
    size_t at = 0;
    uint16_t lo, hi;
    buf[0] = '\0';
    for (size_t k = 0; ph_table_rule_port(t, rule, k, &lo, &hi) == PH_OK && at < cap; k++) {
        int n = lo == hi ? snprintf(buf + at, cap - at, "%s%u", k ? ", " : "", lo)
                         : snprintf(buf + at, cap - at, "%s%u-%u", k ? ", " : "", lo, hi);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}
