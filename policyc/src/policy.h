/*
 * policy.h - the in-memory allowlist policy, as the YAML front end produces it
 * and the compiler consumes it. This is the contract between the two halves
 * of policyc: parse.c/validate.c build a pc_policy only when the file has no
 * error; compile.c turns a pc_policy into table bytes.
 *
 * Every string is owned by the policy and freed by pc_policy_free. Hosts are
 * already canonical (pinhole/host.h rules; a wildcard is "*." + base).
 */
#ifndef POLICYC_POLICY_H
#define POLICYC_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/table.h"

typedef struct pc_pos {
    uint32_t line; /* 1-based */
    uint32_t col;  /* 1-based, in characters */
} pc_pos;

typedef struct pc_port_range {
    uint16_t lo, hi; /* inclusive, 1 <= lo <= hi <= 65535 */
} pc_port_range;

typedef struct pc_rule {
    char *host;            /* "api.github.com" or "*.githubusercontent.com" */
    bool wildcard;         /* host starts with "*." */
    pc_port_range *ports;  /* as written (compile sorts and merges) */
    size_t nports;
    char *reason;          /* NULL when the rule has none */
    pc_pos pos;            /* where the rule starts in its file */
    /* Provenance shown by explain and logs: the file (base name, never a
     * directory) and line where the rule was first written. Normally the
     * policy's own file and pos.line; a dumped policy carries the original
     * through the rule's `source: "file:line"` key. */
    char *source_file;
    uint32_t source_line;
    /* `protocol:` (PH_PROTOCOL_DEFAULT when absent); never TCP on a
     * wildcard (PC062). */
    ph_protocol protocol;
} pc_rule;

typedef struct pc_list {
    char *name;
    pc_pos pos;
    char **includes;       /* names of other lists, as written */
    pc_pos *include_pos;
    size_t nincludes;
    /* Added by the front end: includes[i] resolved to an index into
     * pc_policy.lists (filled by the loader; NULL when the policy was built
     * another way, in which case names are looked up). Owned by the list. */
    size_t *include_index;
    pc_rule *rules;
    size_t nrules;
} pc_list;

typedef struct pc_policy {
    char *file;            /* display name given by the caller */
    pc_list *lists;
    size_t nlists;
} pc_policy;

/* Frees everything the policy owns and sets *policy to NULL. NULL-safe. */
void pc_policy_free(pc_policy **policy);

#endif /* POLICYC_POLICY_H */
