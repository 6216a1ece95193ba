/* unix_listen.c - a listening unix socket that replaces only a stale one,
 * and its removal at stop only while it is still ours
 * (pinhole/unix_listen.h). */
#include "pinhole/unix_listen.h"

#include "pinhole/diag.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* How long ph_unix_listen waits for another process's examination of the
 * same directory (milliseconds; each holds it for a connect at most). */
#define DIR_LOCK_WAIT_MS 2000

/* The path split at its last '/': the directory ("." or "/" when there is
 * none) and the last component. false when the last component is empty. */
static bool split(const char *path, char *dir, size_t cap, const char **name)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);
    if (slash == NULL)
        snprintf(dir, cap, ".");
    else
        snprintf(dir, cap, "%.*s", (int)n, path);
    *name = slash ? slash + 1 : path;
    return (*name)[0] != '\0';
}

/* The directory, opened and flocked (LOCK_EX) into *dfd: every
 * ph_unix_listen and ph_unix_listen_unlink on it runs alone, so none
 * replaces or removes a socket another has just put there. The lock goes
 * with the descriptor. */
static ph_status lock_dir(const char *dir, int *dfd, ph_diag *diag)
{
    *dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*dfd < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "unix_socket_dir: %s: %s", dir, strerror(errno));
    ph_status st;
    for (int waited = 0;; waited += 10) {
        if (flock(*dfd, LOCK_EX | LOCK_NB) == 0)
            return PH_OK;
        if (errno != EWOULDBLOCK && errno != EINTR) {
            st = ph_diag_set(diag, PH_E_IO, 0, "unix_socket_dir: flock %s: %s", dir,
                             strerror(errno));
            break;
        }
        if (waited >= DIR_LOCK_WAIT_MS) {
            st = ph_diag_set(diag, PH_E_TIMEOUT, 0,
                             "unix_socket_dir_busy: %s is held locked by another process", dir);
            break;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(*dfd);
    *dfd = -1;
    return st;
}

static const char *file_type(mode_t m)
{
    return S_ISLNK(m) ? "a symlink" : S_ISREG(m) ? "a regular file" : S_ISDIR(m) ? "a directory"
           : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a socket";
}

enum probe { PROBE_LIVE, PROBE_STALE, PROBE_GONE, PROBE_UNKNOWN };

/* Whether something accepts on the socket at sun: a non-blocking connect
 * that succeeds, or finds the queue full (EAGAIN), is live; ECONNREFUSED
 * (a socket file nobody listens on) is stale; ENOENT: gone meanwhile.
 * Anything else (EACCES: not ours to tell) is unknown, and refused. A live
 * holder's credentials go in *cred (pid 0 when unread). */
static enum probe probe(const struct sockaddr_un *sun, struct ucred *cred, int *err)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return PROBE_UNKNOWN;
    }
    enum probe p = PROBE_LIVE;
    if (connect(fd, (const struct sockaddr *)sun, sizeof *sun) != 0) {
        *err = errno;
        p = errno == EAGAIN ? PROBE_LIVE : errno == ECONNREFUSED ? PROBE_STALE
            : errno == ENOENT ? PROBE_GONE : PROBE_UNKNOWN;
    }
    socklen_t cl = sizeof *cred;
    if (p == PROBE_LIVE && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &cl) != 0)
        cred->pid = 0;
    close(fd);
    return p;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Puts the listening socket at dfd/tmp onto dfd/name, examining what name
 * holds (pinhole/unix_listen.h); dfd is locked. */
static ph_status place(int dfd, const char *tmp, const char *name, const char *path,
                       const struct sockaddr_un *sun, ph_diag *diag)
{
    for (int tries = 0; tries < 3; tries++) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)
                return ph_diag_set(diag, PH_E_IO, 0, "unix_socket_stat: %s: %s", path,
                                   strerror(errno));
            if (renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE) == 0)
                return PH_OK;
            if (errno != EEXIST)
                return ph_diag_set(diag, PH_E_IO, 0, "unix_socket_rename: %s: %s", path,
                                   strerror(errno));
            continue; /* a file appeared: examine it */
        }
        if (!S_ISSOCK(st.st_mode))
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "unix_socket_not_a_socket: %s is %s; refusing to replace it",
                               path, file_type(st.st_mode));
        struct ucred cred = {0};
        int err = 0;
        switch (probe(sun, &cred, &err)) {
        case PROBE_LIVE:
            if (cred.pid > 0)
                return ph_diag_set(diag, PH_E_DENIED, 0,
                                   "unix_socket_in_use: %s is served by a live listener "
                                   "(pid %d, uid %u); refusing to replace it",
                                   path, (int)cred.pid, (unsigned)cred.uid);
            return ph_diag_set(diag, PH_E_DENIED, 0,
                               "unix_socket_in_use: %s is served by a live listener; "
                               "refusing to replace it", path);
        case PROBE_UNKNOWN:
            return ph_diag_set(diag, PH_E_IO, 0,
                               "unix_socket_unprobed: cannot tell whether %s is served "
                               "(connect: %s); refusing to replace it", path, strerror(err));
        case PROBE_GONE:
            continue;
        case PROBE_STALE:
            break;
        }
        /* Stale: replaced by one rename, if the name still holds the file
         * probed (a process not using this lock may have changed it). */
        struct stat again;
        if (fstatat(dfd, name, &again, AT_SYMLINK_NOFOLLOW) != 0 || !same_file(&st, &again))
            continue;
        if (renameat(dfd, tmp, dfd, name) == 0)
            return PH_OK;
        return ph_diag_set(diag, PH_E_IO, 0, "unix_socket_rename: %s: %s", path,
                           strerror(errno));
    }
    return ph_diag_set(diag, PH_E_IO, 0, "unix_socket_changing: %s kept changing while it was "
                                         "examined", path);
}

