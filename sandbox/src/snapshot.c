/* snapshot.c - decision 10: files_changed is computed by the service from a
 * snapshot taken before the command, never reported by the command.
 *
 * The walk never follows a symlink (O_NOFOLLOW directories, fstatat with
 * AT_SYMLINK_NOFOLLOW) and records type, size, mtime, ctime, inode and mode:
 * a command that restores a file's mtime (touch -d) still changes its ctime,
 * and a file replaced by rename has a new inode. The walk is bounded by an
 * entry count, so a huge workspace sets a truncated flag instead of
 * stalling. Directories are walked but not reported (their mtime moves with
 * every entry they hold; the entries themselves are reported). */
#include "sandbox-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAPSHOT_MAX_DEPTH 128

typedef struct snap_entry {
    size_t path_off; /* into the arena: normalized, workspace-relative, NUL-terminated */
    mode_t mode;
    uint64_t size;
    uint64_t ino;
    struct timespec mtime, ctime;
} snap_entry;

/* Entries are kept in walk order: depth first, the names of each directory
 * sorted. That order is "component by component" (path_cmp below), which
 * both snapshots share, so the diff is one merge and nothing is sorted
 * globally. Paths live in one arena: no allocation per entry. */
struct ph_snapshot {
    snap_entry *entries;
    size_t count, cap, max;
    char *arena;
    size_t arena_len, arena_cap;
    bool truncated;
};

#define SNAP_PATH(s, e) ((s)->arena + (e)->path_off)

/* The walk order: bytewise, but the end of a component ('/' or the end of
 * the string) sorts before any byte, so a directory's subtree follows it
 * directly ("a", "a/x", "a-b"). */
static int path_cmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned ca = (unsigned char)*a, cb = (unsigned char)*b;
        if (ca == '/')
            ca = 1;
        if (cb == '/')
            cb = 1;
        if (ca != cb)
            return ca < cb ? -1 : 1;
        if (ca == 0)
            return 0;
    }
}

static ph_status add_entry(ph_snapshot *s, const char *path, size_t len, const struct stat *sb)
{
    if (s->count == s->max) {
        s->truncated = true;
        return PH_E_LIMIT;
    }
    if (s->count == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        snap_entry *ne = realloc(s->entries, ncap * sizeof *ne);
        if (ne == NULL)
            return PH_E_NOMEM;
        s->entries = ne;
        s->cap = ncap;
    }
    if (s->arena_len + len + 1 > s->arena_cap) {
        size_t ncap = s->arena_cap ? s->arena_cap * 2 : 65536;
        while (ncap < s->arena_len + len + 1)
            ncap *= 2;
        char *na = realloc(s->arena, ncap);
        if (na == NULL)
            return PH_E_NOMEM;
        s->arena = na;
        s->arena_cap = ncap;
    }
    snap_entry *e = &s->entries[s->count];
    e->path_off = s->arena_len;
    memcpy(s->arena + s->arena_len, path, len + 1);
    s->arena_len += len + 1;
    e->mode = sb->st_mode;
    e->size = (uint64_t)sb->st_size;
    e->ino = (uint64_t)sb->st_ino;
    e->mtime = sb->st_mtim;
    e->ctime = sb->st_ctim;
    s->count++;
    return PH_OK;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of one directory, sorted; one buffer for all of them. */
typedef struct name_list {
    char **names;
    size_t count, cap;
    char *buf;
    size_t len, buf_cap;
} name_list;

static void name_list_free(name_list *l)
{
    free(l->names);
    free(l->buf);
}

static ph_status read_names(DIR *d, name_list *l, size_t budget)
{
    struct dirent *de;
    ph_status st = PH_OK;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (l->count == budget) {
            st = PH_E_LIMIT; /* more names than entries left: truncated anyway */
            break;
        }
        size_t nl = strlen(de->d_name) + 1;
        if (l->len + nl > l->buf_cap) {
            size_t ncap = l->buf_cap ? l->buf_cap * 2 : 4096;
            while (ncap < l->len + nl)
                ncap *= 2;
            char *nb = realloc(l->buf, ncap);
            if (nb == NULL)
                return PH_E_NOMEM;
            l->buf = nb;
            l->buf_cap = ncap;
        }
        if (l->count == l->cap) {
            size_t ncap = l->cap ? l->cap * 2 : 64;
            char **nn = realloc(l->names, ncap * sizeof *nn);
            if (nn == NULL)
                return PH_E_NOMEM;
            l->names = nn;
            l->cap = ncap;
        }
        memcpy(l->buf + l->len, de->d_name, nl);
        l->names[l->count++] = (char *)(uintptr_t)l->len; /* offset until the buffer settles */
        l->len += nl;
    }
    for (size_t i = 0; i < l->count; i++)
        l->names[i] = l->buf + (size_t)(uintptr_t)l->names[i];
    if (l->count > 1)
        qsort(l->names, l->count, sizeof *l->names, name_cmp);
    return st;
}

