/*
 * table_input.h - "FILE or TABLE" for explain, test, dump and diff: one code
 * path whatever the user names. A file starting with the table magic is
 * opened as a table; anything else is loaded as an allowlist, compiled in
 * memory and opened with ph_table_open_buffer, so a YAML input is answered by
 * exactly the bytes `policyc compile` would write.
 */
#ifndef POLICYC_TABLE_INPUT_H
#define POLICYC_TABLE_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "pinhole/table.h"

/*
 * Opens path (display name: path). On success returns 0 and *table (caller
 * closes it). On failure prints why to stderr prefixed with "policyc CMD: "
 * (policy diagnostics in text form) and returns 1 when the input is an
 * allowlist with errors, 2 for everything else (I/O, corrupt table, memory).
 * *was_table (if not NULL) says which kind the input was.
 */
int pc_open_table_input(const char *cmd, const char *path, ph_table **table, bool *was_table);

/*
 * The argument handling of a subcommand whose only option is --help and
 * which takes exactly nargs operands: returns -1 with *first set to the index
 * of the first operand when the command should run, else the exit code (0
 * after --help, 2 after a usage error, with `what` saying what was expected).
 */
int pc_args_operands_only(int argc, char **argv, size_t nargs, const char *what,
                          void (*usage)(FILE *out), int *first);

#endif
