/* snapshot.c - decision 10: files_changed is computed by the service from a
 * snapshot taken before the command, never reported by the command.
 *
 * The walk never follows a symlink: every directory is opened with openat
 * from its parent's descriptor with O_NOFOLLOW, every entry is examined with
 * fstatat(AT_SYMLINK_NOFOLLOW), and no path string is ever resolved again.
 * It records type, size, mtime, ctime, inode and mode: a command that
 * restores a file's mtime (touch -d) still changes its ctime, and a file
 * replaced by rename has a new inode. Directories are walked but not
 * reported (their mtime moves with every entry they hold; the entries
 * themselves are reported).
 *
 * Memory. The workspace is sandbox-controlled, so a snapshot is a tree of
 * names, not a list of paths: each entry holds its own name (at most
 * NAME_MAX bytes) and the index just past its subtree; full paths exist only
 * for the changes reported. Names read from a directory but not yet entered
 * count against the entry limit too, so entries plus pending names never
 * exceed max_entries + 1 and a snapshot costs at most about
 * max_entries * (sizeof(snap_entry) + NAME_MAX + 1) bytes.
 *
 * Completeness. Nothing is left out silently: whatever the walk cannot see
 * or the result cannot carry sets files_changed_truncated with a reason bit
 * (ph_fc_gap): the entry limit, the change limit, a directory nested deeper
 * than SNAPSHOT_MAX_DEPTH (each level holds one descriptor), a directory that
 * cannot be read, and a changed path longer than PH_WS_PATH_MAX. */
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
    uint32_t name_off; /* into the name arena, NUL-terminated */
    uint32_t end;      /* index just past this entry's subtree (preorder) */
    uint32_t path_len; /* length of the workspace-relative path */
    mode_t mode;
    uint64_t size;
    uint64_t ino;
    struct timespec mtime, ctime;
} snap_entry;

/* Entries are kept in preorder, the children of each directory sorted by
 * name (bytewise), each followed by its subtree. Both snapshots share the
 * order, so the diff merges the children of matching directories, name by
 * name, and nothing is sorted globally. */
struct ph_snapshot {
    snap_entry *entries;
    size_t count, cap, max;
    size_t pending; /* names read from directories and not yet entered */
    char *names;    /* the name arena */
    size_t names_len, names_cap;
    unsigned gaps;  /* ph_fc_gap bits the walk found */
};

#define SNAP_NAME(s, e) ((s)->names + (e)->name_off)

const char *ph_fc_gap_name(unsigned gap)
{
    switch (gap) {
    case PH_FC_GAP_ENTRY_LIMIT: return "entry_limit";
    case PH_FC_GAP_CHANGE_LIMIT: return "change_limit";
    case PH_FC_GAP_TOO_DEEP: return "too_deep";
    case PH_FC_GAP_UNREADABLE: return "unreadable";
    case PH_FC_GAP_PATH_TOO_LONG: return "path_too_long";
    default: return "unknown";
    }
}

static ph_status add_entry(ph_snapshot *s, uint32_t name_off, size_t path_len,
                           const struct stat *sb)
{
    if (s->count == s->max) {
        s->gaps |= PH_FC_GAP_ENTRY_LIMIT;
        return PH_E_LIMIT;
    }
    if (s->count == s->cap) {
        size_t ncap = s->cap ? s->cap * 2 : 1024;
        if (ncap > s->max)
            ncap = s->max;
        snap_entry *ne = realloc(s->entries, ncap * sizeof *ne);
        if (ne == NULL)
            return PH_E_NOMEM;
        s->entries = ne;
        s->cap = ncap;
    }
    snap_entry *e = &s->entries[s->count];
    e->name_off = name_off;
    e->end = (uint32_t)s->count + 1;
    e->path_len = path_len > UINT32_MAX ? UINT32_MAX : (uint32_t)path_len;
    e->mode = sb->st_mode;
    e->size = (uint64_t)sb->st_size;
    e->ino = (uint64_t)sb->st_ino;
    e->mtime = sb->st_mtim;
    e->ctime = sb->st_ctim;
    s->count++;
    return PH_OK;
}

