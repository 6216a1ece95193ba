/* test_rootfs_unchanged.c - the root filesystem every gvisor sandbox shares
 * is the same after 20 sandboxes as before: with and without a network
 * grant, commands that try to write to it, a command killed at its
 * deadline, and creates and executes that fail (fault injection, see
 * sandbox-int.h). The hash covers the file list, each entry's type, mode,
 * owner, size, mtime and ctime, file contents and symlink targets. runsc's
 * gofer makes missing bind-mount points in that directory on the host; the
 * stubs scripts/build-rootfs.sh makes are what keeps it from doing so; the
 * test builds a fresh tree with that script.
 * Exits 77 when gvisor is not available. */
#define _XOPEN_SOURCE 700
#include "escape_support.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mechanism_gvisor-int.h"
#include "sandbox-int.h"

#define SANDBOXES 20

static ph_sandbox_mechanism g_mechanism;
static sbx_fixture g_fx;
static char g_rootfs[PATH_MAX];
static size_t g_rootfs_len;
static uint64_t g_hash;
static size_t g_entries;
static const char *g_fail_step;

static void mix(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        g_hash = (g_hash ^ b[i]) * 1099511628211ull;
}

static int visit(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)type;
    (void)ftw;
    const char *rel = path + g_rootfs_len;
    mix(rel, strlen(rel) + 1);
    uint64_t fields[] = {sb->st_mode, sb->st_uid, sb->st_gid, (uint64_t)sb->st_size,
                         (uint64_t)sb->st_mtim.tv_sec, (uint64_t)sb->st_mtim.tv_nsec,
                         (uint64_t)sb->st_ctim.tv_sec, (uint64_t)sb->st_ctim.tv_nsec};
    mix(fields, sizeof fields);
    if (S_ISLNK(sb->st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target);
        if (n > 0)
            mix(target, (size_t)n);
    } else if (S_ISREG(sb->st_mode)) {
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        char buf[65536];
        ssize_t n;
        while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0)
            mix(buf, (size_t)n);
        if (fd >= 0)
            close(fd);
    }
    g_entries++;
    return 0;
}

static uint64_t hash_rootfs(size_t *entries)
{
    g_hash = 1469598103934665603ull;
    g_entries = 0;
    assert_int_equal(nftw(g_rootfs, visit, 32, FTW_PHYS), 0);
    *entries = g_entries;
    return g_hash;
}

static ph_status fault(const char *step)
{
    return g_fail_step != NULL && strcmp(step, g_fail_step) == 0 ? PH_E_IO : PH_OK;
}

static char g_tree_dir[PATH_MAX];

static int group_setup(void **state)
{
    (void)state;
    esc_use_build_tmpdir();
    /* A tree of its own, fresh from the script: one that earlier sandboxes
     * had already changed would hide the change. */
    char *top = ph_test_mkdtemp();
    if (top == NULL)
        return -1;
    snprintf(g_tree_dir, sizeof g_tree_dir, "%s", top);
    free(top);
    char cmd[PATH_MAX * 2 + 64];
    snprintf(cmd, sizeof cmd, "sh '%s/scripts/build-rootfs.sh' '%s/rootfs' 2>/dev/null",
             PH_SOURCE_DIR, g_tree_dir);
    if (system(cmd) != 0)
        return -1;
    snprintf(cmd, sizeof cmd, "%s/rootfs", g_tree_dir);
    setenv("PINHOLE_GVISOR_ROOTFS", cmd, 1);
    if (!sbx_open(&g_fx, g_mechanism, 60000))
        return -1;
    ph_diag diag = {0};
    if (ph_gvisor_rootfs_path(g_rootfs, &diag) != PH_OK)
        return -1;
    g_rootfs_len = strlen(g_rootfs);
    ph_sandbox_fault = fault;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ph_sandbox_fault = NULL;
    sbx_close(&g_fx);
    ph_test_rmtree(g_tree_dir);
    return 0;
}

