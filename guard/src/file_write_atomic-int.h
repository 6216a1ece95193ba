/* file_write_atomic-int.h - publishing a file whole or not at all (private to
 * Pinhole's own modules: policyc writes tables with it, pinhole-guard keys). */
#ifndef PINHOLE_FILE_WRITE_ATOMIC_INT_H
#define PINHOLE_FILE_WRITE_ATOMIC_INT_H

#include <stddef.h>
#include <sys/types.h>

#include "pinhole/status.h"

enum {
    PH_WRITE_REPLACE = 0,    /* rename over an existing file */
    PH_WRITE_NO_REPLACE = 1, /* fail with PH_E_IO (EEXIST) if path exists */
};

/*
 * Publishes data[0..len) at path atomically: a temporary file created with
 * O_EXCL and an unpredictable name in the same directory (mode, less the
 * umask), written, fsync'd, renamed to path (renameat2 RENAME_NOREPLACE with
 * PH_WRITE_NO_REPLACE), then the directory fsync'd. Readers see the old file
 * or the new one, never a mix or a prefix. On any failure the temporary file
 * is removed, the old file is untouched, and diag (PH_E_IO, PH_E_INVAL) names
 * the failing step. The caller keeps ownership of data.
 */
ph_status ph_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                               int flags, ph_diag *diag);

#endif
