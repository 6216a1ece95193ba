/* store_fs.c - the filesystem backend (the embedded default).
 *
 * Layout under the root (docs/artifacts.md):
 *   objects/<k0k1>/<k2k3>/<key>/content        the bytes
 *   objects/<k0k1>/<k2k3>/<key>/metadata.json  the port's metadata document
 *   staging/<random>.new   a writer creating its directory (< 1 s)
 *   staging/<random>.put   a writer streaming; flock()ed by its writer
 *   staging/<random>.del   an object being deleted
 *
 * Whole-or-nothing: a put builds content and metadata in its own staging
 * directory, fsyncs both files and the directory, then publishes the
 * directory with one rename (RENAME_NOREPLACE) into its fan-out directory and
 * fsyncs that. A reader sees either no <key> or a complete one. A delete is
 * one rename into staging, then freeing. A writer killed at any point leaves
 * only a staging entry, which the sweeper removes once no live process holds
 * its lock (flock locks die with their process).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/artifact_backend.h"
#include "pinhole/io.h"
#include "pinhole/tree_remove.h"
#include "read_capped-int.h"

#define CONTENT "content"
#define METADATA "metadata.json"
/* A staging directory still named .new is older than this only if its
 * writer died between mkdir and flock. */
#define NEW_ENTRY_GRACE_SECONDS 60

typedef struct fs_backend {
    ph_artifact_backend base;
    int root_fd, objects_fd, staging_fd;
} fs_backend;

/* Writeback is started every this many bytes, so the final fsync finds
 * little left to do and the disk works while the stream is still coming. */
#define WRITEBACK_STRIDE ((uint64_t)8 << 20)

struct ph_artifact_backend_writer {
    fs_backend *fs;
    uint64_t written, flushed;
    int dir_fd;        /* the staging directory; holds the flock */
    int content_fd;
    char name[40];     /* "<32 hex>.put" inside staging/ */
    char key[PH_ARTIFACT_KEY_LEN + 1];
};

struct ph_artifact_backend_reader {
    int fd;
};

static ph_status io_error(ph_diag *diag, const char *what)
{
    return ph_diag_set(diag, PH_E_IO, 0, "artifact store: %s: %s", what, strerror(errno));
}

