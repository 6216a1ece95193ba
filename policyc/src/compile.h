/*
 * compile.h - pc_policy in, table bytes out (the format is
 * guard/src/table_format.h, documented in docs/table-format.md).
 *
 * Compilation is deterministic: lists sorted by name, each list flattened
 * (its own rules plus every transitively included list's, each with its
 * provenance), sorted in the canonical rule order, exact duplicates dropped,
 * port ranges normalized, a fixed-seed hash index, explicit little-endian
 * fields, no timestamps and no paths beyond each rule's source base name.
 * The same policy always gives the same bytes.
 */
#ifndef POLICYC_COMPILE_H
#define POLICYC_COMPILE_H

#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"
#include "policy.h"

/*
 * Compiles a policy the loader accepted (no errors) into a table image.
 * On PH_OK *out is a malloc'd buffer of *len bytes the caller frees. On
 * failure *out is NULL and diag says why: PH_E_INVAL (the policy breaks an
 * invariant the loader guarantees: never written), PH_E_LIMIT (too large for
 * the format), PH_E_NOMEM.
 */
ph_status pc_compile(const pc_policy *policy, uint8_t **out, size_t *len, ph_diag *diag);

#endif
