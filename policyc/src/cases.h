/*
 * cases.h - the expectations file of `policyc test` (docs/policyc.md, "test"):
 *
 *   cases:
 *     - destination: "api.github.com:443"
 *       list: default            # optional, default "default"
 *       expect: allow            # allow | deny
 *       reason: port_not_allowed # optional, with deny: the expected reason code
 *
 * Strict like the allowlist: one document, no anchors, aliases or tags, no
 * unknown or duplicate keys, at least one case. Errors are positioned.
 */
#ifndef POLICYC_CASES_H
#define POLICYC_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#define PC_MAX_CASES 100000u
#define PC_MAX_CASES_FILE ((size_t)16 * 1024 * 1024)

typedef struct pc_case {
    char *destination;
    char *list;   /* "default" unless given */
    char *reason; /* NULL: not checked */
    bool expect_allow;
    uint32_t line, col; /* of the case's mapping, 1-based */
} pc_case;

typedef struct pc_cases {
    pc_case *items;
    size_t count;
} pc_cases;

/* Parses data[0..len). On failure returns PH_E_FORMAT (or PH_E_NOMEM /
 * PH_E_LIMIT) with diag->message "line:col: message" (1-based). */
ph_status pc_cases_parse(const char *data, size_t len, pc_cases *out, ph_diag *diag);
void pc_cases_free(pc_cases *cases);

#endif
