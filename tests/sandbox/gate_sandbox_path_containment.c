/* gate_sandbox_path_containment.c - gate sandbox.path_containment (ADR-0029
 * decisions 8, 9; Milestone 4): WorkspaceFiles refuses absolute paths, ".."
 * escapes, NUL bytes and symlinks leading outside, with the kernel resolving
 * beneath the root (no check-then-open), through openat2 and through the
 * O_NOFOLLOW fallback walk alike. */
#include "sandbox_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sandbox-int.h"

typedef struct ctx {
    char *outer;  /* temp dir holding the workspace and a secret beside it */
    char root[512];
    ph_workspace *ws;
} ctx;

static int setup(void **state)
{
    ctx *c = calloc(1, sizeof *c);
    c->outer = ph_test_mkdtemp();
    snprintf(c->root, sizeof c->root, "%s/ws", c->outer);
    mkdir(c->root, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/secret", c->outer);
    ph_test_write_file(p, "SECRET", 6);
    snprintf(p, sizeof p, "%s/in", c->root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/in/file", c->root);
    ph_test_write_file(p, "inside", 6);
    int root = open(c->root, O_RDONLY | O_DIRECTORY);
    assert_int_equal(symlinkat("../secret", root, "up-link"), 0);
    assert_int_equal(symlinkat("/etc/hostname", root, "abs-link"), 0);
    assert_int_equal(symlinkat("..", root, "parent-dir"), 0);
    assert_int_equal(symlinkat("in/file", root, "ok-link"), 0);
    assert_int_equal(symlinkat("/proc/self/root/etc/hostname", root, "magic-link"), 0);
    assert_int_equal(mkfifoat(root, "fifo", 0644), 0);
    close(root);
    assert_int_equal(ph_workspace_open(c->root, &c->ws, NULL), PH_OK);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctx *c = *state;
    ph_workspace_close(&c->ws);
    ph_test_rmtree(c->outer);
    free(c->outer);
    free(c);
    ph_ws_force_component_walk = false;
    return 0;
}

static void refuses(ph_workspace *ws, const char *path)
{
    uint8_t *data = NULL;
    size_t len;
    ph_diag diag = {0};
    ph_status st = ph_workspace_read(ws, path, 4096, &data, &len, &diag);
    if (st != PH_E_DENIED)
        fail_msg("read '%s': want a refusal, got %s (%s)", path, ph_strerror(st), diag.message);
    assert_null(data);
    assert_true(strncmp(diag.message, "path_", 5) == 0);
    ph_ws_stat sb;
    st = ph_workspace_stat(ws, path, &sb, &diag);
    /* stat does not follow a final symlink: a symlink itself may be stat'ed,
     * but nothing is resolved through one that leaves. */
    if (st != PH_E_DENIED && !(st == PH_OK && sb.type == PH_WS_TYPE_SYMLINK))
        fail_msg("stat '%s': got %s", path, ph_strerror(st));
    st = ph_workspace_write(ws, path, "x", 1, 0644, &diag);
    if (st == PH_OK && strchr(path, '/') == NULL) {
        /* Writing replaces a symlink at the path, never follows it. */
        ph_ws_stat after;
        assert_int_equal(ph_workspace_stat(ws, path, &after, NULL), PH_OK);
        assert_int_equal(after.type, PH_WS_TYPE_FILE);
        return;
    }
    if (st != PH_E_DENIED)
        fail_msg("write '%s': want a refusal, got %s", path, ph_strerror(st));
}

static void check_all(ctx *c)
{
    const char *bad[] = {"/etc/hostname", "../secret", "in/../../secret", "..", "up-link",
                         "abs-link", "parent-dir/secret", "magic-link", "parent-dir/ws/in/file"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        refuses(c->ws, bad[i]);
    char p[600];
    snprintf(p, sizeof p, "%s/secret", c->outer);
    size_t len;
    char *secret = ph_test_read_file(p, &len);
    assert_string_equal(secret, "SECRET"); /* never overwritten through a link */
    free(secret);
    uint8_t *data;
    assert_int_equal(ph_workspace_read(c->ws, "in//./file", 100, &data, &len, NULL), PH_OK);
    assert_string_equal((char *)data, "inside");
    free(data);
}

static void test_openat2_resolution(void **state)
{
    check_all(*state);
}

static void test_fallback_walk(void **state)
{
    ph_ws_force_component_walk = true;
    check_all(*state);
    ph_ws_force_component_walk = false;
}

static void test_nul_and_lexical_rules(void **state)
{
    (void)state;
    char out[PH_WS_PATH_MAX + 1];
    assert_int_equal(ph_ws_path_normalize("a\0b", 3, out, sizeof out), PH_WS_PATH_NUL);
    assert_int_equal(ph_ws_path_normalize("/a", 2, out, sizeof out), PH_WS_PATH_ABSOLUTE);
    assert_int_equal(ph_ws_path_normalize("a/..", 4, out, sizeof out), PH_WS_PATH_DOTDOT);
    assert_string_equal(out, "");
    assert_int_equal(ph_ws_path_normalize("./a//b/./", 9, out, sizeof out), PH_WS_PATH_OK);
    assert_string_equal(out, "a/b");
    assert_int_equal(ph_ws_path_normalize("", 0, out, sizeof out), PH_WS_PATH_OK);
    assert_string_equal(out, ".");
    assert_int_equal(ph_ws_path_normalize("..a/b..", 7, out, sizeof out), PH_WS_PATH_OK);
    assert_string_equal(out, "..a/b..");
    char longname[300];
    memset(longname, 'x', sizeof longname);
    assert_int_equal(ph_ws_path_normalize(longname, sizeof longname, out, sizeof out),
                     PH_WS_PATH_TOO_LONG);
    assert_string_equal(ph_ws_path_verdict_code(PH_WS_PATH_ESCAPE), "path_escape");
}

static void test_special_files_and_caps(void **state)
{
    ctx *c = *state;
    int fd = -1;
    ph_diag diag = {0};
    /* A fifo is refused at once, never blocking the reader. */
    assert_int_equal(ph_workspace_open_read(c->ws, "fifo", 100, &fd, NULL, &diag), PH_E_INVAL);
    assert_int_equal(fd, -1);
    assert_int_equal(ph_workspace_open_read(c->ws, "in", 100, &fd, NULL, &diag), PH_E_INVAL);
    assert_int_equal(ph_workspace_open_read(c->ws, "in/file", 5, &fd, NULL, &diag), PH_E_LIMIT);
    ph_ws_stat st;
    assert_int_equal(ph_workspace_open_read(c->ws, "in/file", 6, &fd, &st, &diag), PH_OK);
    assert_int_equal(st.size, 6);
    close(fd);
}

/* How many open(2)s the inotify descriptor in_fd has seen. */
static int opens_seen(int in_fd)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int n = 0;
    ssize_t r;
    while ((r = read(in_fd, buf, sizeof buf)) > 0) {
        for (char *p = buf; p < buf + r;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            n += (e->mask & IN_OPEN) != 0;
            p += sizeof *e + e->len;
        }
    }
    return n;
}

/* A fifo or a device is refused from the type of what the path resolves
 * to, without ever being opened: opening a fifo for reading releases a
 * writer the sandbox keeps waiting in open(2) (and tells it the service
 * looked), and opening a device can act (a tty, a tape, a watchdog). The
 * kernel reports every open(2) to inotify (IN_OPEN) before the call
 * returns, so none may be seen. */
static void special_files_are_never_opened(ctx *c)
{
    char p[600];
    const char *names[] = {"fifo", "chardev"};
    size_t n = 1;
    int root = open(c->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(root >= 0);
    /* A device node needs privilege to make (nothing to test without). */
    if (geteuid() == 0 && (mknodat(root, "chardev", S_IFCHR | 0644, makedev(1, 3)) == 0 ||
                           errno == EEXIST))
        n = 2;
    close(root);
    for (size_t i = 0; i < n; i++) {
        int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        assert_true(in >= 0);
        snprintf(p, sizeof p, "%s/%s", c->root, names[i]);
        assert_true(inotify_add_watch(in, p, IN_OPEN) >= 0);
        int fd = -1;
        ph_diag diag = {0};
        ph_status st = ph_workspace_open_read(c->ws, names[i], 100, &fd, NULL, &diag);
        if (st != PH_E_INVAL || fd != -1)
            fail_msg("open_read '%s': status %d (%s), want PH_E_INVAL", names[i], st,
                     diag.message);
        uint8_t *data = NULL;
        size_t len = 0;
        assert_int_equal(ph_workspace_read(c->ws, names[i], 100, &data, &len, &diag),
                         PH_E_INVAL);
        int seen = opens_seen(in);
        close(in);
        if (seen != 0)
            fail_msg("'%s' was opened %d times to be refused", names[i], seen);
    }
    /* A regular file is still read, through a symlink inside too (openat2
     * follows one that stays beneath; the fallback walk follows none). */
    uint8_t *data = NULL;
    size_t len = 0;
    ph_diag diag = {0};
    ph_status st = ph_workspace_read(c->ws, "ok-link", 100, &data, &len, &diag);
    if (ph_ws_force_component_walk) {
        assert_int_equal(st, PH_E_DENIED);
        assert_non_null(strstr(diag.message, "path_escape"));
    } else {
        assert_int_equal(st, PH_OK);
        assert_int_equal(len, 6);
        assert_memory_equal(data, "inside", 6);
    }
    free(data);
}

static void test_special_files_never_opened(void **state)
{
    special_files_are_never_opened(*state);
}

static void test_special_files_never_opened_walk(void **state)
{
    ph_ws_force_component_walk = true;
    special_files_are_never_opened(*state);
    ph_ws_force_component_walk = false;
}

/* A trailing slash names a directory, as in POSIX: never a file. */
static void test_trailing_slash_is_a_directory(void **state)
{
    ctx *c = *state;
    int fd = -1;
    ph_diag diag = {0};
    ph_ws_stat st;
    static const char *const file_as_dir[] = {"in/file/", "in/file/.", "in/file//", NULL};
    for (size_t i = 0; file_as_dir[i]; i++) {
        assert_int_equal(ph_workspace_open_read(c->ws, file_as_dir[i], 100, &fd, NULL, &diag),
                         PH_E_INVAL);
        assert_non_null(strstr(diag.message, "path_not_directory"));
        assert_int_equal(fd, -1);
        assert_int_equal(ph_workspace_stat(c->ws, file_as_dir[i], &st, &diag), PH_E_INVAL);
        assert_non_null(strstr(diag.message, "path_not_directory"));
        assert_int_equal(ph_workspace_write(c->ws, file_as_dir[i], "x", 1, 0644, &diag),
                         PH_E_INVAL);
        assert_non_null(strstr(diag.message, "path_not_directory"));
    }
    /* A directory with a slash is still one; the file without is a file. */
    assert_int_equal(ph_workspace_stat(c->ws, "in/", &st, &diag), PH_OK);
    assert_int_equal(ph_workspace_stat(c->ws, "in/file", &st, &diag), PH_OK);
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(ph_workspace_read(c->ws, "in/file", 100, &data, &len, &diag), PH_OK);
    free(data);
}

static void test_atomic_write_leaves_nothing_on_failure(void **state)
{
    ctx *c = *state;
    /* Writing over a directory fails and leaves no temporary file. */
    assert_int_equal(ph_workspace_write(c->ws, "in", "x", 1, 0644, NULL), PH_E_INVAL);
    ph_ws_list *list = NULL;
    assert_int_equal(ph_workspace_list(c->ws, "in", 100, &list, NULL), PH_OK);
    assert_int_equal(list->count, 1);
    assert_string_equal(list->entries[0].name, "file");
    ph_ws_list_free(&list);
    /* An over-cap stream leaves the old file. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "0123456789", 10), 10);
    close(p[1]);
    assert_int_equal(ph_workspace_write_fd(c->ws, "in/file", p[0], 4, 0644, NULL), PH_E_LIMIT);
    close(p[0]);
    uint8_t *data;
    size_t len;
    assert_int_equal(ph_workspace_read(c->ws, "in/file", 100, &data, &len, NULL), PH_OK);
    assert_string_equal((char *)data, "inside");
    free(data);
    assert_int_equal(ph_workspace_list(c->ws, "in", 100, &list, NULL), PH_OK);
    assert_int_equal(list->count, 1);
    ph_ws_list_free(&list);
    /* Nested directories are created beneath the root. */
    assert_int_equal(ph_workspace_write(c->ws, "a/b/c.txt", "abc", 3, 0600, NULL), PH_OK);
    ph_ws_stat st;
    assert_int_equal(ph_workspace_stat(c->ws, "a/b/c.txt", &st, NULL), PH_OK);
    assert_int_equal(st.mode, 0600);
    assert_int_equal(st.size, 3);
}

/* Writes a file 2,047 components deep (every directory missing) and counts
 * the path components the kernel is asked to resolve: in proportion to the
 * depth (a binary search for what exists, then one step per directory made),
 * where resolving every prefix from the root again made one 4 KiB request
 * cost 4 million lookups (over a second of the service's time). Symlinks in
 * the existing part still resolve as elsewhere: inside, followed by openat2
 * (refused by the fallback walk, which follows none); out, or a file on the
 * way, refused with nothing made. */
static void deep_write(ctx *c, bool walk)
{
    char path[PH_WS_PATH_MAX + 1];
    size_t o = 0;
    while (o + 4 <= PH_WS_PATH_MAX) {
        path[o++] = 'd';
        path[o++] = '/';
    }
    path[o++] = 'f';
    path[o] = '\0';
    unsigned long before = ph_ws_components_resolved;
    ph_diag diag = {0};
    assert_int_equal(ph_workspace_write(c->ws, path, "x", 1, 0644, &diag), PH_OK);
    unsigned long lookups = ph_ws_components_resolved - before;
    printf("  a write %zu components deep resolved %lu components\n", o / 2 + 1, lookups);
    if (lookups > 64 * (o / 2 + 1))
        fail_msg("%lu component lookups for one write of %zu components", lookups, o / 2 + 1);
    ph_ws_stat st;
    assert_int_equal(ph_workspace_stat(c->ws, path, &st, NULL), PH_OK);
    assert_int_equal(st.type, PH_WS_TYPE_FILE);

    int root = open(c->root, O_RDONLY | O_DIRECTORY);
    assert_int_equal(symlinkat("in", root, "in-link"), 0);
    close(root);
    assert_int_equal(ph_workspace_write(c->ws, "in-link/new/deeper/f", "y", 1, 0644, NULL),
                     walk ? PH_E_DENIED : PH_OK);
    assert_int_equal(ph_workspace_stat(c->ws, "in/new/deeper/f", &st, NULL),
                     walk ? PH_E_NOT_FOUND : PH_OK);
    assert_int_equal(ph_workspace_write(c->ws, "parent-dir/made/f", "z", 1, 0644, &diag),
                     PH_E_DENIED);
    char outside[600];
    snprintf(outside, sizeof outside, "%s/made", c->outer);
    struct stat sb;
    assert_int_not_equal(lstat(outside, &sb), 0);
    assert_int_equal(ph_workspace_write(c->ws, "in/file/made/f", "z", 1, 0644, &diag),
                     PH_E_NOT_FOUND);
    assert_int_equal(ph_workspace_stat(c->ws, "in/file", &st, NULL), PH_OK);
    assert_int_equal(st.type, PH_WS_TYPE_FILE);
}

static void test_deep_write_costs_in_proportion(void **state)
{
    deep_write(*state, false);
}

static void test_deep_write_costs_in_proportion_walk(void **state)
{
    ph_ws_force_component_walk = true;
    deep_write(*state, true);
    ph_ws_force_component_walk = false;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_openat2_resolution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fallback_walk, setup, teardown),
        cmocka_unit_test(test_nul_and_lexical_rules),
        cmocka_unit_test_setup_teardown(test_special_files_and_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_special_files_never_opened, setup, teardown),
        cmocka_unit_test_setup_teardown(test_special_files_never_opened_walk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trailing_slash_is_a_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_atomic_write_leaves_nothing_on_failure, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_deep_write_costs_in_proportion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_write_costs_in_proportion_walk, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
