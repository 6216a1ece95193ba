/* read_capped-int.h - reading a small file whole, with a cap (private). */
#ifndef PINHOLE_ARTIFACTS_READ_CAPPED_INT_H
#define PINHOLE_ARTIFACTS_READ_CAPPED_INT_H

#include <stddef.h>

#include "pinhole/status.h"

/* Reads fd to its end into *out (malloc'd, NUL-terminated, caller frees;
 * *len bytes). PH_E_LIMIT, with nothing returned, when it holds more than
 * cap bytes; PH_E_IO (naming `what`) when a read fails. Does not close fd. */
ph_status ph_art_read_capped(int fd, size_t cap, const char *what, char **out, size_t *len,
                             ph_diag *diag);

#endif
