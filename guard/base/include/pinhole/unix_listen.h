/*
 * pinhole/unix_listen.h - a daemon's listening unix socket at a path: made
 * without taking the path from anyone who still serves there, and removed
 * at the daemon's stop only while it is still the daemon's own.
 *
 * A path in a directory may be claimed by several daemons over time (a
 * restart, two units given the same --socket by mistake). Replacing the file
 * there unconditionally cuts a live daemon's clients off, and unlinking it
 * unconditionally at stop removes the socket of whoever took the path
 * since. So a socket file found at the path is replaced only when nothing
 * accepts on it (a connect is refused: ECONNREFUSED), and at stop the path
 * is unlinked only when it still names the inode this process bound.
 */
#ifndef PINHOLE_UNIX_LISTEN_H
#define PINHOLE_UNIX_LISTEN_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/un.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A socket bound by ph_unix_listen; caller-owned, usually static or on the
 * stack. fd is the caller's (to close, or to hand on); dev and ino name the
 * socket file at path for ph_unix_listen_unlink. */
typedef struct ph_unix_listener {
    int fd;                                  /* -1 when none */
    dev_t dev;
    ino_t ino;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
} ph_unix_listener;

/*
 * Listens on a unix stream socket at path (non-blocking, close-on-exec,
 * file mode `mode`, `backlog` pending connections). The socket is bound and
 * listening under a temporary name beside path ("PATH.<pid>.tmp") and
 * renamed onto path, so whoever sees the path can connect. What path holds
 * decides:
 *  - nothing: the socket is put there (never over a file that appears
 *    meanwhile);
 *  - a socket nothing accepts on (a connect fails with ECONNREFUSED: a
 *    stopped or killed daemon's): it is replaced, if it is still that file;
 *  - a socket something accepts on (or whose queue is full): refused,
 *    PH_E_DENIED, "unix_socket_in_use: PATH is served by a live listener
 *    (pid N, uid U); refusing to replace it". Nothing is changed;
 *  - a symlink (never followed), a regular file or anything else: refused,
 *    PH_E_INVAL, "unix_socket_not_a_socket: PATH is a symlink|regular
 *    file|...". Nothing is changed.
 * Another process using this function on the same directory is kept out
 * while the path is examined and replaced (an flock of the directory, held
 * for milliseconds; PH_E_TIMEOUT "unix_socket_dir_busy" when another holds
 * it for over 2 s). A path too long for sun_path with the temporary suffix
 * is PH_E_LIMIT ("unix_socket_path_too_long"); a failing call PH_E_IO naming
 * it. Every diagnostic starts with its stable code. On PH_OK *out holds the
 * socket; otherwise out->fd is -1 and no file was left behind. path is
 * borrowed.
 */
PH_API ph_status ph_unix_listen(const char *path, unsigned mode, int backlog,
                                ph_unix_listener *out, ph_diag *diag);

/*
 * At stop: removes l->path when it still names the socket file l bound
 * (same st_dev and st_ino, not followed), else leaves it (another daemon
 * bound the path since, or someone put a file there). Does not close
 * l->fd. Returns true when the path was removed. l is borrowed.
 */
PH_API bool ph_unix_listen_unlink(const ph_unix_listener *l);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_UNIX_LISTEN_H */
