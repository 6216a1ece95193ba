/*
 * replay.h - `policyc replay`: logged destinations decided again on a new
 * table (and optionally the old one), grouped by list and destination.
 *
 * Memory grows with the distinct (list, host, port, logged verdict) groups,
 * never with lines: each line updates its group's counts and times, and
 * each group is decided once, at the end, by the guard's decision function
 * (decide.h), so a week of one busy proxy costs what its destinations do.
 */
#ifndef POLICYC_REPLAY_H
#define POLICYC_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "decide.h"
#include "replay_log.h"

/* Groups kept by default (--max-destinations). */
#define PC_REPLAY_MAX_GROUPS_DEFAULT 1000000u
/* Malformed lines listed by line number (the rest are counted). */
#define PC_REPLAY_MALFORMED_LISTED 100u

typedef enum pc_replay_change {
    PC_REPLAY_UNCHANGED = 0,
    PC_REPLAY_NEWLY_REFUSED = 1, /* allowed then, refused now: breakage */
    PC_REPLAY_NEWLY_ALLOWED = 2, /* refused then, allowed now: widening */
} pc_replay_change;

/* One destination of one list, as logged and as decided now. */
typedef struct pc_replay_group {
    const char *list, *host; /* into the group's own allocation */
    uint16_t port;
    bool logged_allowed;      /* the table's verdict in the log */
    ph_reason logged_reason;  /* the last line's reason */
    char *logged_rule;        /* the last line's rule ("" none), owned */
    uint64_t lines, other_policy;
    char first[PC_LOG_TIME_MAX + 1], last[PC_LOG_TIME_MAX + 1];
    const char *first_file;   /* where the group was first seen (borrowed name) */
    uint64_t first_line;
    /* Filled by pc_replay_decide. */
    bool then_allowed;        /* logged_allowed, or the old table's verdict with --old */
    char *then_rule;          /* owned; "" none */
    ph_reason then_reason;
    bool now_allowed;
    ph_reason now_reason;
    char *now_rule;           /* the rule the new decision names ("" none), owned */
    pc_replay_change change;
} pc_replay_group;

typedef struct pc_replay_malformed {
    const char *file; /* borrowed */
    uint64_t line;
    const char *why;  /* static */
} pc_replay_malformed;

typedef struct pc_replay {
    size_t max_groups;
    pc_replay_group **slots; /* open addressing, power-of-two size */
    size_t nslots, ngroups;
    pc_replay_group **sorted; /* after pc_replay_decide */
    /* Counts of lines. */
    uint64_t read, kinds[PC_LOG_MALFORMED + 1], too_long, untracked, other_policy;
    pc_replay_malformed malformed[PC_REPLAY_MALFORMED_LISTED];
    size_t nmalformed;
    /* The policy id lines are compared with: OLD's with --old, else the
     * first one a decided line names. */
    char reference_id[PH_TABLE_ID_HEX_LEN + 1];
    bool reference_fixed;
    uint64_t changes[3]; /* groups per pc_replay_change */
    uint64_t change_lines[3];
} pc_replay;

/* max_groups 0: the default. reference_id: OLD's policy id, or NULL. */
void pc_replay_init(pc_replay *rp, size_t max_groups, const char *reference_id);
void pc_replay_free(pc_replay *rp);

/* Feeds one line (line_no 1-based, file borrowed until pc_replay_free).
 * PH_OK, or PH_E_NOMEM (the line is counted untracked). */
ph_status pc_replay_line(pc_replay *rp, const char *file, uint64_t line_no, const char *line,
                         size_t len, bool too_long);

/* Reads every line of a source into rp. PH_OK, or PH_E_IO (diag) when the
 * source failed part way (the lines before were counted). */
ph_status pc_replay_read(pc_replay *rp, const char *file, pc_log_read_fn read, void *ctx,
                         ph_diag *diag);

/* Decides every group on new (and old, when not NULL), sorts them (list,
 * host, port, then the logged verdict) and counts the changes. PH_E_NOMEM. */
ph_status pc_replay_decide(pc_replay *rp, const pc_decider *new_, const pc_decider *old);

/* The report, in "text", "json" or "github" form. new_id/old_id: the
 * tables' policy ids (old_id NULL without --old). PH_E_IO on a write error. */
typedef enum pc_replay_format { PC_REPLAY_TEXT, PC_REPLAY_JSON, PC_REPLAY_GITHUB } pc_replay_format;
ph_status pc_replay_print(FILE *out, const pc_replay *rp, pc_replay_format format,
                          const char *new_id, const char *old_id);

#endif
