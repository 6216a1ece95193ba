/* test_support.c - helpers shared by the unit tests. */
#include "test_support.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinhole/tree_remove.h"

const char *ph_test_source_path(const char *relative)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", PH_SOURCE_DIR, relative);
    return buf;
}

char *ph_test_mkdtemp(void)
{
    const char *tmp = getenv("TMPDIR");
    char *path = NULL;
    if (asprintf(&path, "%s/pinhole-test-XXXXXX", tmp && *tmp ? tmp : "/tmp") < 0)
        return NULL;
    if (mkdtemp(path) == NULL) {
        free(path);
        return NULL;
    }
    return path;
}

char *ph_test_dir;

int ph_test_dir_setup(void **state)
{
    (void)state;
    ph_test_dir = ph_test_mkdtemp();
    return ph_test_dir ? 0 : -1;
}

int ph_test_dir_teardown(void **state)
{
    (void)state;
    ph_test_rmtree(ph_test_dir);
    free(ph_test_dir);
    ph_test_dir = NULL;
    return 0;
}

/* The base library's remover: never follows a link out of the scratch tree,
 * whatever a test left in it. */
void ph_test_rmtree(const char *path)
{
    if (path == NULL || *path == '\0')
        return;
    const char *slash = strrchr(path, '/');
    char parent[4096];
    if (slash == NULL)
        snprintf(parent, sizeof parent, ".");
    else
        snprintf(parent, sizeof parent, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    (void)ph_tree_remove_at(fd, slash ? slash + 1 : path, 0, NULL);
    close(fd);
}

char *ph_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0, r;
    char *buf = malloc(cap + 1);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *nb = realloc(buf, (cap *= 2) + 1);
            if (nb == NULL) { free(buf); buf = NULL; } else { buf = nb; }
        }
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = n;
    }
    return buf;
}

int ph_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    int ok = fwrite(data, 1, len, f) == len;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

int ph_test_capture(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    size_t cap = 65536, n = 0, r;
    char *buf = malloc(cap + 1);
    if (p == NULL || buf == NULL) {
        if (p)
            pclose(p);
        free(buf);
        if (out)
            *out = NULL;
        return -1;
    }
    while ((r = fread(buf + n, 1, cap - n, p)) > 0)
        n += r;
    buf[n] = '\0';
    int status = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
