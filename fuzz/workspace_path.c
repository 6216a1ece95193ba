/* workspace_path.c - fuzzes the workspace path resolver (sandbox).
 *
 * Invariants for every input:
 *  - an accepted path is normalized: normalizing it again gives it back;
 *  - it is relative, has no empty, "." or ".." component, no NUL, no leading
 *    or trailing '/', and fits PH_WS_PATH_MAX;
 *  - a refused path leaves the output empty;
 *  - resolving an accepted path beneath a root that holds hostile symlinks
 *    (to "/", to "..", to an absolute file, to a sibling) either fails or
 *    yields a descriptor that really is beneath the root. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/workspace.h"
#include "sandbox-int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int g_root = -1;
static char g_root_path[256];

static void remove_root(void)
{
    static const char *const names[] = {"a/b/f", "a/up2", "to-root", "up", "abs", "in", "magic"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        (void)unlinkat(g_root, names[i], 0);
    (void)unlinkat(g_root, "a/b", AT_REMOVEDIR);
    (void)unlinkat(g_root, "a", AT_REMOVEDIR);
    close(g_root);
    (void)rmdir(g_root_path);
}

static void make_root(void)
{
    snprintf(g_root_path, sizeof g_root_path, "/tmp/pinhole-fuzz-ws-%d", (int)getpid());
    mkdir(g_root_path, 0755);
    g_root = open(g_root_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g_root < 0)
        abort();
    mkdirat(g_root, "a", 0755);
    mkdirat(g_root, "a/b", 0755);
    close(openat(g_root, "a/b/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    static const char *const links[][2] = {
        {"/", "to-root"}, {"..", "up"}, {"../..", "a/up2"}, {"/etc/passwd", "abs"},
        {"a/b", "in"}, {"/proc/self/root", "magic"},
    };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (symlinkat(links[i][0], g_root, links[i][1]) != 0 && errno != EEXIST)
            abort();
    atexit(remove_root);
}

static void check_beneath(int fd)
{
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        return;
    target[n] = '\0';
    size_t rl = strlen(g_root_path);
    if (strncmp(target, g_root_path, rl) != 0 || (target[rl] != '\0' && target[rl] != '/'))
        abort(); /* resolved outside the root */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (g_root < 0)
        make_root();
    char out[PH_WS_PATH_MAX + 1];
    memset(out, 'x', sizeof out);
    ph_ws_path_verdict v = ph_ws_path_normalize((const char *)data, size, out, sizeof out);
    if (v != PH_WS_PATH_OK) {
        if (out[0] != '\0')
            abort();
        return 0;
    }
    size_t len = strlen(out);
    if (len == 0 || len > PH_WS_PATH_MAX || out[0] == '/' || out[len - 1] == '/')
        abort();
    if (strcmp(out, ".") != 0) {
        const char *p = out;
        for (;;) {
            const char *slash = strchr(p, '/');
            size_t n = slash ? (size_t)(slash - p) : strlen(p);
            if (n == 0 || n > PH_WS_NAME_MAX || (n == 1 && p[0] == '.') ||
                (n == 2 && p[0] == '.' && p[1] == '.'))
                abort();
            if (!slash)
                break;
            p = slash + 1;
        }
    }
    char again[PH_WS_PATH_MAX + 1];
    if (ph_ws_path_normalize(out, len, again, sizeof again) != PH_WS_PATH_OK ||
        strcmp(again, out) != 0)
        abort(); /* not idempotent */
    for (int walk = 0; walk < 2; walk++) {
        ph_ws_force_component_walk = walk == 1;
        int fd = ph_ws_open_beneath(g_root, out, O_PATH, 0);
        if (fd >= 0) {
            check_beneath(fd);
            close(fd);
        }
    }
    ph_ws_force_component_walk = false;
    return 0;
}
