/*
 * pinhole/revocation.h - the revocation list: leases whose grants are
 * refused before they expire (an approval withdrawn mid-run must cut that
 * lease's egress at once, on every replica, with no shared database).
 *
 * The list is a file every proxy replica reads (pinhole-proxy
 * --revocations), loaded and reloaded with the table and the grant keys as
 * one policy version (pinhole/guard.h: verified whole or refused whole).
 * docs/grants.md specifies it; in short, one entry per line:
 *
 *   TENANT LEASE UNTIL
 *
 * TENANT and LEASE as in a grant (1..64 bytes of [A-Za-z0-9._-]), UNTIL unix
 * seconds (decimal, no sign, no leading zero, at most PH_GRANT_TIME_MAX),
 * separated by one space; '#' starts a comment line; empty lines are
 * skipped; any other byte (tab, CR, control, non-ASCII) refuses the file.
 * An entry revokes the lease's grants while now < UNTIL and is ignored
 * after (so writers may drop it: the file only grows by live grants). The
 * same lease twice is one entry with the later UNTIL.
 */
#ifndef PINHOLE_REVOCATION_H
#define PINHOLE_REVOCATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds: a file over PH_REVOCATIONS_FILE_MAX bytes or with more than
 * PH_REVOCATIONS_MAX entries is refused (PH_E_LIMIT). */
#define PH_REVOCATIONS_FILE_MAX (16 * 1024 * 1024)
#define PH_REVOCATIONS_MAX 100000

/* An immutable set of entries once loaded (concurrent lookups are safe;
 * ph_revocations_add is for a writer that owns it alone). Opaque. */
typedef struct ph_revocations ph_revocations;

/* An empty list in *out (free with ph_revocations_free). */
PH_API ph_status ph_revocations_new(ph_revocations **out, ph_diag *diag);

/* Parses text[0..len) into a new list in *out. PH_E_FORMAT (diag: line,
 * column and why, offset the byte) or PH_E_LIMIT; *out NULL then. */
PH_API ph_status ph_revocations_parse(const char *text, size_t len, ph_revocations **out,
                                      ph_diag *diag);

/* Reads and parses the file at path: a regular file, not writable by group
 * or others (PH_E_INVAL: whoever may write it may lift a revocation), at
 * most PH_REVOCATIONS_FILE_MAX bytes. PH_E_NOT_FOUND when it is missing. */
PH_API ph_status ph_revocations_load_file(const char *path, ph_revocations **out, ph_diag *diag);

/* Frees *r and sets it to NULL. NULL-safe. */
PH_API void ph_revocations_free(ph_revocations **r);

/* Entries held (live or not). */
PH_API size_t ph_revocations_count(const ph_revocations *r);

/* Entries live at now (now < until): the leases the list revokes at now.
 * NULL r: 0. Linear in the entries (for a metric, not a decision). */
PH_API size_t ph_revocations_live(const ph_revocations *r, int64_t now);

/* True when the list revokes (tenant, lease) at now (an entry with
 * now < until). NULL r: false. */
PH_API bool ph_revocations_revoked(const ph_revocations *r, const char *tenant, const char *lease,
                                   int64_t now);

/* Adds (tenant, lease, until), or raises the until of the lease's entry.
 * PH_E_INVAL for a malformed field or until, PH_E_LIMIT past
 * PH_REVOCATIONS_MAX entries. */
PH_API ph_status ph_revocations_add(ph_revocations *r, const char *tenant, const char *lease,
                                    int64_t until, ph_diag *diag);

/* The file text of the entries live at now (until > now), sorted by tenant
 * then lease, in *out (malloc'd, caller frees; *len its length). */
PH_API ph_status ph_revocations_format(const ph_revocations *r, int64_t now, char **out,
                                       size_t *len, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_REVOCATION_H */
