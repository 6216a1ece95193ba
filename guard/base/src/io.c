/* io.c - writing a whole buffer; opening regular files only (pinhole/io.h). */
#include "pinhole/io.h"

#include "pinhole/diag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int ph_write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static const char *file_type(mode_t m)
{
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

static ph_status not_regular(const char *path, mode_t m, ph_diag *diag)
{
    return ph_diag_set(diag, PH_E_INVAL, 0, "%s is not a regular file (%s)", path, file_type(m));
}

ph_status ph_open_regular(const char *path, int *fd, struct stat *sb, ph_diag *diag)
{
    if (fd == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no output descriptor");
    *fd = -1;
    if (path == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no path");
    struct stat before, after;
    if (stat(path, &before) != 0)
        return ph_diag_set(diag, errno == ENOENT ? PH_E_NOT_FOUND : PH_E_IO, 0, "%s: %s", path,
                           strerror(errno));
    if (!S_ISREG(before.st_mode))
        return not_regular(path, before.st_mode, diag);
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0)
        return ph_diag_set(diag, errno == ENOENT ? PH_E_NOT_FOUND : PH_E_IO, 0, "%s: %s", path,
                           strerror(errno));
    ph_status st = PH_OK;
    int flags;
    if (fstat(f, &after) != 0)
        st = ph_diag_set(diag, PH_E_IO, 0, "%s: fstat: %s", path, strerror(errno));
    else if (!S_ISREG(after.st_mode))
        st = not_regular(path, after.st_mode, diag);
    else if (after.st_dev != before.st_dev || after.st_ino != before.st_ino)
        st = ph_diag_set(diag, PH_E_INVAL, 0, "%s was replaced while being opened", path);
    else if ((flags = fcntl(f, F_GETFL)) < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0)
        st = ph_diag_set(diag, PH_E_IO, 0, "%s: fcntl: %s", path, strerror(errno));
    if (st != PH_OK) {
        close(f);
        return st;
    }
    if (sb != NULL)
        *sb = after;
    *fd = f;
    return PH_OK;
}