/* Walks dir_fd (consumed). prefix is the directory's workspace-relative path
 * ("" for the root). */
static ph_status walk(ph_snapshot *s, int dir_fd, char *prefix, size_t prefix_len, int depth)
{
    DIR *d = fdopendir(dir_fd);
    if (d == NULL) {
        close(dir_fd);
        return PH_E_IO;
    }
    name_list names = {0};
    ph_status st = read_names(d, &names, s->max - s->count + 1);
    bool limited = st == PH_E_LIMIT;
    if (limited)
        st = PH_OK;
    for (size_t i = 0; st == PH_OK && i < names.count; i++) {
        const char *name = names.names[i];
        size_t nl = strlen(name);
        if (prefix_len + nl + 2 > PH_WS_PATH_MAX + 1)
            continue; /* unreachable through the path rules; not reported */
        size_t plen = prefix_len;
        if (plen)
            prefix[plen++] = '/';
        memcpy(prefix + plen, name, nl + 1);
        struct stat sb;
        if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
            st = add_entry(s, prefix, plen + nl, &sb);
            if (st == PH_OK && S_ISDIR(sb.st_mode) && depth < SNAPSHOT_MAX_DEPTH) {
                int sub = openat(dirfd(d), name,
                                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0)
                    st = walk(s, sub, prefix, plen + nl, depth + 1);
                if (st == PH_E_IO)
                    st = PH_OK; /* an unreadable directory is skipped, not fatal */
            }
        } /* else: vanished meanwhile */
        prefix[prefix_len] = '\0';
    }
    if (st == PH_OK && limited) {
        s->truncated = true;
        st = PH_E_LIMIT;
    }
    name_list_free(&names);
    closedir(d);
    return st;
}

ph_status ph_snapshot_take(int root_fd, size_t max_entries, ph_snapshot **out, ph_diag *diag)
{
    ph_snapshot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    s->max = max_entries;
    int fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int saved = errno;
        free(s);
        return ph_diag_set(diag, saved == ENOENT ? PH_E_NOT_FOUND : PH_E_IO, 0,
                           "cannot open the workspace for a snapshot: %s", strerror(saved));
    }
    char prefix[PH_WS_PATH_MAX + 1] = "";
    ph_status st = walk(s, fd, prefix, 0, 0);
    if (st == PH_E_LIMIT)
        st = PH_OK; /* truncated is a result, not an error */
    if (st != PH_OK) {
        ph_snapshot_free(&s);
        return ph_diag_set(diag, st, 0, "snapshot of the workspace failed: %s",
                           ph_strerror(st));
    }
    *out = s;
    return PH_OK;
}

bool ph_snapshot_truncated(const ph_snapshot *s)
{
    return s->truncated;
}

size_t ph_snapshot_count(const ph_snapshot *s)
{
    return s->count;
}

