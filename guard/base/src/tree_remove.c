/*
 * tree_remove.c - removing a directory tree someone else controls, without
 * following a link, leaving the tree or recursing (pinhole/tree_remove.h).
 *
 * The walk is a loop over an explicit stack of levels on the heap. Each
 * level remembers its directory's device and inode and its name in the
 * parent. The top PH_TREE_OPEN_LEVELS levels keep their directory open, so
 * climbing back to them costs nothing; deeper levels are closed on the way
 * down and reached again through "..", which must then be the same
 * directory (device and inode) or the removal stops: a directory the
 * tree's owner moved away meanwhile must not lead the walk outside.
 *
 * In each directory every entry is unlinked as a file first (a symlink,
 * fifo, socket or device goes without ever being opened); only EISDIR sends
 * the walk down, through openat(O_NOFOLLOW|O_DIRECTORY). Entries that
 * cannot be removed are remembered (device, inode) so rescanning a
 * directory skips them and the walk ends.
 */
#include "pinhole/tree_remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/diag.h"

#define MAX_DEPTH (1u << 24)
#define MAX_FAILED 4096

typedef struct level {
    int fd;    /* the directory, or -1 while closed (deep levels) */
    DIR *dir;  /* a stream over its own descriptor, or NULL */
    dev_t dev;
    ino_t ino;
    ino_t d_ino; /* its inode as the parent's entry gives it (differs at a mount) */
    char *name;  /* its name in the parent (NULL for the top) */
} level;

typedef struct failed_entry {
    dev_t dev; /* the device of the directory holding it */
    ino_t ino; /* its d_ino */
} failed_entry;

typedef struct walk {
    level *lv;
    size_t n, cap;
    failed_entry *failed;
    size_t nfailed;
    int flags;
    dev_t top_dev;
    ph_status st;
    ph_diag *diag;
} walk;

/* Remembers the first failure for the caller; errno is kept. */
static void note(walk *w, ph_status st, const char *what, const char *name, int err)
{
    if (w->st == PH_OK) {
        w->st = st;
        ph_diag_set(w->diag, st, 0, "cannot remove %.200s%s%s: %s", name ? name : "the tree",
                    what ? " " : "", what ? what : "", strerror(err));
    }
    errno = err;
}

static bool is_failed(const walk *w, dev_t dev, ino_t ino)
{
    for (size_t i = 0; i < w->nfailed; i++)
        if (w->failed[i].dev == dev && w->failed[i].ino == ino)
            return true;
    return false;
}

/* False when the failure list is full: the walk then stops (it could loop). */
static bool add_failed(walk *w, dev_t dev, ino_t ino)
{
    if (is_failed(w, dev, ino))
        return true;
    if (w->failed == NULL) {
        w->failed = malloc(MAX_FAILED * sizeof *w->failed);
        if (w->failed == NULL)
            return false;
    }
    if (w->nfailed == MAX_FAILED)
        return false;
    w->failed[w->nfailed++] = (failed_entry){dev, ino};
    return true;
}

