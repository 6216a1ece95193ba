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

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/* What one walk from "/" accepts and how it names its refusals: the state
 * directory (missing directories are made, ancestors 0755 and the last
 * 0700; "." is skipped; the last is checked by ph_state_verify_dir), or
 * the proxy socket (nothing is made; "." is refused; the last is a unix
 * socket, and its own directory may be one other user's, below). */
typedef struct walk_policy {
    const char *code;   /* the stable codes' prefix */
    const char *name;   /* what messages call the path; NULL: the path walked so far */
    bool socket;        /* the last component is a unix socket; every refusal PH_E_INVAL */
    bool theirs_ok;     /* the last component's directory may be one other user's */
} walk_policy;

static const walk_policy STATE_DIR = {"state_dir", NULL, false, false};
static const walk_policy PROXY_SOCKET = {"proxy_socket", "spec.network.proxy_socket_path", true,
                                         true};

static ph_status refuse(const walk_policy *pol, ph_status st, const char *what,
                        const char *canon, const char *why, ph_diag *diag)
{
    /* Every refusal of the socket is PH_E_INVAL: its path is the spec's. */
    return ph_diag_set(diag, pol->socket ? PH_E_INVAL : st, 0, "%s_%s: %s: %s", pol->code, what,
                       pol->name ? pol->name : canon[0] ? canon : "/", why);
}

/* Whether exactly one more component follows at p. */
static bool next_is_last(const char *p)
{
    char c[256];
    bool too_long = false;
    return next_component(&p, c, sizeof c, &too_long) &&
           !next_component(&p, c, sizeof c, &too_long);
}

/* Opens path through a walk from "/", one O_NOFOLLOW component at a time,
 * that trusts only what root, the euid or (pol->theirs_ok) the socket's own
 * user can change:
 *  - no component is a symlink, "..", or (the socket) ".";
 *  - every directory above the last is trusted_ancestor's; with theirs_ok
 *    the last one's directory may instead belong to one other user (the
 *    proxy's, which runs unprivileged and owns its runtime directory) when
 *    nobody else can write in it and it is not itself in a directory others
 *    write in (anyone can make /tmp/pinhole-proxy before the proxy does);
 *  - in a directory others can write in, the next component is on its
 *    filesystem: what fstat sees of a mount point is the mounted root,
 *    which can claim any owner (a user's FUSE mount over a directory of
 *    theirs in /tmp says root, 0700);
 *  - the socket is a socket with one name (not a hard link of another),
 *    and root's, ours, or its directory's other user's; in a sticky
 *    directory others write in, root's or ours (anyone could have bound one
 *    under that name).
 * Otherwise a third local user could swap the state directory under the
 * service, or the proxy socket for their own or for a symlink to the
 * container runtime's, and the sandbox's egress would reach it. canon
 * (STATE_PATH_MAX bytes) gets the walked path. */
