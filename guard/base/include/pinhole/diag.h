/*
 * pinhole/diag.h - filling a ph_diag (pinhole/status.h), for every Pinhole
 * module and for code that extends one (a backend, a mechanism).
 */
#ifndef PINHOLE_DIAG_H
#define PINHOLE_DIAG_H

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Fills *diag (when diag is not NULL) with st, offset and the printf-style
 * message (truncated to PH_DIAG_MESSAGE_MAX - 1 bytes, always NUL-terminated),
 * and returns st, so a refusal is one line:
 *     return ph_diag_set(diag, PH_E_INVAL, off, "bad port %u", port);
 * offset is a byte offset into the input the caller parsed, 0 when there is
 * none. errno is not changed by the call itself.
 */
PH_API ph_status ph_diag_set(ph_diag *diag, ph_status st, size_t offset, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_DIAG_H */
