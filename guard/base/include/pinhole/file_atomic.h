/*
 * pinhole/file_atomic.h - publishing a file whole or not at all: readers see
 * the old file or the new one, never a mix or a prefix, and a crash leaves
 * one of the two (plus at most a stray temporary file).
 *
 * One policy for every writer: a temporary file in the target's directory,
 * created O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC under an unpredictable name (a
 * pre-planted file or symlink there is never opened, followed or reused),
 * with exactly the requested mode (fchmod, whatever the umask); the data
 * written whole; fsync of the file; renameat within the directory (from the
 * caller's directory descriptor when it has one); fsync of the directory.
 * On any failure the temporary file is removed and the old file is left
 * untouched.
 */
#ifndef PINHOLE_FILE_ATOMIC_H
#define PINHOLE_FILE_ATOMIC_H

#include <stddef.h>
#include <sys/types.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    PH_WRITE_REPLACE = 0,    /* rename over an existing file */
    PH_WRITE_NO_REPLACE = 1, /* fail (PH_E_IO, errno EEXIST) if the name exists */
};

/* The longest name (one path component) a file can be published under. */
#define PH_ATOMIC_NAME_MAX 255

/*
 * A file being written. Fill it with ph_atomic_file_begin*, write through
 * ph_atomic_file_write or the descriptor fd, then end it with exactly one
 * ph_atomic_file_commit or ph_atomic_file_abort. The caller owns the struct
 * (usually on the stack); its fields are read-only to the caller.
 */
typedef struct ph_atomic_file {
    int fd;     /* the temporary file, open for writing; -1 once ended */
    int dir_fd; /* the directory; borrowed from the caller unless own_dir */
    int own_dir;
    char tmp[PH_ATOMIC_NAME_MAX + 1];  /* the temporary file's name in dir_fd */
    char name[PH_ATOMIC_NAME_MAX + 1]; /* the name to publish under */
} ph_atomic_file;

/*
 * Starts writing name (a single path component: no '/', not "." or "..")
 * in the directory dir_fd (not an O_PATH descriptor: it is fsync'd), which
 * the caller keeps open until the file is
 * committed or aborted. The temporary file gets mode (permission bits only)
 * exactly. Returns PH_OK, PH_E_INVAL (bad name) or PH_E_IO (diag names the
 * step; errno is kept).
 */
PH_API ph_status ph_atomic_file_begin_at(ph_atomic_file *af, int dir_fd, const char *name,
                                         mode_t mode, ph_diag *diag);

/* The same for a path: its directory ("." when it has none) is opened here
 * and closed when the file ends. */
PH_API ph_status ph_atomic_file_begin(ph_atomic_file *af, const char *path, mode_t mode,
                                      ph_diag *diag);

/* Writes all len bytes (retrying short writes and EINTR). On failure the
 * file stays open: the caller still commits or aborts (commit after a failed
 * write is not refused, so abort). */
PH_API ph_status ph_atomic_file_write(ph_atomic_file *af, const void *data, size_t len,
                                      ph_diag *diag);

/*
 * Publishes the file: fsync, close, rename to its name (renameat2
 * RENAME_NOREPLACE with PH_WRITE_NO_REPLACE), fsync of the directory. Ends
 * af whatever the result. On failure before the rename the temporary file is
 * removed and the old file is untouched; a failure to sync the directory
 * after the rename is reported (PH_E_IO) with the new file in place. errno
 * is the failing call's.
 */
PH_API ph_status ph_atomic_file_commit(ph_atomic_file *af, int flags, ph_diag *diag);

/* Removes the temporary file and ends af; the old file is untouched. Safe on
 * an ended af (does nothing). Keeps errno. */
PH_API void ph_atomic_file_abort(ph_atomic_file *af);

/* data[0..len) published at path (or at name in dir_fd) in one call. The
 * caller keeps ownership of data. Returns as ph_atomic_file_commit. */
PH_API ph_status ph_file_write_atomic(const char *path, const void *data, size_t len,
                                      mode_t mode, int flags, ph_diag *diag);
PH_API ph_status ph_file_write_atomic_at(int dir_fd, const char *name, const void *data,
                                         size_t len, mode_t mode, int flags, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_FILE_ATOMIC_H */
