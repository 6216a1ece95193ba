/* guard_fixture.h - test helper: allowlist YAML to a table file or an open
 * table, through policyc's own loader and compiler (tests linking
 * policyc_core only). */
#ifndef PINHOLE_TEST_GUARD_FIXTURE_H
#define PINHOLE_TEST_GUARD_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "pinhole/table.h"

/* Compiles yaml (display name `name`, the rules' provenance file) into a
 * malloc'd table image; fails the test on any error. */
uint8_t *ph_fixture_compile(const char *yaml, const char *name, size_t *len);

/* Compiles yaml and atomically replaces path with it. */
void ph_fixture_write_table(const char *path, const char *yaml, const char *name);

/* Compiles yaml into an open table. */
ph_table *ph_fixture_table(const char *yaml, const char *name);

#endif
