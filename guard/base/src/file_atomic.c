/*
 * file_atomic.c - publishing a file so readers see the old bytes or the new
 * bytes, never a mix or a prefix (pinhole/file_atomic.h).
 */
#include "pinhole/file_atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/io.h"

/* ".<name>.tmp-" + 16 hex digits must fit in tmp[]: names longer than this
 * get a temporary name from a prefix of theirs. */
#define TMP_NAME_KEEP (PH_ATOMIC_NAME_MAX - 24)

static void af_reset(ph_atomic_file *af)
{
    af->fd = -1;
    af->dir_fd = -1;
    af->own_dir = 0;
    af->tmp[0] = '\0';
    af->name[0] = '\0';
}

static bool valid_name(const char *name)
{
    size_t n = name ? strnlen(name, PH_ATOMIC_NAME_MAX + 1) : 0;
    return n > 0 && n <= PH_ATOMIC_NAME_MAX && memchr(name, '/', n) == NULL &&
           strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

ph_status ph_atomic_file_begin_at(ph_atomic_file *af, int dir_fd, const char *name,
                                  mode_t mode, ph_diag *diag)
{
    af_reset(af);
    if (!valid_name(name)) {
        errno = name && strlen(name) > PH_ATOMIC_NAME_MAX ? ENAMETOOLONG : EINVAL;
        return ph_diag_set(diag, PH_E_INVAL, 0, "bad file name for an atomic write");
    }
    af->dir_fd = dir_fd;
    snprintf(af->name, sizeof af->name, "%s", name);
    mode &= 07777;
    /* O_EXCL with an unpredictable name: never follows or reuses another
     * file, so a pre-planted symlink cannot redirect the write. */
    for (int attempt = 0; attempt < 16 && af->fd < 0; attempt++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = ((uint64_t)getpid() << 32) ^ (uint64_t)attempt; /* O_EXCL still guards */
        snprintf(af->tmp, sizeof af->tmp, ".%.*s.tmp-%016llx", TMP_NAME_KEEP, name,
                 (unsigned long long)r);
        af->fd = openat(dir_fd, af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        mode);
        if (af->fd < 0 && errno != EEXIST) {
            int e = errno;
            af_reset(af);
            errno = e;
            return ph_diag_set(diag, PH_E_IO, 0, "cannot create a temporary file for %s: %s",
                               name, strerror(e));
        }
    }
    if (af->fd < 0) {
        af_reset(af);
        errno = EEXIST;
        return ph_diag_set(diag, PH_E_IO, 0,
                           "cannot create a temporary file for %s: every name taken", name);
    }
    /* The final mode from the start, whatever the umask: the file is never
     * more open than asked, and never less. */
    if (fchmod(af->fd, mode) != 0) {
        int e = errno;
        ph_atomic_file_abort(af);
        errno = e;
        return ph_diag_set(diag, PH_E_IO, 0, "cannot set the mode of %s: %s", name,
                           strerror(e));
    }
    return PH_OK;
}

ph_status ph_atomic_file_begin(ph_atomic_file *af, const char *path, mode_t mode, ph_diag *diag)
{
    af_reset(af);
    if (path == NULL || *path == '\0' || strnlen(path, PATH_MAX) >= PATH_MAX) {
        errno = EINVAL;
        return ph_diag_set(diag, PH_E_INVAL, 0, "bad output path");
    }
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (!valid_name(base)) {
        errno = EINVAL;
        return ph_diag_set(diag, PH_E_INVAL, 0, "output path %s does not name a file", path);
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        ph_diag_set(diag, PH_E_IO, 0, "cannot open the directory %s: %s", dir, strerror(e));
        errno = e;
        return PH_E_IO;
    }
    ph_status st = ph_atomic_file_begin_at(af, dfd, base, mode, diag);
    if (st != PH_OK) {
        int e = errno;
        close(dfd);
        errno = e;
        return st;
    }
    af->own_dir = 1;
    return PH_OK;
}

ph_status ph_atomic_file_write(ph_atomic_file *af, const void *data, size_t len, ph_diag *diag)
{
    if (af->fd < 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "atomic write: the file has ended");
    if (ph_write_all(af->fd, data, len) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "cannot write %s: %s", af->name, strerror(errno));
    return PH_OK;
}

void ph_atomic_file_abort(ph_atomic_file *af)
{
    int e = errno;
    if (af->fd >= 0) {
        close(af->fd);
        (void)unlinkat(af->dir_fd, af->tmp, 0);
    }
    if (af->own_dir && af->dir_fd >= 0)
        close(af->dir_fd);
    af_reset(af);
    errno = e;
}

ph_status ph_atomic_file_commit(ph_atomic_file *af, int flags, ph_diag *diag)
{
    if (af->fd < 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "atomic write: the file has ended");
    const char *step = NULL;
    int err = 0;
    if (fsync(af->fd) != 0)
        step = "fsync", err = errno;
    if (close(af->fd) != 0 && step == NULL)
        step = "close", err = errno;
    af->fd = -1;
    if (step == NULL &&
        renameat2(af->dir_fd, af->tmp, af->dir_fd, af->name,
                  (flags & PH_WRITE_NO_REPLACE) ? RENAME_NOREPLACE : 0) != 0)
        step = "rename", err = errno;
    if (step != NULL) {
        (void)unlinkat(af->dir_fd, af->tmp, 0);
        char name[PH_ATOMIC_NAME_MAX + 1];
        memcpy(name, af->name, sizeof name);
        if (af->own_dir)
            close(af->dir_fd);
        af_reset(af);
        errno = err;
        return ph_diag_set(diag, PH_E_IO, 0, "cannot write %s (%s): %s", name, step,
                           strerror(err));
    }
    /* The rename is durable only once the directory entry is on disk. */
    ph_status st = PH_OK;
    if (fsync(af->dir_fd) != 0) {
        err = errno;
        st = ph_diag_set(diag, PH_E_IO, 0, "wrote %s but cannot sync its directory: %s",
                         af->name, strerror(err));
    }
    if (af->own_dir)
        close(af->dir_fd);
    af_reset(af);
    if (st != PH_OK)
        errno = err;
    return st;
}

/* Writes data into a begun file (st: how the begin went) and publishes it. */
static ph_status write_whole(ph_atomic_file *af, ph_status st, const void *data, size_t len,
                             int flags, ph_diag *diag)
{
    if (st == PH_OK)
        st = ph_atomic_file_write(af, data, len, diag);
    if (st != PH_OK) {
        ph_atomic_file_abort(af);
        return st;
    }
    return ph_atomic_file_commit(af, flags, diag);
}

ph_status ph_file_write_atomic_at(int dir_fd, const char *name, const void *data, size_t len,
                                  mode_t mode, int flags, ph_diag *diag)
{
    ph_atomic_file af;
    ph_status st = ph_atomic_file_begin_at(&af, dir_fd, name, mode, diag);
    return write_whole(&af, st, data, len, flags, diag);
}

ph_status ph_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                               int flags, ph_diag *diag)
{
    ph_atomic_file af;
    ph_status st = ph_atomic_file_begin(&af, path, mode, diag);
    return write_whole(&af, st, data, len, flags, diag);
}
