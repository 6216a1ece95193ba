/* cgroup_probe.c - v1, v2 and hybrid cgroup hierarchy detection (see
 * cgroup_probe-int.h for why the gvisor mechanism needs it). */
#include "cgroup_probe-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "sandbox-int.h"

/* Each controller the limits use and its bit. */
static const struct {
    const char *name;
    unsigned bit;
} needed[] = {
    {"memory", PH_CGROUP_MEMORY},
    {"pids", PH_CGROUP_PIDS},
    {"cpu", PH_CGROUP_CPU},
};

/* What proves a v1 controller's tree is mounted at <root>/<name>: every
 * cgroup directory has cgroup.procs, an unmounted mount point (a bare
 * directory) has not. (The limit files themselves are no proof: the root
 * of a v1 pids tree has no pids.max.) */
#define V1_MOUNTED_FILE "cgroup.procs"

static int is_file(const char *root, const char *a, const char *b)
{
    char path[1024];
    int n = snprintf(path, sizeof path, "%s/%s%s%s", root, a, b ? "/" : "", b ? b : "");
    struct stat sb;
    return n > 0 && (size_t)n < sizeof path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* True when the whitespace-separated list holds the word. */
static int has_word(const char *list, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += len) {
        int starts = p == list || p[-1] == ' ' || p[-1] == '\n' || p[-1] == '\t';
        char end = p[len];
        if (starts && (end == '\0' || end == ' ' || end == '\n' || end == '\t'))
            return 1;
    }
    return 0;
}

/* Reads <root>/cgroup.controllers (a short line) into buf; -1 if absent. */
static int read_v2_controllers(const char *root, char *buf, size_t cap)
{
    char path[1024];
    int n = snprintf(path, sizeof path, "%s/cgroup.controllers", root);
    if (n < 0 || (size_t)n >= sizeof path)
        return -1;
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    size_t got = fread(buf, 1, cap - 1, f);
    buf[got] = '\0';
    fclose(f);
    return 0;
}

ph_status ph_cgroup_probe_root(const char *root, ph_cgroup_probe *out, ph_diag *diag)
{
    if (root == NULL)
        root = PH_CGROUP_DEFAULT_ROOT;
    out->layout = PH_CGROUP_NONE;
    out->controllers = 0;
    struct stat sb;
    if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return ph_diag_set(diag, PH_E_IO, 0, "no cgroup hierarchy: %s is not a directory", root);
    char list[512];
    if (read_v2_controllers(root, list, sizeof list) == 0) {
        out->layout = PH_CGROUP_V2;
        for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
            if (has_word(list, needed[i].name))
                out->controllers |= needed[i].bit;
        return PH_OK;
    }
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (is_file(root, needed[i].name, V1_MOUNTED_FILE))
            out->controllers |= needed[i].bit;
    if (out->controllers != 0)
        out->layout = is_file(root, "unified", "cgroup.controllers") ? PH_CGROUP_HYBRID
                                                                     : PH_CGROUP_V1;
    return PH_OK;
}

ph_status ph_cgroup_require_limits(const ph_cgroup_probe *p, ph_diag *diag)
{
    if (p->layout == PH_CGROUP_NONE)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "no cgroup hierarchy (v1, v2 or hybrid) is mounted: the spec's "
                           "limits could not be enforced");
    for (size_t i = 0; i < sizeof needed / sizeof needed[0]; i++)
        if (!(p->controllers & needed[i].bit))
            return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                               "the %s cgroup hierarchy offers no %s controller: the spec's "
                               "%s limit could not be enforced",
                               ph_cgroup_layout_name(p->layout), needed[i].name, needed[i].name);
    return PH_OK;
}

const char *ph_cgroup_layout_name(ph_cgroup_layout layout)
{
    switch (layout) {
    case PH_CGROUP_V1: return "v1";
    case PH_CGROUP_V2: return "v2";
    case PH_CGROUP_HYBRID: return "hybrid";
    case PH_CGROUP_NONE: break;
    }
    return "none";
}

