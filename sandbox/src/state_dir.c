/* state_dir.c - the service's state directory, used only through
 * descriptors.
 *
 * The state directory holds every environment's spec, OCI bundle, runsc
 * state and workspace mount point, and the service (root, for gvisor and
 * docker) writes there files that runsc and docker then read as root. A
 * directory another user could create, replace or write in would let that
 * user hand root a config.json of their own. So:
 *  - the directory is created by the service, or refused: owner euid, mode
 *    0700, not a symlink, checked with fstat on the descriptor that
 *    open(O_DIRECTORY|O_NOFOLLOW) returned;
 *  - every ancestor, walked from "/" one O_NOFOLLOW component at a time, is
 *    a directory owned by root or euid that no one else can write in, or a
 *    sticky one (/tmp) in which the next component is root's or euid's (the
 *    sticky bit stops others renaming it) and on the sticky one's own
 *    filesystem (a mount there could be a user's FUSE mount, whose root
 *    claims any owner); no component is a symlink;
 *  - everything below is made and read with the *at() calls from verified
 *    descriptors, with O_NOFOLLOW, and what is read back (spec.json) must be
 *    a regular file owned by euid with no group or other bits, one link.
 * A host path is still needed where runsc or docker must be told where the
 * bundle or the workspace is; the path handed to them is the walked one
 * plus components this file created (0700, owned by euid), so no non-root
 * user can swap any component of it.
 */
#include "sandbox-int.h"

#include "pinhole/file_atomic.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_PATH_MAX 3072
#define STATE_READ_MAX (1024 * 1024)

