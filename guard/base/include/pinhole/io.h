/*
 * pinhole/io.h - writing a whole buffer to a descriptor; opening a file the
 * caller loads (a table, a key file, a configuration) only when it is a
 * regular file.
 */
#ifndef PINHOLE_IO_H
#define PINHOLE_IO_H

#include <stddef.h>
#include <sys/stat.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Writes all len bytes of buf to fd, retrying short writes and EINTR (for
 * blocking descriptors: EAGAIN is a failure like any other). Returns 0, or
 * -1 with errno set (EIO when write() returned 0). On failure an unknown
 * prefix may have been written. buf is borrowed; it may be NULL when len is 0.
 */
PH_API int ph_write_all(int fd, const void *buf, size_t len);

/*
 * Opens path (symlinks followed) for reading when it names a regular file,
 * and refuses anything else without waiting on it: a FIFO would block
 * open(2) until a writer comes (a daemon's loop stops), a device may act
 * when opened (a tty, a tape), a directory or a socket holds no contents.
 * The type is checked with stat(2) first, so such a file is not opened; the
 * open itself is O_NONBLOCK|O_NOCTTY|O_CLOEXEC (a FIFO or device swapped in
 * meanwhile cannot block or become the controlling terminal), and fstat(2)
 * of what was opened must show a regular file with the same device and
 * inode as the stat, else it is refused as replaced. On PH_OK *fd is the
 * open file (owned by the caller, to close; O_NONBLOCK cleared) and *sb (may
 * be NULL) its fstat. Returns PH_OK, PH_E_NOT_FOUND (no such file),
 * PH_E_INVAL (not a regular file, naming its type, or replaced while being
 * opened) or PH_E_IO (diag names the call and its error); every diagnostic
 * starts with path. path is borrowed.
 */
PH_API ph_status ph_open_regular(const char *path, int *fd, struct stat *sb, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_IO_H */