void ph_snapshot_free(ph_snapshot **s)
{
    if (s == NULL || *s == NULL)
        return;
    free((*s)->arena);
    free((*s)->entries);
    free(*s);
    *s = NULL;
}

static bool same_time(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

static bool changed(const snap_entry *a, const snap_entry *b)
{
    if ((a->mode & S_IFMT) != (b->mode & S_IFMT))
        return true;
    if (S_ISDIR(a->mode))
        return false; /* directories are not reported */
    return a->size != b->size || a->ino != b->ino || a->mode != b->mode ||
           !same_time(a->mtime, b->mtime) || !same_time(a->ctime, b->ctime);
}

static ph_status report(ph_execution_result *r, const ph_snapshot *s, const snap_entry *e,
                        ph_change_kind kind, size_t *cap)
{
    if (S_ISDIR(e->mode))
        return PH_OK;
    if (r->files_changed_count == PH_FILES_CHANGED_MAX) {
        r->files_changed_truncated = true;
        return PH_OK;
    }
    if (r->files_changed_count == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        ph_file_change *nc = realloc(r->files_changed, ncap * sizeof *nc);
        if (nc == NULL)
            return PH_E_NOMEM;
        r->files_changed = nc;
        *cap = ncap;
    }
    ph_file_change *c = &r->files_changed[r->files_changed_count];
    c->path = strdup(SNAP_PATH(s, e));
    if (c->path == NULL)
        return PH_E_NOMEM;
    c->kind = kind;
    c->size = kind == PH_CHANGE_DELETED ? 0 : e->size;
    r->files_changed_count++;
    return PH_OK;
}

static int change_cmp(const void *a, const void *b)
{
    return strcmp(((const ph_file_change *)a)->path, ((const ph_file_change *)b)->path);
}

ph_status ph_snapshot_diff(const ph_snapshot *before, const ph_snapshot *after,
                           ph_execution_result *r, ph_diag *diag)
{
    /* When either walk was cut short, a path missing from one side may just
     * be beyond the cut: report only modifications seen on both sides. */
    bool partial = before->truncated || after->truncated;
    r->files_changed_truncated = partial;
    size_t cap = 0, i = 0, j = 0;
    ph_status st = PH_OK;
    while (st == PH_OK && (i < before->count || j < after->count)) {
        int c = i == before->count  ? 1
                : j == after->count ? -1
                                    : path_cmp(SNAP_PATH(before, &before->entries[i]),
                                               SNAP_PATH(after, &after->entries[j]));
        if (c < 0) {
            if (!partial)
                st = report(r, before, &before->entries[i], PH_CHANGE_DELETED, &cap);
            i++;
        } else if (c > 0) {
            if (!partial)
                st = report(r, after, &after->entries[j], PH_CHANGE_ADDED, &cap);
            j++;
        } else {
            const snap_entry *a = &before->entries[i], *b = &after->entries[j];
            if ((a->mode & S_IFMT) != (b->mode & S_IFMT) && S_ISDIR(a->mode))
                st = report(r, after, b, PH_CHANGE_ADDED, &cap); /* a dir became a file */
            else if ((a->mode & S_IFMT) != (b->mode & S_IFMT) && S_ISDIR(b->mode))
                st = report(r, before, a, PH_CHANGE_DELETED, &cap); /* a file became a dir */
            else if (changed(a, b))
                st = report(r, after, b, PH_CHANGE_MODIFIED, &cap);
            i++;
            j++;
        }
    }
    if (st != PH_OK)
        return ph_diag_set(diag, st, 0, "computing files_changed: %s", ph_strerror(st));
    /* Results are sorted bytewise for the caller (the merge order differs). */
    if (r->files_changed_count > 1)
        qsort(r->files_changed, r->files_changed_count, sizeof *r->files_changed, change_cmp);
    return PH_OK;
}
