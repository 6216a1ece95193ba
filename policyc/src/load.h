/*
 * load.h - the policyc front end: allowlist YAML in, a validated pc_policy
 * (policy.h) out, plus positioned diagnostics.
 *
 * A policy comes back only when the input has no error at all (warnings are
 * allowed). Every error is reported, not only the first; the diagnostics are
 * sorted in the fixed order (file, line, col, code) before the call returns.
 *
 * Includes are resolved and checked here (unknown names, cycles, depth); the
 * policy keeps each list's own rules and its include names as written (and
 * their resolved indices, pc_list.include_index). The flattening the
 * compiler needs is pc_policy_effective_rules below.
 *
 * Loads share no state but the public suffix list, read once (pthread_once)
 * and kept for the life of the process, so several threads may load at once.
 */
#ifndef POLICYC_LOAD_H
#define POLICYC_LOAD_H

#include <stddef.h>

#include "diagnostics.h"
#include "pinhole/status.h"
#include "policy.h"

/* Limits (each has its own error code, see diagnostics.h). */
#define PC_MAX_FILE_BYTES ((size_t)128 * 1024 * 1024) /* PC002 */
#define PC_MAX_LISTS 4096u                          /* PC070 */
#define PC_MAX_RULES 2000000u                       /* PC071, all lists together */
#define PC_MAX_PORTS_PER_RULE 1024u                 /* PC072 */
#define PC_MAX_INCLUDES_PER_LIST 256u               /* PC073 */
#define PC_MAX_INCLUDES 16384u                      /* PC073, all lists together: bounds
                                                       the work of flattening every list */
#define PC_MAX_INCLUDE_DEPTH 32u                    /* PC024 */
#define PC_MAX_EFFECTIVE_RULES 16000000u            /* PC074, sum over lists after flattening */
#define PC_MAX_LIST_NAME 64u                        /* PC020 */
#define PC_MAX_STRING 1024u                         /* PC017: reason, source */
#define PC_MAX_NESTING 64u                          /* PC016: YAML collections in collections */
#define PC_WIDE_PORT_RANGE 1024u                    /* PC103: a range of more ports warns */

/*
 * Reads path and loads it as pc_policy_load_buffer does. display_name is the
 * name used in diagnostics and in rule provenance (NULL: path itself).
 * Returns:
 *   PH_OK        *out is a policy (zero errors; warnings may be in diags);
 *   PH_E_FORMAT  the policy has errors, all of them in diags; *out NULL;
 *   PH_E_IO      the file could not be read (PC001 in diags); *out NULL;
 *   PH_E_LIMIT   the file is larger than PC_MAX_FILE_BYTES (PC002); *out NULL;
 *   PH_E_NOMEM   out of memory; *out NULL.
 * The caller owns *out (pc_policy_free) and diags (pc_diagnostics_free);
 * diagnostics are appended to whatever diags already holds, and the whole
 * collection is re-sorted.
 */
ph_status pc_policy_load_file(const char *path, const char *display_name, pc_policy **out,
                              pc_diagnostics *diags);

/*
 * Parses and validates data[0..len) (need not be NUL-terminated; may hold
 * any bytes). display_name must not be NULL; its base name becomes each
 * rule's source_file unless the rule has a `source:` key. Returns PH_OK,
 * PH_E_FORMAT, PH_E_LIMIT or PH_E_NOMEM as above.
 */
ph_status pc_policy_load_buffer(const char *data, size_t len, const char *display_name,
                                pc_policy **out, pc_diagnostics *diags);

/* The index of the list called name, or -1. O(number of lists). */
long pc_policy_find_list(const pc_policy *policy, const char *name);

/*
 * The effective rules of lists[list_index]: its own rules in file order,
 * then each included list's own rules, depth-first in include order, every
 * list at most once (a diamond include does not repeat rules). Rules are not
 * copied: each pointer points into the policy and carries its provenance
 * (source_file/source_line). Rules are not deduplicated or sorted; the
 * compiler sorts and merges.
 * On PH_OK, *rules is a malloc'd array the caller frees with free() (NULL
 * when *count is 0). Only valid on a policy returned by the loader (no
 * cycles). Returns PH_E_INVAL for a bad index, PH_E_NOMEM.
 */
ph_status pc_policy_effective_rules(const pc_policy *policy, size_t list_index,
                                    const pc_rule ***rules, size_t *count);

#endif /* POLICYC_LOAD_H */