static ph_status walk(const char *path, const walk_policy *pol, int *fd_out, char *canon,
                      ph_diag *diag)
{
    *fd_out = -1;
    canon[0] = '\0';
    if (path == NULL || path[0] != '/')
        return ph_diag_set(diag, PH_E_INVAL, 0, "%s_not_absolute: %s must be an absolute path",
                           pol->code, pol->name ? pol->name : "the state directory");
    int dir = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat sb;
    bool shared = false;        /* the directory walked last is writable by others */
    uid_t dir_user = (uid_t)-1; /* its other user, when not root or ours */
    bool too_long = strlen(path) >= STATE_PATH_MAX;
    char why[128];
    ph_status st = PH_OK;
    if (dir < 0 || fstat(dir, &sb) != 0 || !trusted_ancestor(&sb, &shared)) {
        st = refuse(pol, PH_E_DENIED, "untrusted_ancestor", canon, "untrusted", diag);
        goto out;
    }
    dev_t parent_dev = sb.st_dev;
    const char *p = path;
    char comp[256];
    size_t used = 0;
    while (!too_long && next_component(&p, comp, sizeof comp, &too_long)) {
        bool dot = strcmp(comp, ".") == 0;
        if (dot && !pol->socket)
            continue;
        if (dot || strcmp(comp, "..") == 0) {
            st = refuse(pol, PH_E_INVAL, pol->socket ? "not_canonical" : "dotdot", path,
                        pol->socket ? "must not contain '.' or '..'" : "must not contain '..'",
                        diag);
            goto out;
        }
        const char *rest = p;
        char peek[256];
        bool last;
        do /* "." components after this one do not make it an ancestor */
            last = !next_component(&rest, peek, sizeof peek, &too_long);
        while (!pol->socket && !last && strcmp(peek, ".") == 0);
        if (too_long) /* refused below, before anything is made */
            break;
        used += (size_t)snprintf(canon + used, STATE_PATH_MAX - used, "/%s", comp);
        bool made = !pol->socket && mkdirat(dir, comp, last ? 0700 : 0755) == 0;
        if (!pol->socket && !made && errno != EEXIST) {
            st = refuse(pol, PH_E_IO, "create_failed", canon, strerror(errno), diag);
            goto out;
        }
        int flags = pol->socket ? O_PATH | (last ? 0 : O_DIRECTORY)
                                : (last ? O_RDONLY : O_PATH) | O_DIRECTORY;
        int next = openat(dir, comp, flags | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 || fstat(next, &sb) != 0) {
            int e = errno;
            struct stat lsb;
            if (next >= 0)
                close(next);
            st = fstatat(dir, comp, &lsb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lsb.st_mode)
                     ? refuse(pol, PH_E_DENIED, "symlink", canon,
                              "is a symlink (give the real path)", diag)
                     : refuse(pol, PH_E_IO, pol->socket ? "missing" : "unopenable", canon,
                              strerror(e), diag);
            goto out;
        }
        close(dir);
        dir = next;
        if (made && last)
            (void)fchmod(dir, 0700); /* whatever the umask left */
        if (shared && sb.st_dev != parent_dev) {
            st = refuse(pol, PH_E_DENIED,
                        pol->socket ? "untrusted_ancestor" : "mount_in_shared_dir", canon,
                        "a mount point in a directory others can write in", diag);
            goto out;
        }
        parent_dev = sb.st_dev;
        if (last)
            break;
        bool ours = sb.st_uid == 0 || sb.st_uid == geteuid();
        bool was_shared = shared;
        if (!trusted_ancestor(&sb, &shared)) {
            if (!pol->theirs_ok || ours || !S_ISDIR(sb.st_mode) || !next_is_last(p) ||
                was_shared || (sb.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
                snprintf(why, sizeof why, "a directory owned by uid %u or writable by others",
                         (unsigned)sb.st_uid);
                st = refuse(pol, PH_E_DENIED, "untrusted_ancestor", canon, why, diag);
                goto out;
            }
            shared = false;
        }
        dir_user = ours ? (uid_t)-1 : sb.st_uid;
    }
    if (too_long) {
        st = refuse(pol, PH_E_LIMIT, pol->socket ? "missing" : "too_long", canon,
                    "a component or the path is too long", diag);
    } else if (pol->socket) {
        bool ours = sb.st_uid == 0 || sb.st_uid == geteuid();
        snprintf(why, sizeof why, "belongs to uid %u, who does not control its directory",
                 (unsigned)sb.st_uid);
        if (!S_ISSOCK(sb.st_mode))
            st = refuse(pol, PH_E_INVAL, "not_socket", canon,
                        "not a unix socket (a symlink is not followed)", diag);
        else if (!ours && (shared || (dir_user != (uid_t)-1 && sb.st_uid != dir_user)))
            st = refuse(pol, PH_E_INVAL, "untrusted_owner", canon, why, diag);
        else if (sb.st_nlink != 1) {
            /* A second name of a socket (root's, such as the container
             * runtime's, linked where fs.protected_hardlinks=0 lets anyone)
             * would pass every owner check above. */
            snprintf(why, sizeof why, "has %llu names: a hard link of another socket",
                     (unsigned long long)sb.st_nlink);
            st = refuse(pol, PH_E_INVAL, "linked", canon, why, diag);
        }
    } else if (used == 0) {
        st = refuse(pol, PH_E_INVAL, "is_root", canon, "'/' cannot be the state directory", diag);
    } else {
        st = ph_state_verify_dir(dir, true, canon, diag);
    }
out:
    if (st != PH_OK) {
        if (dir >= 0)
            close(dir);
        return st;
    }
    *fd_out = dir;
    return PH_OK;
}

ph_status ph_state_dir_open(const char *path, int *fd_out, char **canon_out, ph_diag *diag)
{
    *fd_out = -1;
    *canon_out = malloc(STATE_PATH_MAX);
    if (*canon_out == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    ph_status st = walk(path, &STATE_DIR, fd_out, *canon_out, diag);
    if (st != PH_OK) {
        free(*canon_out);
        *canon_out = NULL;
    }
    return st;
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

int ph_state_lock_dir(int dir_fd)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc;
    while ((rc = flock(fd, LOCK_EX)) != 0 && errno == EINTR)
        ;
    if (rc != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
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

/* ---- the owner ---- */

/* Whether dir_fd holds an environment directory ("env-..."); true when it
 * cannot be read (the answer that keeps a claim). */
static bool holds_environments(int dir_fd)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0)
            close(fd);
        return true;
    }
    bool found = false;
    for (struct dirent *de; !found && (de = readdir(d)) != NULL;)
        found = strncmp(de->d_name, "env-", 4) == 0;
    closedir(d);
    return found;
}

/* The owner an unclaimed directory had under an earlier version, or NULL
 * (nothing of either's: anyone may claim it). */
static const char *earlier_owner(int dir_fd)
{
    struct stat sb;
    if (fstatat(dir_fd, "execd.lock", &sb, AT_SYMLINK_NOFOLLOW) == 0)
        return PH_STATE_OWNER_EXECD;
    return holds_environments(dir_fd) ? PH_STATE_OWNER_CLI : NULL;
}

ph_status ph_state_claim(int dir_fd, const char *owner, ph_diag *diag)
{
    static const char *const known[] = {PH_STATE_OWNER_EXECD, PH_STATE_OWNER_CLI};
    for (int tries = 0; tries < 3; tries++) {
        char *text = NULL;
        size_t len = 0;
        ph_status st = ph_state_read(dir_fd, PH_STATE_OWNER_FILE, &text, &len, diag);
        if (st == PH_OK) {
            const char *who = NULL;
            for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
                if (len == strlen(known[i]) + 1 && memcmp(text, known[i], len - 1) == 0 &&
                    text[len - 1] == '\n')
                    who = known[i];
            free(text);
            if (who != NULL && strcmp(who, owner) == 0)
                return PH_OK;
            return ph_diag_set(diag, PH_E_DENIED, 0,
                               "state_dir_owned: the state directory belongs to %s (its file '"
                               PH_STATE_OWNER_FILE "'), not to %s: give %s a state directory of "
                               "its own",
                               who ? who : "an unknown owner", owner, owner);
        }
        if (st != PH_E_NOT_FOUND)
            return st;
        const char *earlier = earlier_owner(dir_fd);
        if (earlier != NULL && strcmp(earlier, owner) != 0)
            return ph_diag_set(diag, PH_E_DENIED, 0,
                               "state_dir_owned: the state directory holds %s's %s, not %s's: "
                               "give %s a state directory of its own",
                               earlier,
                               strcmp(earlier, PH_STATE_OWNER_EXECD) == 0 ? "execd.lock"
                                                                          : "environments",
                               owner, owner);
        char line[64];
        int n = snprintf(line, sizeof line, "%s\n", owner);
        st = ph_file_write_atomic_at(dir_fd, PH_STATE_OWNER_FILE, line, (size_t)n, 0600,
                                     PH_WRITE_NO_REPLACE, NULL);
        if (st == PH_OK)
            return PH_OK;
        if (errno != EEXIST)
            return ph_diag_set(diag, PH_E_IO, 0, "state_write_failed: %s: %s",
                               PH_STATE_OWNER_FILE, strerror(errno));
        /* Claimed meanwhile: read whose it is. */
    }
    return ph_diag_set(diag, PH_E_IO, 0, "state_dir_owner_unreadable: %s keeps changing",
                       PH_STATE_OWNER_FILE);
}

void ph_state_release(int dir_fd, const char *owner)
{
    if (!holds_environments(dir_fd) && ph_state_claim(dir_fd, owner, NULL) == PH_OK)
        (void)unlinkat(dir_fd, PH_STATE_OWNER_FILE, 0);
}

static ph_status open_socket(const char *path, int *out, ph_diag *diag)
{
    char canon[STATE_PATH_MAX];
    return walk(path, &PROXY_SOCKET, out, canon, diag);
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
