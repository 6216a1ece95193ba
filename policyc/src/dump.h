/* dump.h - a table's canonical policy as allowlist YAML (policyc dump). */
#ifndef POLICYC_DUMP_H
#define POLICYC_DUMP_H

#include <stdio.h>

#include "pinhole/table.h"

/* Writes the canonical, flattened policy of t to out (format: docs/policyc.md,
 * "dump"). Compiling the output reproduces t byte for byte. Returns 0, or 2
 * when writing failed. */
int pc_dump_table(FILE *out, const ph_table *t);

#endif