static void run(ph_environment *env, const char *script, int64_t timeout_seconds)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    ph_execution_command cmd = {
        .argv = argv, .timeout_seconds = timeout_seconds, .run_budget_ms = PH_SANDBOX_UNSET};
    ph_execution_result *r = NULL;
    ph_diag diag = {0};
    (void)ph_environment_execute(env, &cmd, &r, &diag);
    ph_execution_result_free(&r);
}

static void test_twenty_sandboxes_leave_the_rootfs_unchanged(void **state)
{
    (void)state;
    size_t before_n, after_n;
    uint64_t before = hash_rootfs(&before_n);
    /* The mount points the gofer would otherwise make are in the tree. */
    static const char *const stubs[] = {"run/pinhole/forwarder", "run/pinhole/proxy.sock"};
    for (size_t i = 0; i < sizeof stubs / sizeof stubs[0]; i++) {
        char path[PATH_MAX + 64];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", g_rootfs, stubs[i]);
        assert_int_equal(lstat(path, &sb), 0);
        assert_true(S_ISREG(sb.st_mode));
    }
    char sock[1024];
    /* Beside the state directory, in the test's TMPDIR (a path the sandbox
     * accepts: no "..", directories only root controls). */
    const char *tmp = getenv("TMPDIR");
    snprintf(sock, sizeof sock, "%s/rootfs-%d.sock", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    int listener = esc_unix_listener(sock);
    assert_true(listener >= 0);
    static const char *const create_faults[] = {"runsc_start", "bundle_write", "runsc_create",
                                                "volume_ready"};
    int created = 0, failed = 0;
    for (int i = 0; i < SANDBOXES; i++) {
        ph_environment_spec s = sbx_spec(&g_fx);
        if (i % 2 == 0) {
            s.network.grant_token = "grant-for-the-test";
            s.network.proxy_socket_path = sock;
        }
        g_fail_step = i % 4 == 3 ? create_faults[(i / 4) % 4] : NULL;
        ph_environment *env = NULL;
        ph_diag diag = {0};
        ph_status st = ph_environment_create(g_fx.svc, &s, &env, &diag);
        g_fail_step = NULL;
        if (st != PH_OK) {
            failed++;
            continue;
        }
        created++;
        run(env,
            "touch /bin/pinhole-x; mkdir /run/pinhole/x; : > /run/pinhole/forwarder; "
            "echo x >> /etc/passwd; rm -f /etc/group; ln -s / /usr/pinhole-x; "
            "chmod 777 /bin; mkdir -p /workspace/a/b && echo ok > /workspace/a/b/c",
            PH_SANDBOX_UNSET);
        if (i % 4 == 1) {
            run(env, "sleep 30", 1); /* killed at its deadline */
            g_fail_step = "exec_mechanism";
            run(env, "true", PH_SANDBOX_UNSET);
            g_fail_step = NULL;
        }
        ph_environment_destroy(&env);
    }
    close(listener);
    unlink(sock);
    uint64_t after = hash_rootfs(&after_n);
    printf("# %d sandboxes created, %d creates failed; rootfs %zu entries, hash %016llx -> "
           "%016llx\n",
           created, failed, before_n, (unsigned long long)before, (unsigned long long)after);
    assert_int_equal(created + failed, SANDBOXES);
    assert_true(failed >= 4);
    assert_true(created >= SANDBOXES / 2); /* a refused create changes nothing either */
    assert_int_equal(before_n, after_n);
    assert_true(before == after);
}

int main(int argc, char **argv)
{
    int rc = esc_pick_mechanism(argc, argv, false, &g_mechanism);
    if (rc != 0)
        return rc;
    if (g_mechanism != PH_MECHANISM_GVISOR) {
        printf("SKIP: only gvisor shares the root filesystem directory (docker imports a copy)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_twenty_sandboxes_leave_the_rootfs_unchanged),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
