/*
 * file_write_atomic.c - publishing a file so readers see the old bytes or the
 * new bytes, never a mix or a prefix (see file_write_atomic-int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "diag-int.h"
#include "file_write_atomic-int.h"

/* dir receives path's directory ("." when it has none). */
static void split_dir(const char *path, char *dir, size_t dircap, const char **base)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, dircap, ".");
        *base = path;
    } else if (slash == path) {
        snprintf(dir, dircap, "/");
        *base = slash + 1;
    } else {
        snprintf(dir, dircap, "%.*s", (int)(slash - path), path);
        *base = slash + 1;
    }
}

static ph_status write_all(int fd, const uint8_t *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return PH_E_IO;
        data += n;
        len -= (size_t)n;
    }
    return PH_OK;
}

ph_status ph_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                               int flags, ph_diag *diag)
{
    char dir[PATH_MAX], tmp[2 * PATH_MAX + 32];
    const char *base;
    if (path == NULL || *path == '\0' || strlen(path) >= PATH_MAX - 32)
        return ph_diag_set(diag, PH_E_INVAL, 0, "bad output path");
    split_dir(path, dir, sizeof dir, &base);
    if (*base == '\0')
        return ph_diag_set(diag, PH_E_INVAL, 0, "output path %s names a directory", path);
    int fd = -1;
    /* O_EXCL with an unpredictable name: never follows or reuses another
     * file, so a pre-planted symlink cannot redirect the write. */
    for (int attempt = 0; attempt < 16 && fd < 0; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)attempt;
        snprintf(tmp, sizeof tmp, "%s/.%s.tmp-%016llx", dir, base, (unsigned long long)r);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0 && errno != EEXIST)
            return ph_diag_set(diag, PH_E_IO, 0, "cannot create a temporary file in %s: %s", dir,
                               strerror(errno));
    }
    if (fd < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "cannot create a temporary file in %s", dir);
    const char *step = NULL;
    int err = 0;
    if (write_all(fd, data, len) != PH_OK)
        step = "write", err = errno;
    else if (fsync(fd) != 0)
        step = "fsync", err = errno;
    if (close(fd) != 0 && step == NULL)
        step = "close", err = errno;
    if (step == NULL && renameat2(AT_FDCWD, tmp, AT_FDCWD, path,
                                  (flags & PH_WRITE_NO_REPLACE) ? RENAME_NOREPLACE : 0) != 0)
        step = "rename", err = errno;
    if (step != NULL) {
        unlink(tmp);
        return ph_diag_set(diag, PH_E_IO, 0, "cannot write %s (%s): %s", path, step,
                           strerror(err));
    }
    /* The rename is durable only once the directory entry is on disk. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        int e = errno;
        if (dfd >= 0)
            close(dfd);
        return ph_diag_set(diag, PH_E_IO, 0, "wrote %s but cannot sync %s: %s", path, dir,
                           strerror(e));
    }
    close(dfd);
    return PH_OK;
}
