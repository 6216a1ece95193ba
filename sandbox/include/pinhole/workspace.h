/*
 * pinhole/workspace.h - the WorkspaceFiles port (ADR-0029 decisions 8, 9).
 *
 * Reading and writing a sandbox's workspace is a capability separate from
 * executing in it: a ph_workspace can read, write, list and stat files by
 * workspace-relative path and can do nothing else. artifact.export holds one
 * of these, never an execution handle.
 *
 * Path rules (every function below applies them before touching anything):
 *  - a path is relative to the workspace root ("src/main.c"); "" and "."
 *    name the root itself;
 *  - absolute paths, ".." components, NUL bytes, components longer than 255
 *    bytes and paths longer than PH_WS_PATH_MAX are refused;
 *  - "//" and "." components are folded away (normalization);
 *  - resolution is done by the kernel beneath the workspace root
 *    (openat2 RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, or, where openat2 is
 *    missing, a component-by-component O_NOFOLLOW walk), so there is no
 *    check-then-open race and a symlink is never followed out of the
 *    workspace. A symlink that stays inside may be followed by openat2; the
 *    fallback walk follows no symlink at all.
 * A refusal returns PH_E_DENIED and the diagnostic message starts with the
 * stable code of ph_ws_path_verdict_code() ("path_absolute: ...").
 *
 * No host path crosses this API: every path in and out is workspace-relative.
 * A ph_workspace is not thread-safe for concurrent use of the same object;
 * distinct objects are independent.
 */
#ifndef PINHOLE_WORKSPACE_H
#define PINHOLE_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest accepted workspace-relative path, in bytes, without the NUL. */
#define PH_WS_PATH_MAX 4095
/* Longest accepted path component, in bytes. */
#define PH_WS_NAME_MAX 255

/* Why a workspace-relative path was refused. Stable codes via
 * ph_ws_path_verdict_code(); values are never renumbered. */
typedef enum ph_ws_path_verdict {
    PH_WS_PATH_OK = 0,
    PH_WS_PATH_ABSOLUTE = 1,     /* "path_absolute": starts with '/' */
    PH_WS_PATH_DOTDOT = 2,       /* "path_dotdot": has a ".." component */
    PH_WS_PATH_NUL = 3,          /* "path_nul": contains a NUL byte */
    PH_WS_PATH_TOO_LONG = 4,     /* "path_too_long": path or component too long */
    PH_WS_PATH_ESCAPE = 5,       /* "path_escape": resolution left the workspace (symlink) */
    PH_WS_PATH_IS_ROOT = 6,      /* "path_is_root": the root where a file is required */
} ph_ws_path_verdict;

/* Static stable snake_case code of v; "unknown" for out-of-range. Never NULL. */
PH_API const char *ph_ws_path_verdict_code(ph_ws_path_verdict v);

/*
 * Normalizes a workspace-relative path given as len bytes (not necessarily
 * NUL-terminated; a NUL inside the len bytes is refused). On PH_WS_PATH_OK,
 * out (caller-owned, out_cap bytes, out_cap >= PH_WS_PATH_MAX + 1 always
 * suffices) holds the normalized NUL-terminated path: "." for the root, else
 * components joined by single '/', no leading or trailing '/', no "." or ".."
 * component. Purely lexical: touches no file system. On any other verdict,
 * out is left as an empty string.
 */
PH_API ph_ws_path_verdict ph_ws_path_normalize(const char *path, size_t len, char *out,
                                               size_t out_cap);

/* The WorkspaceFiles capability. Opaque; owns a directory descriptor on the
 * workspace root and nothing else. */
typedef struct ph_workspace ph_workspace;

/*
 * Opens the WorkspaceFiles capability on a host directory. This is the
 * execution service's (and tests') constructor: callers inside the platform
 * obtain a ph_workspace from a lease (pinhole/sandbox.h) and never see the
 * host path. root_dir is only used here; the object keeps a descriptor.
 * On PH_OK *out is a new object the caller frees with ph_workspace_close.
 */
PH_API ph_status ph_workspace_open(const char *root_dir, ph_workspace **out, ph_diag *diag);

/* Frees *ws (NULL allowed) and sets *ws to NULL. Never touches the files. */
PH_API void ph_workspace_close(ph_workspace **ws);

typedef enum ph_ws_file_type {
    PH_WS_TYPE_FILE = 0,
    PH_WS_TYPE_DIR = 1,
    PH_WS_TYPE_SYMLINK = 2,
    PH_WS_TYPE_OTHER = 3, /* fifo, socket, device */
} ph_ws_file_type;

/* Static name of t: "file", "dir", "symlink", "other". */
PH_API const char *ph_ws_file_type_name(ph_ws_file_type t);

