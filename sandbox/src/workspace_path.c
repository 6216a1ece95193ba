/* workspace_path.c - workspace-relative paths: lexical normalization and
 * kernel-enforced containment (openat2 RESOLVE_BENEATH, or a component walk
 * with O_NOFOLLOW where openat2 does not exist). */
#include "sandbox-int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

bool ph_ws_force_component_walk = false;
_Atomic unsigned long ph_ws_components_resolved;

const char *ph_ws_path_verdict_code(ph_ws_path_verdict v)
{
    switch (v) {
    case PH_WS_PATH_OK: return "path_ok";
    case PH_WS_PATH_ABSOLUTE: return "path_absolute";
    case PH_WS_PATH_DOTDOT: return "path_dotdot";
    case PH_WS_PATH_NUL: return "path_nul";
    case PH_WS_PATH_TOO_LONG: return "path_too_long";
    case PH_WS_PATH_ESCAPE: return "path_escape";
    case PH_WS_PATH_IS_ROOT: return "path_is_root";
    }
    return "unknown";
}

ph_ws_path_verdict ph_ws_path_normalize(const char *path, size_t len, char *out, size_t out_cap)
{
    if (out_cap > 0)
        out[0] = '\0';
    if (path == NULL || out_cap < 2)
        return PH_WS_PATH_TOO_LONG;
    if (memchr(path, '\0', len) != NULL)
        return PH_WS_PATH_NUL;
    if (len > 0 && path[0] == '/')
        return PH_WS_PATH_ABSOLUTE;
    if (len > PH_WS_PATH_MAX)
        return PH_WS_PATH_TOO_LONG;

    size_t o = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && path[i] == '/')
            i++;
        size_t start = i;
        while (i < len && path[i] != '/')
            i++;
        size_t n = i - start;
        if (n == 0 || (n == 1 && path[start] == '.'))
            continue;
        if (n == 2 && path[start] == '.' && path[start + 1] == '.') {
            out[0] = '\0';
            return PH_WS_PATH_DOTDOT;
        }
        if (n > PH_WS_NAME_MAX || o + (o ? 1 : 0) + n + 1 > out_cap) {
            out[0] = '\0';
            return PH_WS_PATH_TOO_LONG;
        }
        if (o)
            out[o++] = '/';
        memcpy(out + o, path + start, n);
        o += n;
    }
    if (o == 0)
        out[o++] = '.';
    out[o] = '\0';
    return PH_WS_PATH_OK;
}

/* openat2 answers EAGAIN for two reasons: a rename or mount anywhere on
 * the host raced a ".." of the resolution (RESOLVE_BENEATH cannot then
 * prove the walk stayed beneath: a retry settles it), or the open itself
 * would block and O_NONBLOCK asked it not to: a write lease the sandbox
 * holds on the file (fcntl F_SETLEASE, open to any owner of a file where
 * the kernel is shared), which no retry ends before the kernel breaks the
 * lease (lease-break-time, 45 s) and its holder can take it again. So the
 * retries are few; after them the caller gets EAGAIN (file_busy). */
#define OPENAT2_RETRIES 64

static int openat2_beneath(int root_fd, const char *rel, int flags, mode_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)flags;
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = -1;
    for (int attempt = 0; attempt < OPENAT2_RETRIES; attempt++) {
        fd = syscall(SYS_openat2, root_fd, rel, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN)
            break;
    }
    return (int)fd;
}

/* The fallback: one component at a time, never following any symlink, so a
 * symlink anywhere in the path is refused (ELOOP/ENOTDIR), inside or not. */
static int walk_nofollow(int root_fd, const char *rel, int flags, mode_t mode)
{
    if (strcmp(rel, ".") == 0)
        return openat(root_fd, ".", flags | O_NOFOLLOW, mode);
    int cur = dup(root_fd);
    if (cur < 0)
        return -1;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        char comp[PH_WS_NAME_MAX + 1];
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        memcpy(comp, p, n);
        comp[n] = '\0';
        int next;
        if (slash)
            next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        else
            next = openat(cur, comp, flags | O_NOFOLLOW, mode);
        int saved = errno;
        if (next < 0 && saved == ENOTDIR) {
            /* Only picks the error code: a symlink where a directory was
             * expected is a refusal (the walk never follows one), a file
             * there is plain "not found". */
            struct stat sb;
            if (fstatat(cur, comp, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode))
                saved = ELOOP;
        }
        close(cur);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        if (!slash)
            return next;
        cur = next;
        p = slash + 1;
    }
}

int ph_ws_open_beneath(int root_fd, const char *normalized, int flags, mode_t mode)
{
    unsigned long components = 1;
    for (const char *p = normalized; *p != '\0'; p++)
        components += *p == '/';
    ph_ws_components_resolved += components;
    if (!ph_ws_force_component_walk) {
        int fd = openat2_beneath(root_fd, normalized, flags | O_CLOEXEC, mode);
        if (fd >= 0 || errno != ENOSYS)
            return fd;
    }
    return walk_nofollow(root_fd, normalized, flags | O_CLOEXEC, mode);
}

ph_status ph_ws_errno_status(int err, const char *path, ph_diag *diag)
{
    switch (err) {
    case EXDEV:
    case ELOOP:
        return ph_diag_set(diag, PH_E_DENIED, 0, "%s: '%s' resolves outside the workspace "
                           "(a symlink is never followed out of it)",
                           ph_ws_path_verdict_code(PH_WS_PATH_ESCAPE), path);
    case ENOENT:
        return ph_diag_set(diag, PH_E_NOT_FOUND, 0, "'%s' does not exist in the workspace", path);
    case ENOTDIR:
        return ph_diag_set(diag, PH_E_NOT_FOUND, 0,
                           "'%s': a component is not a directory (or is a symlink the "
                           "resolver does not follow)", path);
    case EISDIR:
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s' is a directory", path);
    case ENAMETOOLONG:
        return ph_diag_set(diag, PH_E_DENIED, 0, "%s: '%s'",
                           ph_ws_path_verdict_code(PH_WS_PATH_TOO_LONG), path);
    case ENOMEM:
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory resolving '%s'", path);
    case EAGAIN:
        return ph_diag_set(diag, PH_E_IO, 0,
                           "file_busy: '%s' is held by the sandbox (a lease) or kept changing "
                           "while it was resolved; try again",
                           path);
    default:
        return ph_diag_set(diag, PH_E_IO, 0, "'%s': %s", path, strerror(err));
    }
}

ph_status ph_ws_normalize_or_refuse(const char *path, char out[static PH_WS_PATH_MAX + 1],
                                    ph_diag *diag)
{
    if (path == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no path given");
    ph_ws_path_verdict v = ph_ws_path_normalize(path, strlen(path), out, PH_WS_PATH_MAX + 1);
    if (v != PH_WS_PATH_OK)
        return ph_diag_set(diag, PH_E_DENIED, 0, "%s: workspace paths are relative, without "
                           "'..', NUL or over-long components", ph_ws_path_verdict_code(v));
    return PH_OK;
}

const char *ph_ws_split_leaf(char *normalized)
{
    char *slash = strrchr(normalized, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    return slash + 1;
}