static void close_level(level *l)
{
    if (l->dir != NULL)
        closedir(l->dir);
    l->dir = NULL;
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

static bool push(walk *w, int fd, const struct stat *st, const char *name, ino_t d_ino)
{
    if (w->n == MAX_DEPTH) {
        close(fd);
        if (w->st == PH_OK) {
            w->st = PH_E_LIMIT;
            ph_diag_set(w->diag, PH_E_LIMIT, 0, "tree deeper than %u levels", MAX_DEPTH);
        }
        return false;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        level *g = realloc(w->lv, cap * sizeof *g);
        if (g == NULL) {
            close(fd);
            note(w, PH_E_NOMEM, NULL, name, ENOMEM);
            return false;
        }
        w->lv = g, w->cap = cap;
    }
    char *copy = NULL;
    if (name != NULL && (copy = strdup(name)) == NULL) {
        close(fd);
        note(w, PH_E_NOMEM, NULL, name, ENOMEM);
        return false;
    }
    /* Deep levels give their parent's descriptor back: at most
     * PH_TREE_OPEN_LEVELS stay open whatever the depth. */
    if (w->n >= PH_TREE_OPEN_LEVELS)
        close_level(&w->lv[w->n - 1]);
    w->lv[w->n++] = (level){.fd = fd, .dev = st->st_dev, .ino = st->st_ino, .d_ino = d_ino,
                            .name = copy};
    return true;
}

/* Opens level i again, a closed deep level: the level below it (i + 1)
 * climbs through "..", which must be the directory recorded at i. */
static bool reopen(walk *w, size_t i)
{
    level *l = &w->lv[i], *child = &w->lv[i + 1];
    int fd = openat(child->fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_dev != l->dev || st.st_ino != l->ino) {
        int e = fd < 0 ? errno : EXDEV;
        if (fd >= 0)
            close(fd);
        if (w->st == PH_OK) {
            w->st = PH_E_IO;
            ph_diag_set(w->diag, PH_E_IO, 0,
                        "the tree changed during removal: %.200s is no longer where it was "
                        "(%s)", child->name, strerror(e));
        }
        errno = e;
        return false;
    }
    l->fd = fd;
    return true;
}

/* A stream over the current level from its start (a fresh open file
 * description, so the level's own descriptor keeps no offset). */
static DIR *stream(level *l)
{
    if (l->dir == NULL) {
        int fd = openat(l->fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return NULL;
        l->dir = fdopendir(fd);
        if (l->dir == NULL)
            close(fd);
    }
    return l->dir;
}

/* Handles one entry of the current level. True when the walk went down. */
static bool entry(walk *w, const struct dirent *e)
{
    level *l = &w->lv[w->n - 1];
    if (is_failed(w, l->dev, e->d_ino))
        return false;
    if (unlinkat(l->fd, e->d_name, 0) == 0 || errno == ENOENT)
        return false;
    int err = errno;
    if (err == EISDIR) {
        int fd = openat(l->fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            if (!(w->flags & PH_TREE_ONE_FS) || st.st_dev == w->top_dev)
                return push(w, fd, &st, e->d_name, e->d_ino);
            err = EXDEV;
        } else {
            err = errno;
        }
        if (fd >= 0)
            close(fd);
        if (err == ENOENT)
            return false;
    }
    note(w, PH_E_IO, NULL, e->d_name, err);
    if (!add_failed(w, l->dev, e->d_ino) && w->st == PH_E_IO)
        w->st = PH_E_LIMIT;
    return false;
}

/* Empties the tree from the top level down; the top stays. */
static void run(walk *w)
{
    while (w->n > 0 && w->st != PH_E_NOMEM && w->st != PH_E_LIMIT) {
        level *l = &w->lv[w->n - 1];
        DIR *d = stream(l);
        if (d == NULL) {
            note(w, PH_E_IO, "(reading)", l->name, errno);
            if (w->n == 1)
                return;
        }
        bool down = false;
        struct dirent *e;
        errno = 0;
        while (d != NULL && !down && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            down = entry(w, e);
            l = &w->lv[w->n - 1 - (down ? 1 : 0)]; /* push may have moved lv */
        }
        if (down) {
            /* The parent's stream stays where it was when it is open; a
             * closed one is rescanned from the start on the way back. */
            continue;
        }
        /* This level is done: close it, climb, remove it by name. */
        if (w->n == 1) {
            close_level(l);
            return;
        }
        size_t i = w->n - 2;
        if (w->lv[i].fd < 0 && !reopen(w, i)) {
            return;
        }
        level *parent = &w->lv[i];
        close_level(l);
        if (unlinkat(parent->fd, l->name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
            int err = errno;
            note(w, PH_E_IO, NULL, l->name, err);
            if (!add_failed(w, parent->dev, l->d_ino))
                w->st = PH_E_LIMIT;
        }
        free(l->name);
        w->n--;
    }
}

static ph_status finish(walk *w)
{
    for (size_t i = 0; i < w->n; i++) {
        close_level(&w->lv[i]);
        free(w->lv[i].name);
    }
    free(w->lv);
    free(w->failed);
    return w->st;
}

static ph_status walk_from(int dir_fd, int flags, ph_diag *diag)
{
    walk w = {.flags = flags, .diag = diag};
    struct stat st;
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        errno = e;
        return ph_diag_set(diag, PH_E_IO, 0, "cannot open the tree to remove: %s", strerror(e));
    }
    w.top_dev = st.st_dev;
    if (push(&w, fd, &st, NULL, st.st_ino))
        run(&w);
    return finish(&w);
}

ph_status ph_tree_empty(int dir_fd, int flags, ph_diag *diag)
{
    return walk_from(dir_fd, flags, diag);
}

ph_status ph_tree_remove_at(int parent_fd, const char *name, int flags, ph_diag *diag)
{
    if (name == NULL || *name == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "bad name for a tree to remove");
    if (unlinkat(parent_fd, name, 0) == 0 || errno == ENOENT)
        return PH_OK;
    if (errno != EISDIR) {
        int e = errno;
        return ph_diag_set(diag, PH_E_IO, 0, "cannot remove %.200s: %s", name, strerror(e));
    }
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return PH_OK;
        errno = e;
        return ph_diag_set(diag, PH_E_IO, 0, "cannot open %.200s: %s", name, strerror(e));
    }
    ph_status st = walk_from(fd, flags, diag);
    close(fd);
    if (st != PH_OK)
        return st;
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        int e = errno;
        return ph_diag_set(diag, PH_E_IO, 0, "cannot remove %.200s: %s", name, strerror(e));
    }
    return PH_OK;
}