static int name_cmp(const void *a, const void *b, void *arena)
{
    const char *names = arena;
    return strcmp(names + *(const uint32_t *)a, names + *(const uint32_t *)b);
}

/* The names of one directory, as sorted offsets into the snapshot's arena. */
typedef struct name_list {
    uint32_t *offs;
    size_t count, cap;
} name_list;

/* Reads every name of d into the arena. PH_E_LIMIT when the names would
 * take the snapshot past its entry limit (the walk is truncated anyway);
 * PH_E_IO when reading the directory failed. */
static ph_status read_names(ph_snapshot *s, DIR *d, name_list *l)
{
    struct dirent *de;
    ph_status st = PH_OK;
    for (;;) {
        errno = 0;
        if ((de = readdir(d)) == NULL) {
            if (errno != 0)
                st = PH_E_IO;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (s->count + s->pending > s->max) {
            st = PH_E_LIMIT;
            break;
        }
        size_t nl = strlen(de->d_name) + 1;
        if (s->names_len + nl > s->names_cap) {
            size_t ncap = s->names_cap ? s->names_cap * 2 : 65536;
            while (ncap < s->names_len + nl)
                ncap *= 2;
            if (ncap > UINT32_MAX)
                return PH_E_NOMEM; /* unreachable within the entry limit */
            char *nb = realloc(s->names, ncap);
            if (nb == NULL)
                return PH_E_NOMEM;
            s->names = nb;
            s->names_cap = ncap;
        }
        if (l->count == l->cap) {
            size_t ncap = l->cap ? l->cap * 2 : 64;
            uint32_t *no = realloc(l->offs, ncap * sizeof *no);
            if (no == NULL)
                return PH_E_NOMEM;
            l->offs = no;
            l->cap = ncap;
        }
        memcpy(s->names + s->names_len, de->d_name, nl);
        l->offs[l->count++] = (uint32_t)s->names_len;
        s->names_len += nl;
        s->pending++;
    }
    if (l->count > 1)
        qsort_r(l->offs, l->count, sizeof *l->offs, name_cmp, s->names);
    return st;
}

/* True when the directory name under dir_fd holds at least one entry (or
 * cannot be read, which is reported the same way: not walked). */
static bool holds_anything(int dir_fd, const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return true;
    }
    struct dirent *de;
    bool any = false;
    while (!any && (de = readdir(d)) != NULL)
        any = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return any;
}

/* Walks dir_fd (consumed), a directory whose workspace-relative path is
 * path_len bytes long (0 for the root) at the given depth. */