ph_status ph_unix_listen(const char *path, unsigned mode, int backlog, ph_unix_listener *out,
                         ph_diag *diag)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    char dir[sizeof out->path];
    const char *name;
    struct sockaddr_un sun = {.sun_family = AF_UNIX}, tmp_sun = {.sun_family = AF_UNIX};
    size_t len = path ? strlen(path) : 0;
    if (len == 0 || !split(path, dir, sizeof dir, &name))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "unix_socket_bad_path: '%s' does not name a file in a directory",
                           path ? path : "");
    int n = snprintf(tmp_sun.sun_path, sizeof tmp_sun.sun_path, "%s.%d.tmp", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp_sun.sun_path)
        return ph_diag_set(diag, PH_E_LIMIT, 0,
                           "unix_socket_path_too_long: %s (at most %zu bytes)", path,
                           sizeof sun.sun_path - 1 - (size_t)(n - (int)len));
    memcpy(sun.sun_path, path, len + 1);
    memcpy(out->path, path, len + 1);
    const char *tmp = tmp_sun.sun_path + (name - path);
    int dfd;
    ph_status rc = lock_dir(dir, &dfd, diag);
    if (rc != PH_OK)
        return rc;
    /* A temporary name an earlier process of this pid left: only a socket
     * is removed. */
    struct stat st, bound;
    if (fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
        (void)unlinkat(dfd, tmp, 0);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    bool made = false;
    if (fd < 0 || bind(fd, (struct sockaddr *)&tmp_sun, sizeof tmp_sun) != 0) {
        rc = ph_diag_set(diag, PH_E_IO, 0, "unix_socket_bind: %s: %s", tmp_sun.sun_path,
                         strerror(errno));
    } else if (!(made = fstatat(dfd, tmp, &bound, AT_SYMLINK_NOFOLLOW) == 0) ||
               !S_ISSOCK(bound.st_mode) ||
               fchmodat(dfd, tmp, (mode_t)mode & 07777, AT_SYMLINK_NOFOLLOW) != 0 ||
               fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) != 0 || !same_file(&st, &bound) ||
               listen(fd, backlog) != 0) {
        rc = ph_diag_set(diag, PH_E_IO, 0, "unix_socket_listen: %s: %s", tmp_sun.sun_path,
                         strerror(errno));
    } else {
        rc = place(dfd, tmp, name, path, &sun, diag);
    }
    if (rc != PH_OK) {
        /* The temporary socket goes, if the name still holds it. */
        if (made && fstatat(dfd, tmp, &st, AT_SYMLINK_NOFOLLOW) == 0 && same_file(&st, &bound))
            (void)unlinkat(dfd, tmp, 0);
        if (fd >= 0)
            close(fd);
        memset(out, 0, sizeof *out);
        out->fd = -1;
    } else {
        out->fd = fd;
        out->dev = bound.st_dev;
        out->ino = bound.st_ino;
    }
    close(dfd); /* and the directory's lock */
    return rc;
}

bool ph_unix_listen_unlink(const ph_unix_listener *l)
{
    char dir[sizeof l->path];
    const char *name;
    if (l == NULL || l->ino == 0 || l->path[0] == '\0' || !split(l->path, dir, sizeof dir, &name))
        return false;
    /* Under the directory's lock, so a start replacing a stale socket
     * there is not undone; a lock not had in time leaves the path (a
     * stale socket, which the next start replaces). */
    int dfd;
    if (lock_dir(dir, &dfd, NULL) != PH_OK)
        return false;
    struct stat st;
    bool ours = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
                st.st_dev == l->dev && st.st_ino == l->ino;
    bool removed = ours && unlinkat(dfd, name, 0) == 0;
    close(dfd);
    return removed;
}
