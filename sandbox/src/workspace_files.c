/* workspace_files.c - the WorkspaceFiles port: read, write, list, stat by
 * workspace-relative path, every resolution beneath the root descriptor. */
#include "sandbox-int.h"

#include "pinhole/file_atomic.h"
#include "pinhole/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

struct ph_workspace {
    int root_fd; /* O_PATH | O_DIRECTORY on the workspace root */
};

const char *ph_ws_file_type_name(ph_ws_file_type t)
{
    switch (t) {
    case PH_WS_TYPE_FILE: return "file";
    case PH_WS_TYPE_DIR: return "dir";
    case PH_WS_TYPE_SYMLINK: return "symlink";
    case PH_WS_TYPE_OTHER: return "other";
    }
    return "other";
}

static void fill_stat(const struct stat *st, ph_ws_stat *out)
{
    if (S_ISREG(st->st_mode))
        out->type = PH_WS_TYPE_FILE;
    else if (S_ISDIR(st->st_mode))
        out->type = PH_WS_TYPE_DIR;
    else if (S_ISLNK(st->st_mode))
        out->type = PH_WS_TYPE_SYMLINK;
    else
        out->type = PH_WS_TYPE_OTHER;
    out->size = (uint64_t)st->st_size;
    out->mtime_sec = (int64_t)st->st_mtim.tv_sec;
    out->mode = (uint32_t)(st->st_mode & 0777);
}

