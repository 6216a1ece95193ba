/*
 * pinhole/io.h - writing a whole buffer to a descriptor.
 */
#ifndef PINHOLE_IO_H
#define PINHOLE_IO_H

#include <stddef.h>

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

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_IO_H */