/* The next component of *p (skipping '/'), copied into out; false at the end. */
static bool next_component(const char **p, char *out, size_t cap, bool *too_long)
{
    const char *s = *p;
    while (*s == '/')
        s++;
    if (*s == '\0')
        return false;
    size_t n = strcspn(s, "/");
    if (n >= cap) {
        *too_long = true;
        return false;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    *p = s + n;
    return true;
}

/* An ancestor is trusted when root or euid owns it and nobody else can
 * write in it, or when it is sticky (then its child is checked the same way
 * and the sticky bit keeps others from renaming that child). */
static bool trusted_ancestor(const struct stat *sb, bool *sticky_open)
{
    uid_t me = geteuid();
    if (!S_ISDIR(sb->st_mode) || (sb->st_uid != 0 && sb->st_uid != me))
        return false;
    *sticky_open = (sb->st_mode & (S_IWGRP | S_IWOTH)) != 0;
    return !*sticky_open || (sb->st_mode & S_ISVTX) != 0;
}

ph_status ph_state_verify_dir(int fd, bool exact_0700, const char *what, ph_diag *diag)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "state_dir_unreadable: %s: %s", what,
                           strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ph_diag_set(diag, PH_E_DENIED, 0, "state_dir_not_directory: %s", what);
    if (sb.st_uid != geteuid())
        return ph_diag_set(diag, PH_E_DENIED, 0,
                           "state_dir_wrong_owner: %s belongs to uid %u, not to this service "
                           "(uid %u)",
                           what, (unsigned)sb.st_uid, (unsigned)geteuid());
    if (exact_0700 ? (sb.st_mode & 07777) != 0700 : (sb.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return ph_diag_set(diag, PH_E_DENIED, 0, "state_dir_wrong_mode: %s has mode %04o, not %s",
                           what, (unsigned)(sb.st_mode & 07777),
                           exact_0700 ? "0700" : "writable by its owner only");
    return PH_OK;
}

ph_status ph_state_dir_open(const char *path, int *fd_out, char **canon_out, ph_diag *diag)
{
    *fd_out = -1;
    *canon_out = NULL;
    if (path == NULL || path[0] != '/')
        return ph_diag_set(diag, PH_E_INVAL, 0, "state_dir_not_absolute: the state directory "
                                                "must be an absolute path");
    if (strlen(path) >= STATE_PATH_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "state_dir_too_long");
    char *canon = malloc(STATE_PATH_MAX);
    if (canon == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    canon[0] = '\0';
    size_t used = 0;
    int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    ph_status st = PH_OK;
    struct stat sb;
    bool sticky_open = false;
    if (dir < 0 || fstat(dir, &sb) != 0 || !trusted_ancestor(&sb, &sticky_open)) {
        st = ph_diag_set(diag, PH_E_DENIED, 0, "state_dir_untrusted_ancestor: /");
        goto out;
    }
    dev_t parent_dev = sb.st_dev;
    const char *p = path;
    char comp[256];
    bool too_long = false;
    while (next_component(&p, comp, sizeof comp, &too_long)) {
        if (strcmp(comp, ".") == 0)
            continue;
        if (strcmp(comp, "..") == 0) {
            st = ph_diag_set(diag, PH_E_INVAL, 0, "state_dir_dotdot: the state directory path "
                                                  "must not contain '..'");
            goto out;
        }
        const char *rest = p;
        char peek[256];
        bool last;
        do /* "." components after this one do not make it an ancestor */
            last = !next_component(&rest, peek, sizeof peek, &too_long);
        while (!last && strcmp(peek, ".") == 0);
        if (too_long) /* refused below, before anything is made */
            break;
        used += (size_t)snprintf(canon + used, STATE_PATH_MAX - used, "/%s", comp);
        /* Missing components are made: ancestors 0755, the directory 0700. */
        bool made = mkdirat(dir, comp, last ? 0700 : 0755) == 0;
        if (!made && errno != EEXIST) {
            st = ph_diag_set(diag, PH_E_IO, 0, "state_dir_create_failed: %s: %s", canon,
                             strerror(errno));
            goto out;
        }
        int next = openat(dir, comp,
                          (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            int e = errno;
            struct stat lsb;
            bool link = fstatat(dir, comp, &lsb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lsb.st_mode);
            st = ph_diag_set(diag, link ? PH_E_DENIED : PH_E_IO, 0, "%s: %s %s",
                             link ? "state_dir_symlink" : "state_dir_unopenable", canon,
                             link ? "is a symlink (give the real path)" : strerror(e));
            goto out;
        }
        close(dir);
        dir = next;
        if (made && last)
            (void)fchmod(dir, 0700); /* whatever the umask left */
        if (fstat(dir, &sb) != 0) {
            st = ph_diag_set(diag, PH_E_IO, 0, "state_dir_unreadable: %s", canon);
            goto out;
        }
        /* What fstat sees of a mount point is the mounted root, which can
         * claim any owner (a user's FUSE mount over a directory they made
         * in /tmp says root, 0700): in a directory others can write in, a
         * component must be on its parent's filesystem. */
        if (sticky_open && sb.st_dev != parent_dev) {
            st = ph_diag_set(diag, PH_E_DENIED, 0,
                             "state_dir_mount_in_shared_dir: %s is a mount point in a directory "
                             "others can write in",
                             canon);
            goto out;
        }
        parent_dev = sb.st_dev;
        if (last)
            break;
        /* In a sticky, world-writable parent only the owner may rename this
         * entry: it must be root's or ours, like every other ancestor. */
        if (!trusted_ancestor(&sb, &sticky_open)) {
            st = ph_diag_set(diag, PH_E_DENIED, 0,
                             "state_dir_untrusted_ancestor: %s is owned by uid %u or writable "
                             "by others",
                             canon, (unsigned)sb.st_uid);
            goto out;
        }
    }
    if (too_long) {
        st = ph_diag_set(diag, PH_E_LIMIT, 0, "state_dir_too_long: a component is too long");
        goto out;
    }
    if (used == 0) {
        st = ph_diag_set(diag, PH_E_INVAL, 0, "state_dir_is_root: '/' cannot be the state "
                                              "directory");
        goto out;
    }
    st = ph_state_verify_dir(dir, true, canon, diag);
out:
    if (st != PH_OK) {
        if (dir >= 0)
            close(dir);
        free(canon);
        return st;
    }
    *fd_out = dir;
    *canon_out = canon;
    return PH_OK;
}

ph_status ph_state_dir_default(char **out, ph_diag *diag)
{
    *out = NULL;
    int n;
    if (geteuid() == 0) {
        n = asprintf(out, "%s", PH_STATE_DIR_ROOT_DEFAULT);
    } else {
        const char *xdg = getenv("XDG_STATE_HOME");
        const char *home = getenv("HOME");
        if (xdg != NULL && xdg[0] == '/')
            n = asprintf(out, "%s/pinhole/sandbox", xdg);
        else if (home != NULL && home[0] == '/')
            n = asprintf(out, "%s/.local/state/pinhole/sandbox", home);
        else
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "state_dir_no_default: neither XDG_STATE_HOME nor HOME is an "
                               "absolute path; give a state directory");
    }
    if (n < 0) {
        *out = NULL;
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    return PH_OK;
}

ph_status ph_state_mkdir(int dir_fd, const char *name, mode_t mode, bool exclusive, int *fd_out,
                         ph_diag *diag)
{
    *fd_out = -1;
    if (mkdirat(dir_fd, name, mode) != 0 && (exclusive || errno != EEXIST))
        return ph_diag_set(diag, errno == EEXIST ? PH_E_DENIED : PH_E_IO, 0,
                           "state_mkdir_failed: %s: %s", name, strerror(errno));
    return ph_state_opendir(dir_fd, name, fd_out, diag);
}

ph_status ph_state_opendir(int dir_fd, const char *name, int *fd_out, ph_diag *diag)
{
    *fd_out = -1;
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return ph_diag_set(diag,
                           errno == ENOENT  ? PH_E_NOT_FOUND
                           : errno == ELOOP || errno == ENOTDIR ? PH_E_DENIED
                                                                : PH_E_IO,
                           0, "state_open_failed: %s: %s", name, strerror(errno));
    ph_status st = ph_state_verify_dir(fd, false, name, diag);
    if (st != PH_OK) {
        close(fd);
        return st;
    }
    *fd_out = fd;
    return PH_OK;
}

ph_status ph_state_write(int dir_fd, const char *name, const void *data, size_t len,
                         mode_t mode, ph_diag *diag)
{
    ph_status st = ph_file_write_atomic_at(dir_fd, name, data, len, mode, PH_WRITE_REPLACE, NULL);
    if (st != PH_OK)
        return ph_diag_set(diag, st, 0,
                           "state_write_failed: %s: %s", name, strerror(errno));
    return PH_OK;
}

ph_status ph_state_read(int dir_fd, const char *name, char **out, size_t *len, ph_diag *diag)
{
    *out = NULL;
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return ph_diag_set(diag,
                           errno == ENOENT ? PH_E_NOT_FOUND
                           : errno == ELOOP ? PH_E_DENIED
                                            : PH_E_IO,
                           0, "%s: %s: %s", errno == ELOOP ? "state_file_symlink" : "state_read_failed",
                           name, strerror(errno));
    struct stat sb;
    ph_status st = PH_OK;
    if (fstat(fd, &sb) != 0)
        st = ph_diag_set(diag, PH_E_IO, 0, "state_read_failed: %s: %s", name, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = ph_diag_set(diag, PH_E_DENIED, 0, "state_file_not_regular: %s", name);
    else if (sb.st_uid != geteuid())
        st = ph_diag_set(diag, PH_E_DENIED, 0,
                         "state_file_wrong_owner: %s belongs to uid %u, not to this service", name,
                         (unsigned)sb.st_uid);
    else if ((sb.st_mode & 077) != 0 || sb.st_nlink != 1)
        st = ph_diag_set(diag, PH_E_DENIED, 0,
                         "state_file_wrong_mode: %s has mode %04o and %u links (want 0600, one)",
                         name, (unsigned)(sb.st_mode & 07777), (unsigned)sb.st_nlink);
    else if (sb.st_size > STATE_READ_MAX)
        st = ph_diag_set(diag, PH_E_LIMIT, 0, "state_file_too_large: %s", name);
    char *buf = st == PH_OK ? malloc((size_t)sb.st_size + 1) : NULL;
    if (st == PH_OK && buf == NULL)
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    size_t got = 0;
    while (st == PH_OK && got < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            st = ph_diag_set(diag, PH_E_IO, 0, "state_read_failed: %s", name);
        else
            got += (size_t)n;
    }
    close(fd);
    if (st != PH_OK) {
        free(buf);
        return st;
    }
    buf[got] = '\0';
    *out = buf;
    if (len != NULL)
        *len = got;
    return PH_OK;
}

/* Opens the proxy socket at path (O_PATH) through a walk from "/" that
 * trusts only what root, the euid or the socket's own user can change:
 *   - every directory above the socket's is trusted_ancestor's (owned by
 *     root or euid, writable by nobody else unless sticky);
 *   - the socket's directory may instead belong to one other user (the
 *     proxy's, which runs unprivileged and owns its runtime directory) when
 *     nobody else can write in it; the socket is then that user's, root's
 *     or ours;
 *   - in a sticky directory others can write in, the socket is root's or
 *     ours (anyone could have bound one under that name);
 *   - no component is a symlink.
 * Otherwise a third local user could swap the path for their own socket, or
 * for a symlink to one such as the container runtime's, and the sandbox's
 * egress would reach it instead of the proxy. */
/* Whether exactly one more component follows at p. */
static bool next_is_last(const char *p)
{
    char c[256];
    bool too_long = false;
    return next_component(&p, c, sizeof c, &too_long) &&
           !next_component(&p, c, sizeof c, &too_long);
}

static ph_status open_socket(const char *path, int *out, ph_diag *diag)
{
    *out = -1;
    if (path == NULL || path[0] != '/')
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "proxy_socket_not_absolute: spec.network.proxy_socket_path must be an "
                           "absolute path");
    int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat sb;
    bool sticky_open = false;
    if (dir < 0 || fstat(dir, &sb) != 0 || !trusted_ancestor(&sb, &sticky_open)) {
        if (dir >= 0)
            close(dir);
        return ph_diag_set(diag, PH_E_INVAL, 0, "proxy_socket_untrusted_ancestor: /");
    }
    const char *p = path;
    char comp[256];
    bool too_long = false;
    uid_t dir_user = (uid_t)-1; /* the socket directory's other user, if any */
    dev_t parent_dev = sb.st_dev;
    ph_status st = PH_OK;
    while (st == PH_OK && next_component(&p, comp, sizeof comp, &too_long)) {
        const char *rest = p;
        char peek[256];
        bool last = !next_component(&rest, peek, sizeof peek, &too_long);
        if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
            st = ph_diag_set(diag, PH_E_INVAL, 0,
                             "proxy_socket_not_canonical: spec.network.proxy_socket_path must "
                             "not contain '.' or '..'");
            break;
        }
        int next = openat(dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
        struct stat lsb;
        bool opened = next >= 0 && fstat(next, &sb) == 0;
        bool ours = opened && (sb.st_uid == 0 || sb.st_uid == geteuid());
        if (!opened) {
            bool link = fstatat(dir, comp, &lsb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lsb.st_mode);
            st = link ? ph_diag_set(diag, PH_E_INVAL, 0,
                                    "proxy_socket_symlink: a directory of "
                                    "spec.network.proxy_socket_path is a symlink (give the real "
                                    "path)")
                      : ph_diag_set(diag, PH_E_INVAL, 0,
                                    "proxy_socket_missing: spec.network.proxy_socket_path cannot "
                                    "be opened: %s",
                                    strerror(errno));
        } else if (sticky_open && sb.st_dev != parent_dev) {
            /* What fstat sees of a mount point is the mounted root, which
             * can claim any owner (a user's FUSE mount over a directory of
             * theirs in /tmp says root). */
            st = ph_diag_set(diag, PH_E_INVAL, 0,
                             "proxy_socket_untrusted_ancestor: a mount point in a directory "
                             "others can write in is on spec.network.proxy_socket_path");
        } else if (last && !S_ISSOCK(sb.st_mode)) {
            st = ph_diag_set(diag, PH_E_INVAL, 0,
                             "proxy_socket_not_socket: spec.network.proxy_socket_path is not a "
                             "unix socket (a symlink is not followed)");
        } else if (last && !ours &&
                   (sticky_open || (dir_user != (uid_t)-1 && sb.st_uid != dir_user))) {
            st = ph_diag_set(diag, PH_E_INVAL, 0,
                             "proxy_socket_untrusted_owner: spec.network.proxy_socket_path "
                             "belongs to uid %u, who does not control its directory",
                             (unsigned)sb.st_uid);
        } else if (!last) {
            /* The socket's own directory may be one other user's. */
            bool shared = (sb.st_mode & (S_IWGRP | S_IWOTH)) != 0;
            bool socket_dir = next_is_last(p);
            /* Another user's socket directory is theirs only when nobody
             * else could have made it: not in a directory others write in
             * (anyone can create /tmp/pinhole-proxy before the proxy does). */
            if (!S_ISDIR(sb.st_mode) || (shared && (sb.st_mode & S_ISVTX) == 0) ||
                (!ours && (!socket_dir || shared || sticky_open)))
                st = ph_diag_set(diag, PH_E_INVAL, 0,
                                 "proxy_socket_untrusted_ancestor: a directory of "
                                 "spec.network.proxy_socket_path is owned by uid %u or "
                                 "writable by others",
                                 (unsigned)sb.st_uid);
            sticky_open = shared;
            dir_user = ours ? (uid_t)-1 : sb.st_uid;
            parent_dev = sb.st_dev;
        }
        close(dir);
        dir = next;
        if (last)
            break;
    }
    if (st == PH_OK && too_long)
        st = ph_diag_set(diag, PH_E_INVAL, 0,
                         "proxy_socket_missing: a component of spec.network.proxy_socket_path is "
                         "too long");
    if (st == PH_OK && (dir < 0 || fstat(dir, &sb) != 0 || !S_ISSOCK(sb.st_mode)))
        st = ph_diag_set(diag, PH_E_INVAL, 0,
                         "proxy_socket_not_socket: spec.network.proxy_socket_path is not a unix "
                         "socket");
    if (st != PH_OK) {
        if (dir >= 0)
            close(dir);
        return st;
    }
    *out = dir;
    return PH_OK;
}

ph_status ph_state_check_socket(const char *path, ph_diag *diag)
{
    int fd;
    ph_status st = open_socket(path, &fd, diag);
    if (st == PH_OK)
        close(fd);
    return st;
}

/* ---- fault injection (tests only set it) ---- */

ph_sandbox_fault_fn *ph_sandbox_fault = NULL;

ph_status ph_fault_point(const char *step, ph_diag *diag)
{
    if (ph_sandbox_fault == NULL)
        return PH_OK;
    ph_status st = ph_sandbox_fault(step);
    if (st != PH_OK)
        return ph_diag_set(diag, st, 0, "fault_injected: %s", step);
    return PH_OK;
}

/* ---- the proxy socket, pinned ---- */

ph_status ph_state_pin_socket(int dir_fd, const char *name, const char *socket_path, ph_diag *diag)
{
    int sock;
    ph_status st = open_socket(socket_path, &sock, diag);
    if (st != PH_OK)
        return st;
    int stub = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (stub < 0) {
        int e = errno;
        close(sock);
        return ph_diag_set(diag, PH_E_IO, 0, "proxy_socket_pin_failed: %s", strerror(e));
    }
    close(stub);
    /* A detached bind mount of the very inode checked above, attached onto
     * the stub: what runsc or docker later open is that socket, whatever
     * happens to the operator's path meanwhile. */
    int tree = open_tree(sock, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    st = ph_fault_point("proxy_pin", diag);
    if (st == PH_OK && (tree < 0 || move_mount(tree, "", dir_fd, name, MOVE_MOUNT_F_EMPTY_PATH) != 0))
        st = ph_diag_set(diag, PH_E_IO, 0, "proxy_socket_pin_failed: %s", strerror(errno));
    if (tree >= 0)
        close(tree);
    close(sock);
    if (st != PH_OK)
        (void)unlinkat(dir_fd, name, 0);
    return st;
}

void ph_state_unpin(int dir_fd, const char *dir_path, const char *name)
{
    struct stat sb;
    if (fstatat(dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    /* The socket may live on the state directory's filesystem, so st_dev
     * cannot tell a mount point: unmount whatever is there (EINVAL when
     * nothing is), then remove the stub. */
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir_path, name) < (int)sizeof path &&
        umount2(path, UMOUNT_NOFOLLOW) != 0 && errno != EINVAL)
        (void)umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH);
    (void)unlinkat(dir_fd, name, 0);
}