ph_status ph_workspace_open(const char *root_dir, ph_workspace **out, ph_diag *diag)
{
    if (root_dir == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_open: NULL argument");
    *out = NULL;
    int fd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        /* The host path stays out of the message on purpose. */
        return ph_diag_set(diag, errno == ENOENT ? PH_E_NOT_FOUND : PH_E_IO, 0,
                           "cannot open the workspace root: %s", strerror(errno));
    return ph_workspace_from_fd(fd, out, diag);
}

ph_status ph_workspace_from_fd(int root_fd, ph_workspace **out, ph_diag *diag)
{
    ph_workspace *ws = calloc(1, sizeof *ws);
    if (ws == NULL) {
        close(root_fd);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    ws->root_fd = root_fd;
    *out = ws;
    return PH_OK;
}

void ph_workspace_close(ph_workspace **ws)
{
    if (ws == NULL || *ws == NULL)
        return;
    close((*ws)->root_fd);
    free(*ws);
    *ws = NULL;
}

int ph_workspace_root_fd(const ph_workspace *ws)
{
    return ws->root_fd;
}

/* The gvisor mechanism hands the workspace root to the sandbox's
 * non-root user; entries the service (root) creates take the root's owner
 * too, so commands can modify what the service wrote. Without privilege
 * (the service is that user already) this is a no-op. fd is the entry
 * itself (O_PATH will do), never a name: a command running meanwhile could
 * swap a name for a hard link to a file outside the workspace. */
static void give_to_workspace_owner(int root_fd, int fd)
{
    struct stat root_sb;
    if (geteuid() == 0 && fstat(root_fd, &root_sb) == 0)
        if (fchownat(fd, "", root_sb.st_uid, root_sb.st_gid, AT_EMPTY_PATH) != 0) {
            /* best effort: the command then cannot modify this entry */
        }
}

/* Makes every missing directory of the normalized path norm (the whole of
 * it) and returns an O_PATH descriptor of the last, or -1 and errno. The
 * longest prefix that exists is found by a binary search of resolutions
 * from the root (along one path, existence is monotonic), so a path of n
 * components costs O(n log n) component lookups: resolving every prefix
 * from the root again cost O(n^2), 4 million lookups and over a second of
 * the service's time for one 4 KiB request making 2,046 directories. The
 * rest is made one component at a time from the descriptor of the one
 * before and opened O_NOFOLLOW, so a symlink planted meanwhile is refused,
 * never followed. */
static int make_dirs(ph_workspace *ws, char *norm)
{
    size_t ends[PH_WS_PATH_MAX / 2 + 1]; /* where each component ends */
    size_t n = 0;
    for (size_t i = 0;; i++) {
        if (norm[i] == '/' || norm[i] == '\0')
            ends[n++] = i;
        if (norm[i] == '\0')
            break;
    }
    /* lo components exist; hi + 1 do not (or n is reached). */
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo + 1) / 2;
        char saved = norm[ends[mid - 1]];
        norm[ends[mid - 1]] = '\0';
        int fd = ph_ws_open_beneath(ws->root_fd, norm, O_PATH | O_DIRECTORY, 0);
        int e = errno;
        norm[ends[mid - 1]] = saved;
        if (fd >= 0) {
            close(fd);
            lo = mid;
        } else if (e == ENOENT) {
            hi = mid - 1;
        } else {
            errno = e; /* a file or a symlink out of the workspace on the way */
            return -1;
        }
    }
    int cur;
    if (lo == 0) {
        cur = fcntl(ws->root_fd, F_DUPFD_CLOEXEC, 0);
    } else {
        char saved = norm[ends[lo - 1]];
        norm[ends[lo - 1]] = '\0';
        cur = ph_ws_open_beneath(ws->root_fd, norm, O_PATH | O_DIRECTORY, 0);
        norm[ends[lo - 1]] = saved;
    }
    for (size_t i = lo; cur >= 0 && i < n; i++) {
        char name[PH_WS_NAME_MAX + 1];
        size_t start = i == 0 ? 0 : ends[i - 1] + 1;
        memcpy(name, norm + start, ends[i] - start);
        name[ends[i] - start] = '\0';
        /* An O_PATH descriptor serves mkdirat and openat as a base. */
        bool made = mkdirat(cur, name, 0755) == 0;
        if (!made && errno != EEXIST) {
            int e = errno;
            close(cur);
            errno = e;
            return -1;
        }
        /* A directory cannot be hard-linked and O_NOFOLLOW refuses a
         * symlink put in its place. */
        int next = openat(cur, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(cur);
        if (next >= 0 && made)
            give_to_workspace_owner(ws->root_fd, next);
        cur = next;
        errno = e;
    }
    return cur;
}

/* Opens the directory holding the leaf of `norm` (which is modified: the
 * leaf is cut off and returned in *leaf). With create, missing directories
 * are made (make_dirs). */
static ph_status open_parent(ph_workspace *ws, char *norm, bool create, int *dir_fd,
                             const char **leaf, const char *shown, ph_diag *diag)
{
    *leaf = ph_ws_split_leaf(norm);
    if (*leaf == NULL) {
        *leaf = norm;
        *dir_fd = dup(ws->root_fd);
        if (*dir_fd < 0)
            return ph_diag_set(diag, PH_E_IO, 0, "dup: %s", strerror(errno));
        return PH_OK;
    }
    int fd = ph_ws_open_beneath(ws->root_fd, norm, O_PATH | O_DIRECTORY, 0);
    if (fd < 0 && errno == ENOENT && create)
        fd = make_dirs(ws, norm);
    if (fd < 0)
        return ph_ws_errno_status(errno, shown, diag);
    *dir_fd = fd;
    return PH_OK;
}

/* Whether path ends with a slash (or "/."): as in POSIX it then names a
 * directory, and resolving it to a file is refused (normalization alone
 * would drop the slash and read "ok.txt/" as ok.txt). */
static bool names_directory(const char *path)
{
    size_t n = strlen(path);
    while (n >= 2 && path[n - 1] == '.' && path[n - 2] == '/')
        n--;
    return n > 1 && path[n - 1] == '/';
}

static ph_status not_directory(const char *path, ph_diag *diag)
{
    return ph_diag_set(diag, PH_E_INVAL, 0,
                       "path_not_directory: '%s' ends with a slash but is not a directory", path);
}

/* Normalizes path for an operation on a file (not the root itself). */
static ph_status normalize_file_path(const char *path, char norm[static PH_WS_PATH_MAX + 1],
                                     const char *what, ph_diag *diag)
{
    if (path != NULL && names_directory(path))
        return not_directory(path, diag);
    ph_status st = ph_ws_normalize_or_refuse(path, norm, diag);
    if (st == PH_OK && strcmp(norm, ".") == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "%s: %s",
                           ph_ws_path_verdict_code(PH_WS_PATH_IS_ROOT), what);
    return st;
}

ph_status ph_workspace_stat(ph_workspace *ws, const char *path, ph_ws_stat *out, ph_diag *diag)
{
    char norm[PH_WS_PATH_MAX + 1];
    if (ws == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_stat: NULL argument");
    ph_status st = ph_ws_normalize_or_refuse(path, norm, diag);
    if (st != PH_OK)
        return st;
    struct stat sb;
    if (strcmp(norm, ".") == 0) {
        if (fstat(ws->root_fd, &sb) != 0)
            return ph_ws_errno_status(errno, path, diag);
        fill_stat(&sb, out);
        return PH_OK;
    }
    int dir_fd;
    const char *leaf;
    st = open_parent(ws, norm, false, &dir_fd, &leaf, path, diag);
    if (st != PH_OK)
        return st;
    int rc = fstatat(dir_fd, leaf, &sb, AT_SYMLINK_NOFOLLOW);
    int saved = errno;
    close(dir_fd);
    if (rc != 0)
        return ph_ws_errno_status(saved, path, diag);
    if (names_directory(path) && !S_ISDIR(sb.st_mode))
        return not_directory(path, diag);
    fill_stat(&sb, out);
    return PH_OK;
}

/* Opens the regular file norm resolves to for reading, O_NONBLOCK (a
 * sandbox's lease makes the open fail with EAGAIN instead of waiting), and
 * fills *sb. The path is resolved once, as O_PATH, which opens nothing: a
 * fifo (whose open for reading releases a writer the sandbox keeps waiting
 * in open(2)) or a device (whose open can act: a tty, a tape, a watchdog)
 * is refused from the type of what was resolved without ever being
 * opened. The regular file is then opened through that descriptor:
 * /proc/self/fd/N names that very file, so nothing can be swapped in
 * between. Without /proc the path is resolved again and must give the same
 * file (a fifo swapped in meanwhile is opened, O_NONBLOCK, then refused).
 * -1 and errno on failure; -2 when it is not a regular file. */
static int open_regular(ph_workspace *ws, const char *norm, struct stat *sb)
{
    int pfd = ph_ws_open_beneath(ws->root_fd, norm, O_PATH, 0);
    if (pfd < 0)
        return -1;
    if (fstat(pfd, sb) != 0) {
        int e = errno;
        close(pfd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(sb->st_mode)) {
        close(pfd);
        /* The fallback walk opens a final symlink itself (O_PATH |
         * O_NOFOLLOW) where it refused one before: still a refusal. */
        errno = ELOOP;
        return S_ISLNK(sb->st_mode) ? -1 : -2;
    }
    const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", pfd);
    int fd = open(self, flags);
    if (fd < 0 && errno == ENOENT)
        fd = ph_ws_open_beneath(ws->root_fd, norm, flags, 0);
    int e = errno;
    close(pfd);
    struct stat now;
    if (fd >= 0 && (fstat(fd, &now) != 0 || !S_ISREG(now.st_mode) ||
                    now.st_dev != sb->st_dev || now.st_ino != sb->st_ino)) {
        close(fd);
        return -2;
    }
    if (fd >= 0)
        *sb = now;
    errno = e;
    return fd;
}

ph_status ph_workspace_open_read(ph_workspace *ws, const char *path, uint64_t max_bytes,
                                 int *fd_out, ph_ws_stat *st_out, ph_diag *diag)
{
    char norm[PH_WS_PATH_MAX + 1];
    if (ws == NULL || fd_out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_open_read: NULL argument");
    *fd_out = -1;
    ph_status st = normalize_file_path(path, norm, "the workspace root is a directory", diag);
    if (st != PH_OK)
        return st;
    struct stat sb;
    int fd = open_regular(ws, norm, &sb);
    if (fd == -2)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s' is not a regular file", path);
    if (fd < 0)
        return ph_ws_errno_status(errno, path, diag);
    if ((uint64_t)sb.st_size > max_bytes) {
        close(fd);
        return ph_diag_set(diag, PH_E_LIMIT, 0, "'%s' is %llu bytes, over the cap of %llu",
                           path, (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
    }
    /* A file cannot be larger than the space that held it: a sparse one
     * (truncate -s 1G in a 16 MiB workspace) would be read as its size in
     * zeros, a 64x amplification of what the workspace limit allows. */
    struct statvfs v;
    if (fstatvfs(fd, &v) == 0 && (uint64_t)sb.st_size > (uint64_t)v.f_blocks * v.f_frsize) {
        close(fd);
        return ph_diag_set(diag, PH_E_LIMIT, 0,
                           "file_over_workspace_size: '%s' is %llu bytes, more than its "
                           "workspace's %llu bytes hold (a sparse file)",
                           path, (unsigned long long)sb.st_size,
                           (unsigned long long)v.f_blocks * v.f_frsize);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (st_out)
        fill_stat(&sb, st_out);
    *fd_out = fd;
    return PH_OK;
}

ph_status ph_workspace_read(ph_workspace *ws, const char *path, size_t max_bytes, uint8_t **data,
                            size_t *len, ph_diag *diag)
{
    if (data == NULL || len == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_read: NULL argument");
    *data = NULL;
    *len = 0;
    int fd;
    ph_ws_stat st;
    ph_status s = ph_workspace_open_read(ws, path, max_bytes, &fd, &st, diag);
    if (s != PH_OK)
        return s;
    size_t want = (size_t)st.size;
    uint8_t *buf = malloc(want + 1);
    if (buf == NULL) {
        close(fd);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            free(buf);
            close(fd);
            return ph_diag_set(diag, PH_E_IO, 0, "reading '%s': %s", path, strerror(saved));
        }
        if (n == 0)
            break; /* truncated meanwhile: return what is there */
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return PH_OK;
}

/* Source of bytes for an atomic write: a buffer or a descriptor. */
struct write_source {
    const uint8_t *data;
    size_t len;
    int fd;
    uint64_t max;
};

static ph_status copy_source(int out_fd, const struct write_source *src, const char *path,
                             ph_diag *diag)
{
    if (src->fd < 0) {
        if (ph_write_all(out_fd, src->data, src->len) != 0)
            return ph_diag_set(diag, PH_E_IO, 0, "writing '%s': %s", path, strerror(errno));
        return PH_OK;
    }
    uint8_t buf[65536];
    uint64_t total = 0;
    for (;;) {
        ssize_t n = read(src->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return ph_diag_set(diag, PH_E_IO, 0, "reading the source of '%s': %s", path,
                               strerror(errno));
        if (n == 0)
            return PH_OK;
        total += (uint64_t)n;
        if (total > src->max)
            return ph_diag_set(diag, PH_E_LIMIT, 0, "'%s': source is over the cap of %llu bytes",
                               path, (unsigned long long)src->max);
        struct write_source chunk = {.data = buf, .len = (size_t)n, .fd = -1};
        ph_status st = copy_source(out_fd, &chunk, path, diag);
        if (st != PH_OK)
            return st;
    }
}

static ph_status atomic_write(ph_workspace *ws, const char *path, const struct write_source *src,
                              uint32_t mode, ph_diag *diag)
{
    char norm[PH_WS_PATH_MAX + 1];
    if (ws == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_write: NULL workspace");
    ph_status st = normalize_file_path(path, norm, "cannot write over the workspace root", diag);
    if (st != PH_OK)
        return st;
    int dir_fd;
    const char *leaf;
    st = open_parent(ws, norm, true, &dir_fd, &leaf, path, diag);
    if (st != PH_OK)
        return st;
    /* An O_PATH descriptor cannot be used with openat's creating calls on
     * every kernel, so reopen the directory itself (no path walk involved). */
    int real_dir = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(dir_fd);
    if (real_dir < 0)
        return ph_ws_errno_status(errno, path, diag);

    /* The temporary file and the rename stay inside real_dir: the leaf is
     * never resolved through a path. */
    ph_atomic_file af;
    st = ph_atomic_file_begin_at(&af, real_dir, leaf, (mode_t)(mode & 0777), NULL);
    if (st != PH_OK) {
        int saved = errno;
        close(real_dir);
        return ph_ws_errno_status(saved, path, diag);
    }
    give_to_workspace_owner(ws->root_fd, af.fd);
    st = copy_source(af.fd, src, path, diag);
    /* The chown above clears no permission bit of mode & 0777, but set them
     * once more after it: what the caller asked for is what the file has. */
    if (st == PH_OK && fchmod(af.fd, (mode_t)(mode & 0777)) != 0)
        st = ph_diag_set(diag, PH_E_IO, 0, "chmod '%s': %s", path, strerror(errno));
    if (st != PH_OK) {
        ph_atomic_file_abort(&af);
    } else if (ph_atomic_file_commit(&af, PH_WRITE_REPLACE, NULL) != PH_OK) {
        int e = errno;
        st = ph_ws_errno_status(e == EISDIR || e == ENOTEMPTY ? EISDIR : e, path, diag);
    }
    close(real_dir);
    return st;
}

ph_status ph_workspace_write(ph_workspace *ws, const char *path, const void *data, size_t len,
                             uint32_t mode, ph_diag *diag)
{
    if (data == NULL && len > 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_write: NULL data");
    struct write_source src = {.data = data, .len = len, .fd = -1};
    return atomic_write(ws, path, &src, mode, diag);
}

ph_status ph_workspace_write_fd(ph_workspace *ws, const char *path, int src_fd,
                                uint64_t max_bytes, uint32_t mode, ph_diag *diag)
{
    if (src_fd < 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_write_fd: bad descriptor");
    struct write_source src = {.fd = src_fd, .max = max_bytes};
    return atomic_write(ws, path, &src, mode, diag);
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const ph_ws_entry *)a)->name, ((const ph_ws_entry *)b)->name);
}

ph_status ph_workspace_list(ph_workspace *ws, const char *path, size_t max_entries,
                            ph_ws_list **out, ph_diag *diag)
{
    char norm[PH_WS_PATH_MAX + 1];
    if (ws == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_workspace_list: NULL argument");
    *out = NULL;
    ph_status st = ph_ws_normalize_or_refuse(path, norm, diag);
    if (st != PH_OK)
        return st;
    int fd = ph_ws_open_beneath(ws->root_fd, norm, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return ph_ws_errno_status(errno, path, diag);
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return ph_diag_set(diag, PH_E_IO, 0, "listing '%s': %s", path, strerror(errno));
    }
    ph_ws_list *list = calloc(1, sizeof *list);
    size_t cap = 0, name_bytes = 0;
    if (max_entries > PH_WS_LIST_MAX_ENTRIES)
        max_entries = PH_WS_LIST_MAX_ENTRIES;
    st = list ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    struct dirent *de;
    while (st == PH_OK && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        size_t nl = strlen(de->d_name) + 1;
        if (list->count == max_entries || name_bytes + nl > PH_WS_LIST_MAX_NAME_BYTES) {
            list->truncated = true;
            break;
        }
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        if (list->count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            if (ncap > max_entries)
                ncap = max_entries;
            ph_ws_entry *ne = realloc(list->entries, ncap * sizeof *ne);
            if (ne == NULL) {
                st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
                break;
            }
            list->entries = ne;
            cap = ncap;
        }
        ph_ws_entry *e = &list->entries[list->count];
        e->name = malloc(nl);
        if (e->name == NULL) {
            st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
            break;
        }
        memcpy(e->name, de->d_name, nl);
        name_bytes += nl;
        fill_stat(&sb, &e->st);
        list->count++;
    }
    closedir(d);
    if (st != PH_OK) {
        ph_ws_list_free(&list);
        return st;
    }
    if (list->count > 1)
        qsort(list->entries, list->count, sizeof *list->entries, entry_cmp);
    *out = list;
    return PH_OK;
}

void ph_ws_list_free(ph_ws_list **list)
{
    if (list == NULL || *list == NULL)
        return;
    for (size_t i = 0; i < (*list)->count; i++)
        free((*list)->entries[i].name);
    free((*list)->entries);
    free(*list);
    *list = NULL;
}