static ph_status walk(ph_snapshot *s, int dir_fd, size_t path_len, int depth)
{
    DIR *d = fdopendir(dir_fd);
    if (d == NULL) {
        close(dir_fd);
        s->gaps |= PH_FC_GAP_UNREADABLE;
        return PH_OK;
    }
    name_list names = {0};
    ph_status st = read_names(s, d, &names);
    bool limited = st == PH_E_LIMIT;
    if (st == PH_E_IO)
        s->gaps |= PH_FC_GAP_UNREADABLE; /* what was read is still walked */
    if (limited || st == PH_E_IO)
        st = PH_OK;
    size_t i = 0;
    for (; st == PH_OK && i < names.count; i++) {
        uint32_t off = names.offs[i];
        const char *name = s->names + off; /* valid until the arena grows */
        size_t child_len = path_len + (path_len ? 1 : 0) + strlen(name);
        s->pending--;
        struct stat sb;
        if (fstatat(dirfd(d), name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* vanished meanwhile */
        size_t idx = s->count;
        st = add_entry(s, off, child_len, &sb);
        if (st != PH_OK || !S_ISDIR(sb.st_mode))
            continue;
        if (depth >= SNAPSHOT_MAX_DEPTH) {
            if (holds_anything(dirfd(d), s->names + off))
                s->gaps |= PH_FC_GAP_TOO_DEEP;
            continue;
        }
        int sub = openat(dirfd(d), s->names + off,
                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0)
            st = walk(s, sub, child_len, depth + 1);
        else if (errno != ENOENT)
            s->gaps |= PH_FC_GAP_UNREADABLE; /* replaced or unreadable: not walked */
        s->entries[idx].end = (uint32_t)s->count;
    }
    s->pending -= names.count - i; /* names never entered: the walk stopped */
    if (st == PH_OK && limited) {
        s->gaps |= PH_FC_GAP_ENTRY_LIMIT;
        st = PH_E_LIMIT;
    }
    free(names.offs);
    closedir(d);
    return st;
}

ph_status ph_snapshot_take(int root_fd, size_t max_entries, ph_snapshot **out, ph_diag *diag)
{
    if (max_entries >= UINT32_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "snapshot entry limit too large");
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
    ph_status st = walk(s, fd, 0, 0);
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
    return s->gaps != 0;
}

unsigned ph_snapshot_gaps(const ph_snapshot *s)
{
    return s->gaps;
}

size_t ph_snapshot_count(const ph_snapshot *s)
{
    return s->count;
}

void ph_snapshot_free(ph_snapshot **s)
{
    if (s == NULL || *s == NULL)
        return;
    free((*s)->names);
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
    return a->size != b->size || a->ino != b->ino || a->mode != b->mode ||
           !same_time(a->mtime, b->mtime) || !same_time(a->ctime, b->ctime);
}

/* The merge of two snapshots. path holds the workspace-relative path of the
 * directory being merged (only while it fits: a longer path is never
 * reported, it sets PH_FC_GAP_PATH_TOO_LONG). */
typedef struct diff_ctx {
    const ph_snapshot *a, *b;
    ph_execution_result *r;
    size_t cap;
    size_t path_bytes; /* of the paths reported so far, NULs included */
    bool partial; /* a walk stopped at the entry limit: report modifications only */
    char path[PH_WS_PATH_MAX + 1];
} diff_ctx;

/* Appends e's name to d->path at dir_len; returns the new length. */
static size_t path_push(diff_ctx *d, const ph_snapshot *s, const snap_entry *e, size_t dir_len)
{
    if (e->path_len > PH_WS_PATH_MAX)
        return e->path_len;
    size_t o = dir_len;
    if (o)
        d->path[o++] = '/';
    size_t nl = e->path_len - o;
    memcpy(d->path + o, SNAP_NAME(s, e), nl);
    d->path[o + nl] = '\0';
    return e->path_len;
}

static ph_status report(diff_ctx *d, const snap_entry *e, ph_change_kind kind)
{
    ph_execution_result *r = d->r;
    if (e->path_len > PH_WS_PATH_MAX) {
        r->files_changed_gaps |= PH_FC_GAP_PATH_TOO_LONG;
        return PH_OK;
    }
    /* The result carries at most PH_FILES_CHANGED_MAX changes and
     * PH_FILES_CHANGED_PATH_BYTES of paths: the first ones in walk order,
     * so once one is left out every later one is too. */
    size_t len = strlen(d->path) + 1;
    if ((r->files_changed_gaps & PH_FC_GAP_CHANGE_LIMIT) ||
        r->files_changed_count == PH_FILES_CHANGED_MAX ||
        d->path_bytes + len > PH_FILES_CHANGED_PATH_BYTES) {
        r->files_changed_gaps |= PH_FC_GAP_CHANGE_LIMIT;
        return PH_OK;
    }
    if (r->files_changed_count == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 16;
        ph_file_change *nc = realloc(r->files_changed, ncap * sizeof *nc);
        if (nc == NULL)
            return PH_E_NOMEM;
        r->files_changed = nc;
        d->cap = ncap;
    }
    ph_file_change *c = &r->files_changed[r->files_changed_count];
    c->path = malloc(len);
    if (c->path == NULL)
        return PH_E_NOMEM;
    memcpy(c->path, d->path, len);
    d->path_bytes += len;
    c->kind = kind;
    c->size = kind == PH_CHANGE_DELETED ? 0 : e->size;
    r->files_changed_count++;
    return PH_OK;
}

/* Reports entry i of s and, for a directory, every file beneath it, as kind
 * (a subtree only one side has). dir_len: length of the parent's path. */
static ph_status report_subtree(diff_ctx *d, const ph_snapshot *s, size_t i, size_t dir_len,
                                ph_change_kind kind)
{
    const snap_entry *e = &s->entries[i];
    size_t len = path_push(d, s, e, dir_len);
    if (!S_ISDIR(e->mode))
        return report(d, e, kind);
    ph_status st = PH_OK;
    for (size_t c = i + 1; st == PH_OK && c < e->end; c = s->entries[c].end) {
        st = report_subtree(d, s, c, len, kind);
    }
    return st;
}

/* Merges the children of two matching directories: a's in [ia, ea), b's in
 * [ib, eb); their common path is dir_len bytes of d->path. */
static ph_status merge(diff_ctx *d, size_t ia, size_t ea, size_t ib, size_t eb, size_t dir_len)
{
    const ph_snapshot *A = d->a, *B = d->b;
    ph_status st = PH_OK;
    while (st == PH_OK && (ia < ea || ib < eb)) {
        int c = ia == ea   ? 1
                : ib == eb ? -1
                           : strcmp(SNAP_NAME(A, &A->entries[ia]), SNAP_NAME(B, &B->entries[ib]));
        if (c < 0) {
            if (!d->partial)
                st = report_subtree(d, A, ia, dir_len, PH_CHANGE_DELETED);
            ia = A->entries[ia].end;
            continue;
        }
        if (c > 0) {
            if (!d->partial)
                st = report_subtree(d, B, ib, dir_len, PH_CHANGE_ADDED);
            ib = B->entries[ib].end;
            continue;
        }
        const snap_entry *a = &A->entries[ia], *b = &B->entries[ib];
        bool adir = S_ISDIR(a->mode), bdir = S_ISDIR(b->mode);
        size_t len = path_push(d, B, b, dir_len);
        if (adir && bdir) {
            st = merge(d, ia + 1, a->end, ib + 1, b->end, len);
        } else if (adir || bdir) {
            /* A directory became something else or the reverse: what was
             * there is gone, what is there is new. */
            st = report_subtree(d, A, ia, dir_len, PH_CHANGE_DELETED);
            if (st == PH_OK)
                st = report_subtree(d, B, ib, dir_len, PH_CHANGE_ADDED);
        } else if (changed(a, b)) {
            st = report(d, b, PH_CHANGE_MODIFIED);
        }
        ia = a->end;
        ib = b->end;
    }
    return st;
}

static int change_cmp(const void *a, const void *b)
{
    return strcmp(((const ph_file_change *)a)->path, ((const ph_file_change *)b)->path);
}

ph_status ph_snapshot_diff(const ph_snapshot *before, const ph_snapshot *after,
                           ph_execution_result *r, ph_diag *diag)
{
    diff_ctx *d = calloc(1, sizeof *d);
    if (d == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    /* When either walk was cut short, a path missing from one side may just
     * be beyond the cut: report only modifications seen on both sides. */
    d->a = before;
    d->b = after;
    d->r = r;
    d->partial = ((before->gaps | after->gaps) & PH_FC_GAP_ENTRY_LIMIT) != 0;
    r->files_changed_gaps = before->gaps | after->gaps;
    ph_status st = merge(d, 0, before->count, 0, after->count, 0);
    free(d);
    r->files_changed_truncated = r->files_changed_gaps != 0;
    if (st != PH_OK)
        return ph_diag_set(diag, st, 0, "computing files_changed: %s", ph_strerror(st));
    /* Results are sorted bytewise for the caller (the merge order differs). */
    if (r->files_changed_count > 1)
        qsort(r->files_changed, r->files_changed_count, sizeof *r->files_changed, change_cmp);
    return PH_OK;
}