static int open_dir_at(int at, const char *name)
{
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* mkdir that tolerates an existing directory; *created says whether we made it. */
static int ensure_dir_at(int at, const char *name, bool *created)
{
    if (mkdirat(at, name, 0700) == 0) {
        if (created)
            *created = true;
        return 0;
    }
    return errno == EEXIST ? 0 : -1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static ph_status write_all(int fd, const void *buf, size_t len, ph_diag *diag)
{
    return ph_write_all(fd, buf, len) == 0 ? PH_OK : io_error(diag, "write");
}

/* Removes a staging directory by name (pinhole/tree_remove.h: no link
 * followed, one filesystem); nothing there is not an error because a
 * concurrent sweeper or deleter may have got there first. */
static void remove_staging_entry(fs_backend *fs, const char *name)
{
    (void)ph_tree_remove_at(fs->staging_fd, name, PH_TREE_ONE_FS, NULL);
}

static ph_status random_name(char *out, size_t cap, const char *suffix, ph_diag *diag)
{
    char id[PH_ARTIFACT_ID_LEN + 1];
    ph_status st = ph_artifact_id_generate(id, diag);
    if (st == PH_OK)
        snprintf(out, cap, "%s.%s", id, suffix);
    return st;
}

/* ---- writing ---- */

static ph_status fs_write_begin(ph_artifact_backend *b, const char *key,
                                ph_artifact_backend_writer **out, ph_diag *diag)
{
    fs_backend *fs = (fs_backend *)b;
    *out = NULL;
    ph_artifact_backend_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    w->fs = fs;
    w->dir_fd = w->content_fd = -1;
    snprintf(w->key, sizeof w->key, "%s", key);
    char fresh[40];
    ph_status st = random_name(fresh, sizeof fresh, "new", diag);
    if (st == PH_OK && mkdirat(fs->staging_fd, fresh, 0700) != 0)
        st = io_error(diag, "mkdir staging");
    if (st != PH_OK) {
        free(w);
        return st;
    }
    memcpy(w->name, fresh, PH_ARTIFACT_ID_LEN);
    snprintf(w->name + PH_ARTIFACT_ID_LEN, sizeof w->name - PH_ARTIFACT_ID_LEN, ".put");
    /* Lock first, then rename to .put: a .put entry is always locked by a
     * live writer or abandoned by a dead one, never in between. */
    w->dir_fd = open_dir_at(fs->staging_fd, fresh);
    if (w->dir_fd < 0)
        st = io_error(diag, "open staging");
    else if (flock(w->dir_fd, LOCK_EX | LOCK_NB) != 0)
        st = io_error(diag, "lock staging");
    else if (renameat(fs->staging_fd, fresh, fs->staging_fd, w->name) != 0)
        st = io_error(diag, "rename staging");
    if (st != PH_OK) {
        close_fd(&w->dir_fd);
        unlinkat(fs->staging_fd, fresh, AT_REMOVEDIR);
        free(w);
        return st;
    }
    w->content_fd = openat(w->dir_fd, CONTENT, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0600);
    if (w->content_fd < 0) {
        st = io_error(diag, "create content");
        b->ops->write_abort(w);
        return st;
    }
    *out = w;
    return PH_OK;
}

static ph_status fs_write(ph_artifact_backend_writer *w, const void *buf, size_t len, ph_diag *diag)
{
    ph_status st = write_all(w->content_fd, buf, len, diag);
    if (st != PH_OK)
        return st;
    w->written += len;
    if (w->written - w->flushed >= WRITEBACK_STRIDE) {
        /* A hint only: durability still comes from the fsync at commit. */
        sync_file_range(w->content_fd, (off64_t)w->flushed, (off64_t)(w->written - w->flushed),
                        SYNC_FILE_RANGE_WRITE);
        w->flushed = w->written;
    }
    return PH_OK;
}

static void fs_write_abort(ph_artifact_backend_writer *w)
{
    if (w == NULL)
        return;
    close_fd(&w->content_fd);
    remove_staging_entry(w->fs, w->name);
    close_fd(&w->dir_fd); /* releases the lock last */
    free(w);
}

/* Opens objects/<k0k1>/<k2k3>/, creating (and making durable) what is missing. */
static int open_fanout(fs_backend *fs, const char *key, bool create)
{
    char l1[3] = {key[0], key[1], 0}, l2[3] = {key[2], key[3], 0};
    bool made1 = false, made2 = false;
    if (create && ensure_dir_at(fs->objects_fd, l1, &made1) != 0)
        return -1;
    int fd1 = open_dir_at(fs->objects_fd, l1);
    if (fd1 < 0)
        return -1;
    if (made1)
        fsync(fs->objects_fd);
    if (create && ensure_dir_at(fd1, l2, &made2) != 0) {
        close(fd1);
        return -1;
    }
    int fd2 = open_dir_at(fd1, l2);
    if (fd2 >= 0 && made2)
        fsync(fd1);
    close(fd1);
    return fd2;
}

static ph_status fs_remove(ph_artifact_backend *b, const char *key, ph_diag *diag);

static ph_status fs_write_commit(ph_artifact_backend_writer *w, const char *meta, size_t meta_len,
                                 ph_diag *diag)
{
    fs_backend *fs = w->fs;
    ph_status st = PH_OK;
    int meta_fd = -1, fan_fd = -1;
    if (fsync(w->content_fd) != 0)
        st = io_error(diag, "fsync content");
    if (st == PH_OK) {
        meta_fd = openat(w->dir_fd, METADATA, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                         0600);
        if (meta_fd < 0)
            st = io_error(diag, "create metadata");
    }
    if (st == PH_OK)
        st = write_all(meta_fd, meta, meta_len, diag);
    if (st == PH_OK && fsync(meta_fd) != 0)
        st = io_error(diag, "fsync metadata");
    close_fd(&meta_fd);
    if (st == PH_OK && fsync(w->dir_fd) != 0)
        st = io_error(diag, "fsync staging");
    if (st == PH_OK && (fan_fd = open_fanout(fs, w->key, true)) < 0)
        st = io_error(diag, "fan-out directory");
    if (st == PH_OK) {
        /* The publication: one rename of a complete directory. */
        int rc = renameat2(fs->staging_fd, w->name, fan_fd, w->key, RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS))
            rc = renameat(fs->staging_fd, w->name, fan_fd, w->key); /* target is never empty */
        if (rc != 0) {
            st = io_error(diag, "publish");
        } else if (fsync(fan_fd) != 0 || fsync(fs->staging_fd) != 0) {
            /* Published but not known durable: fail closed, take it back. */
            st = io_error(diag, "fsync publication");
            fs_remove(&fs->base, w->key, NULL);
        }
    }
    close_fd(&fan_fd);
    if (st != PH_OK) {
        fs_write_abort(w); /* removes the staging entry if it is still there */
        return st;
    }
    close_fd(&w->content_fd);
    close_fd(&w->dir_fd);
    free(w);
    return PH_OK;
}

/* ---- reading ---- */

/* Reads metadata.json of an object directory (at most the document cap). */
static ph_status read_metadata(int obj_fd, char **out, size_t *out_len, ph_diag *diag)
{
    *out = NULL;
    *out_len = 0;
    int fd = openat(obj_fd, METADATA, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: metadata missing");
    ph_status st = ph_art_read_capped(fd, PH_ARTIFACT_METADATA_MAX, "artifact store: read metadata",
                                      out, out_len, diag);
    close(fd);
    if (st == PH_E_LIMIT)
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: metadata too large");
    return st;
}

static int open_object(fs_backend *fs, const char *key)
{
    int fan = open_fanout(fs, key, false);
    if (fan < 0)
        return -1;
    int fd = open_dir_at(fan, key);
    int saved = errno;
    close(fan);
    errno = saved;
    return fd;
}

/* True when the directory open as obj is still the published <key>. A
 * published object always holds both files, so a file missing from an
 * object that is no longer published means a delete raced us (not found),
 * while one missing from a published object is corruption. */
static bool still_published(fs_backend *fs, const char *key, int obj)
{
    struct stat now_sb, obj_sb;
    int fan = open_fanout(fs, key, false);
    if (fan < 0)
        return false;
    bool same = fstatat(fan, key, &now_sb, AT_SYMLINK_NOFOLLOW) == 0 && fstat(obj, &obj_sb) == 0 &&
                now_sb.st_dev == obj_sb.st_dev && now_sb.st_ino == obj_sb.st_ino;
    close(fan);
    return same;
}

static ph_status fs_open(ph_artifact_backend *b, const char *key, char **meta, size_t *meta_len,
                         ph_artifact_backend_reader **r, uint64_t *content_size, ph_diag *diag)
{
    fs_backend *fs = (fs_backend *)b;
    *meta = NULL;
    if (r)
        *r = NULL;
    int obj = open_object(fs, key);
    if (obj < 0)
        return (errno == ENOENT || errno == ENOTDIR) ? ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent")
                                                      : io_error(diag, "open artifact");
    ph_status st = read_metadata(obj, meta, meta_len, diag);
    if (st == PH_OK && r) {
        int fd = openat(obj, CONTENT, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "artifact corrupt: content missing");
        } else if ((*r = malloc(sizeof **r)) == NULL) {
            st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        } else {
            (*r)->fd = fd;
            fd = -1;
            *content_size = (uint64_t)sb.st_size;
        }
        if (fd >= 0)
            close(fd);
    }
    if (st == PH_E_FORMAT && !still_published(fs, key, obj))
        st = ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent"); /* deleted while we opened it */
    close(obj);
    if (st != PH_OK) {
        free(*meta);
        *meta = NULL;
    }
    return st;
}

static ph_status fs_read(ph_artifact_backend_reader *r, void *buf, size_t cap, size_t *got,
                         ph_diag *diag)
{
    for (;;) {
        ssize_t n = read(r->fd, buf, cap);
        if (n >= 0) {
            *got = (size_t)n;
            return PH_OK;
        }
        if (errno != EINTR)
            return io_error(diag, "read content");
    }
}

static void fs_read_close(ph_artifact_backend_reader *r)
{
    if (r == NULL)
        return;
    close(r->fd);
    free(r);
}

/* ---- removing, listing, cleaning ---- */

static ph_status fs_remove(ph_artifact_backend *b, const char *key, ph_diag *diag)
{
    fs_backend *fs = (fs_backend *)b;
    int fan = open_fanout(fs, key, false);
    if (fan < 0)
        return errno == ENOENT ? ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent")
                               : io_error(diag, "open fan-out");
    char trash[40];
    ph_status st = random_name(trash, sizeof trash, "del", diag);
    /* Invisible in one step, then freed at leisure (or by the sweeper). */
    if (st == PH_OK && renameat(fan, key, fs->staging_fd, trash) != 0)
        st = errno == ENOENT ? ph_diag_set(diag, PH_E_NOT_FOUND, 0, "absent")
                             : io_error(diag, "remove");
    if (st == PH_OK) {
        fsync(fan);
        remove_staging_entry(fs, trash);
    }
    close(fan);
    return st;
}

static bool is_hex_name(const char *s, size_t len)
{
    if (strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

typedef bool (*dir_visit_fn)(void *arg, int dir_fd, const char *name);

/* Calls visit for every entry of dir_fd named by `len` lowercase hex chars
 * (len 0: any name but . and ..). Returns false when visit stopped it. */
static bool each_entry(int dir_fd, size_t len, dir_visit_fn visit, void *arg)
{
    /* A fresh open file description: a dup() would share the directory
     * offset with every other thread walking the same directory. */
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return true;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return true;
    }
    bool more = true;
    struct dirent *e;
    while (more && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (len == 0 || is_hex_name(e->d_name, len))
            more = visit(arg, dirfd(d), e->d_name);
    }
    closedir(d);
    return more;
}

typedef struct list_ctx {
    fs_backend *fs;
    ph_artifact_backend_visit_fn visit;
    void *arg;
    char prefix[5];
} list_ctx;

static bool list_object(void *arg, int fan_fd, const char *key)
{
    list_ctx *c = arg;
    if (strncmp(key, c->prefix, 4) != 0)
        return true; /* not ours: a key always lives under its own prefix */
    int obj = open_dir_at(fan_fd, key);
    if (obj < 0)
        return true; /* deleted meanwhile */
    char *meta = NULL;
    size_t len = 0;
    ph_status st = read_metadata(obj, &meta, &len, NULL);
    bool gone = st != PH_OK && !still_published(c->fs, key, obj);
    close(obj);
    if (gone)
        return true; /* deleted while we listed it */
    bool more = c->visit(c->arg, key, st == PH_OK ? meta : NULL, len);
    free(meta);
    return more;
}

static bool list_level2(void *arg, int l1_fd, const char *name)
{
    list_ctx *c = arg;
    memcpy(c->prefix + 2, name, 2);
    int fd = open_dir_at(l1_fd, name);
    if (fd < 0)
        return true;
    bool more = each_entry(fd, PH_ARTIFACT_KEY_LEN, list_object, c);
    close(fd);
    return more;
}

static bool list_level1(void *arg, int objects_fd, const char *name)
{
    list_ctx *c = arg;
    memcpy(c->prefix, name, 2);
    int fd = open_dir_at(objects_fd, name);
    if (fd < 0)
        return true;
    bool more = each_entry(fd, 2, list_level2, c);
    close(fd);
    return more;
}

static ph_status fs_list(ph_artifact_backend *b, ph_artifact_backend_visit_fn visit, void *arg,
                         ph_diag *diag)
{
    fs_backend *fs = (fs_backend *)b;
    list_ctx c = {.fs = fs, .visit = visit, .arg = arg};
    each_entry(fs->objects_fd, 2, list_level1, &c);
    return PH_OK;
}

typedef struct clean_ctx {
    fs_backend *fs;
    uint64_t removed;
} clean_ctx;

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool clean_one(void *arg, int staging_fd, const char *name)
{
    clean_ctx *c = arg;
    if (strlen(name) != PH_ARTIFACT_ID_LEN + 4)
        return true; /* not a name this backend makes */
    if (has_suffix(name, ".put")) {
        int fd = open_dir_at(staging_fd, name);
        if (fd < 0)
            return true;
        /* Our lock succeeds only once the writer is gone (finished, aborted
         * or killed). A finished writer renamed the entry away first, so a
         * name still here after we hold the lock is abandoned for good. */
        bool abandoned = flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (abandoned) {
            char claimed[48];
            snprintf(claimed, sizeof claimed, "%.*s.del", PH_ARTIFACT_ID_LEN, name);
            if (renameat(staging_fd, name, staging_fd, claimed) == 0) {
                remove_staging_entry(c->fs, claimed);
                c->removed++;
            }
        }
        close(fd);
    } else if (has_suffix(name, ".del")) {
        remove_staging_entry(c->fs, name);
        c->removed++;
    } else if (has_suffix(name, ".new")) {
        struct stat sb;
        if (fstatat(staging_fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            sb.st_mtime + NEW_ENTRY_GRACE_SECONDS < time(NULL)) {
            remove_staging_entry(c->fs, name);
            c->removed++;
        }
    }
    return true;
}

static ph_status fs_clean_staging(ph_artifact_backend *b, uint64_t *removed, ph_diag *diag)
{
    clean_ctx c = {.fs = (fs_backend *)b};
    each_entry(c.fs->staging_fd, 0, clean_one, &c);
    *removed += c.removed;
    return PH_OK;
}

static void fs_destroy(ph_artifact_backend *b)
{
    fs_backend *fs = (fs_backend *)b;
    if (fs == NULL)
        return;
    close_fd(&fs->objects_fd);
    close_fd(&fs->staging_fd);
    close_fd(&fs->root_fd);
    free(fs);
}

static const ph_artifact_backend_ops fs_ops = {
    .name = "fs",
    .write_begin = fs_write_begin,
    .write = fs_write,
    .write_commit = fs_write_commit,
    .write_abort = fs_write_abort,
    .open = fs_open,
    .read = fs_read,
    .read_close = fs_read_close,
    .remove = fs_remove,
    .list = fs_list,
    .clean_staging = fs_clean_staging,
    .destroy = fs_destroy,
};

ph_status ph_artifact_backend_fs_open(const char *root, ph_artifact_backend **out, ph_diag *diag)
{
    *out = NULL;
    if (root == NULL || *root == '\0')
        return ph_diag_set(diag, PH_E_INVAL, 0, "artifact store root is empty");
    fs_backend *fs = calloc(1, sizeof *fs);
    if (fs == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    fs->base.ops = &fs_ops;
    fs->root_fd = fs->objects_fd = fs->staging_fd = -1;
    ph_status st = PH_OK;
    if (mkdir(root, 0700) != 0 && errno != EEXIST)
        st = io_error(diag, root);
    else if ((fs->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        st = io_error(diag, root);
    else if (ensure_dir_at(fs->root_fd, "objects", NULL) != 0 ||
             ensure_dir_at(fs->root_fd, "staging", NULL) != 0)
        st = io_error(diag, "create store directories");
    else if ((fs->objects_fd = open_dir_at(fs->root_fd, "objects")) < 0 ||
             (fs->staging_fd = open_dir_at(fs->root_fd, "staging")) < 0)
        st = io_error(diag, "open store directories");
    if (st != PH_OK) {
        fs_destroy(&fs->base);
        return st;
    }
    *out = &fs->base;
    return PH_OK;
}