typedef struct ph_ws_stat {
    ph_ws_file_type type;
    uint64_t size;        /* bytes (symlink: length of its target text) */
    int64_t mtime_sec;    /* modification time, seconds since the epoch */
    uint32_t mode;        /* permission bits only (0777 mask) */
} ph_ws_stat;

/*
 * Stats path without following a final symlink (lstat semantics; the
 * directories leading to it are resolved beneath the root). Fills *out.
 * PH_E_NOT_FOUND when it does not exist, PH_E_DENIED on a path refusal.
 */
PH_API ph_status ph_workspace_stat(ph_workspace *ws, const char *path, ph_ws_stat *out,
                                   ph_diag *diag);

/*
 * Opens a regular file for streaming. On PH_OK *fd_out is a new read-only,
 * close-on-exec descriptor the caller owns and closes, and *st_out (may be
 * NULL) describes the file as opened (fstat of that descriptor, so the size
 * and the bytes belong to the same file). Refuses with PH_E_LIMIT when the
 * file is larger than max_bytes, or larger than the filesystem that holds it
 * (a sparse file: "file_over_workspace_size", so nothing read or exported
 * from a workspace exceeds its byte limit), PH_E_INVAL when it is not a regular file
 * (directory, fifo, device, socket: refused from the type of what the path
 * resolves to, never opened, so a command can neither make the reader block
 * nor learn from a fifo that it looked), and PH_E_IO "file_busy: ..." at once for a
 * file the sandbox holds a write lease on (opening it would wait for the
 * kernel to break the lease). The file may still be appended to by a
 * running command after the check: read at most st_out->size (<= max_bytes)
 * bytes from the descriptor.
 */
PH_API ph_status ph_workspace_open_read(ph_workspace *ws, const char *path, uint64_t max_bytes,
                                        int *fd_out, ph_ws_stat *st_out, ph_diag *diag);

/*
 * Reads a whole regular file into memory (at most max_bytes, else
 * PH_E_LIMIT and nothing is returned). On PH_OK *data is a new buffer of *len
 * bytes plus a terminating NUL not counted in *len; the caller frees it
 * with free().
 */
PH_API ph_status ph_workspace_read(ph_workspace *ws, const char *path, size_t max_bytes,
                                   uint8_t **data, size_t *len, ph_diag *diag);

/*
 * Writes len bytes to path atomically: a temporary file in the same directory,
 * fsync, then rename over path, so readers (and commands) see the old file or
 * the new one, never a part. Missing parent directories are created (0755)
 * beneath the root. mode is the permission of the new file (e.g. 0644). A
 * symlink at path is replaced, never followed. On failure nothing is left
 * behind (the temporary file is removed) and path is unchanged.
 */
PH_API ph_status ph_workspace_write(ph_workspace *ws, const char *path, const void *data,
                                    size_t len, uint32_t mode, ph_diag *diag);

/*
 * Like ph_workspace_write, but copies from src_fd until end of file. More
 * than max_bytes is PH_E_LIMIT and leaves path unchanged. src_fd is not
 * closed.
 */
PH_API ph_status ph_workspace_write_fd(ph_workspace *ws, const char *path, int src_fd,
                                       uint64_t max_bytes, uint32_t mode, ph_diag *diag);

/* One directory entry of a listing. */
typedef struct ph_ws_entry {
    char *name;      /* entry name (one component), owned by the list */
    ph_ws_stat st;   /* lstat of the entry */
} ph_ws_entry;

typedef struct ph_ws_list {
    ph_ws_entry *entries; /* sorted by name (byte order) */
    size_t count;
    bool truncated;       /* more than the caps allowed existed; which ones were kept is
                           * unspecified (directory order), the kept ones are sorted */
} ph_ws_list;

/* The most ph_workspace_list returns, whatever max_entries asks: entries,
 * and bytes of their names (NULs included). A sandbox controls how many
 * entries a directory holds (up to its workspace's inode limit, 64 Mi) and
 * their names (255 bytes each): without these a list would cost the caller
 * memory in proportion to the directory, not to the request. */
#define PH_WS_LIST_MAX_ENTRIES 10000
#define PH_WS_LIST_MAX_NAME_BYTES (1024 * 1024)

/*
 * Lists the directory at path ("" or "." for the root), without "." and
 * "..", sorted by name, at most max_entries entries and never more than
 * PH_WS_LIST_MAX_ENTRIES nor PH_WS_LIST_MAX_NAME_BYTES of names (truncated
 * says more existed). On PH_OK *out is a new list freed with ph_ws_list_free.
 */
PH_API ph_status ph_workspace_list(ph_workspace *ws, const char *path, size_t max_entries,
                                   ph_ws_list **out, ph_diag *diag);

/* Frees *list and everything in it (NULL allowed); sets *list to NULL. */
PH_API void ph_ws_list_free(ph_ws_list **list);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_WORKSPACE_H */
