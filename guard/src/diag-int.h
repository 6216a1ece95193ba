/* diag-int.h - filling a ph_diag (private to Pinhole's own modules). */
#ifndef PINHOLE_DIAG_INT_H
#define PINHOLE_DIAG_INT_H

#include "pinhole/status.h"

/* Fills diag (if not NULL) and returns st, so callers can write
 * `return ph_diag_set(diag, PH_E_INVAL, off, "...", ...);`. */
PH_API ph_status ph_diag_set(ph_diag *diag, ph_status st, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
