/*
 * compiler-int.h - the guard's internal interface to policyc (the table
 * compiler, checker and explainer): the one header of guard/src that
 * policyc includes. Not installed, not part of libpinhole's ABI (these
 * functions are hidden in the shared library): policyc links the guard
 * statically (the pinhole_internal target).
 *
 * It sits in guard/src rather than under guard/include/pinhole/internal/
 * because everything under guard/include/pinhole is installed as the
 * public API; a declaration there of a symbol the shared library does not
 * export would mislead every other program that includes it.
 *
 * What policyc may use, each the guard's because the decision depends on
 * it being the same on both sides (docs/guard.md, "Internal interface"):
 *  - table_format.h: THE on-disk table format, written by policyc and
 *    read by the guard (docs/table-format.md);
 *  - ph_host_a_labels_valid (host_alabel-int.h): the A-label rule the URL
 *    and CONNECT parsers apply, so no rule names a host no request can;
 *  - the wildcard-DNS services (wildcard_dns-int.h): the list the guard
 *    refuses at decision time, refused by policyc at compile time and named
 *    by explain.
 * Everything else policyc needs is public (pinhole/host.h, table.h, ...).
 */
#ifndef PINHOLE_COMPILER_INT_H
#define PINHOLE_COMPILER_INT_H

#include "host_alabel-int.h"
#include "table_format.h"
#include "wildcard_dns-int.h"

#endif