int ph_cgroup_file_path(const ph_cgroup_probe *p, const char *root, const char *controller,
                        const char *group, const char *file, char *out, size_t cap)
{
    if (root == NULL)
        root = PH_CGROUP_DEFAULT_ROOT;
    int n;
    if (p->layout == PH_CGROUP_V2)
        n = snprintf(out, cap, "%s/%s/%s", root, group, file);
    else if (p->layout == PH_CGROUP_V1 || p->layout == PH_CGROUP_HYBRID)
        n = snprintf(out, cap, "%s/%s/%s/%s", root, controller, group, file);
    else
        return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* pid listed in the cgroup.procs of the group *ctx (a directory
 * descriptor) opens, read now. */
static bool in_group(long pid, void *ctx)
{
    int procs = openat(*(const int *)ctx, "cgroup.procs", O_RDONLY | O_CLOEXEC);
    FILE *f = procs >= 0 ? fdopen(procs, "r") : NULL;
    long listed;
    bool found = false;
    while (f != NULL && !found && fscanf(f, "%ld", &listed) == 1)
        found = listed == pid;
    if (f != NULL)
        fclose(f);
    else if (procs >= 0)
        close(procs);
    return found;
}

/* Kills every process listed in dir_fd's cgroup.procs, then removes the
 * group's child groups and the group itself. 0 when it is gone. A listed
 * pid can exit, be reaped (by its own parent) and be reused before the
 * signal: it goes through a pidfd, only to a process still in the group. */
static int remove_group_at(int parent_fd, const char *name, int depth)
{
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (depth < 8) {
        DIR *d = fdopendir(dup(fd));
        struct dirent *de;
        while (d != NULL && (de = readdir(d)) != NULL)
            if (de->d_type == DT_DIR && de->d_name[0] != '.')
                (void)remove_group_at(fd, de->d_name, depth + 1);
        if (d != NULL)
            closedir(d);
    }
    int rc = -1;
    for (int attempt = 0; attempt < 100; attempt++) {
        int procs = openat(fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        FILE *f = procs >= 0 ? fdopen(procs, "r") : NULL;
        long pid;
        while (f != NULL && fscanf(f, "%ld", &pid) == 1)
            if (pid > 1)
                (void)ph_signal_if((pid_t)pid, SIGKILL, in_group, &fd);
        if (f != NULL)
            fclose(f);
        else if (procs >= 0)
            close(procs);
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
            rc = 0;
            break;
        }
        usleep(10 * 1000); /* killed tasks leave the group asynchronously */
    }
    close(fd);
    return rc;
}

int ph_cgroup_remove_group(const char *root, const char *group)
{
    if (group == NULL || group[0] == '\0' || group[0] == '.' || strchr(group, '/') != NULL)
        return -1;
    int top = open(root ? root : PH_CGROUP_DEFAULT_ROOT, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0)
        return -1;
    int rc = remove_group_at(top, group, 0); /* v2: groups sit at the top */
    DIR *d = fdopendir(dup(top));
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        /* v1 and hybrid: one tree per controller (and systemd's, unified). */
        int sub = openat(top, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        struct stat sb;
        if (fstatat(sub, "cgroup.procs", &sb, 0) == 0 && remove_group_at(sub, group, 0) != 0)
            rc = -1;
        close(sub);
    }
    if (d != NULL)
        closedir(d);
    close(top);
    return rc;
}

bool ph_cgroup_group_exists(const char *root, const char *group)
{
    const char *r = root ? root : PH_CGROUP_DEFAULT_ROOT;
    char path[1024];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", r, group);
    if (stat(path, &sb) == 0)
        return true;
    DIR *d = opendir(r);
    struct dirent *de;
    bool found = false;
    while (!found && d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/%s", r, de->d_name, group);
        found = stat(path, &sb) == 0;
    }
    if (d != NULL)
        closedir(d);
    return found;
}
