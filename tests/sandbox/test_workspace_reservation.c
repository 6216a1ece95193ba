/* test_workspace_reservation.c - a workspace's byte limit is reserved on the
 * host filesystem when the workspace is made (docs/sandbox.md, "Workspace
 * limits and host identities"), on a small tmpfs holding the environment
 * directories:
 *  - two workspaces whose limits together exceed its free space cannot both
 *    exist: the second is refused with workspace_host_space and leaves no
 *    image, loop device or mount; also when the space goes between the
 *    free-space check and the reservation (another process's create);
 *  - a workspace written to its whole limit takes nothing more from the
 *    host, and emptying and trimming it gives nothing back;
 *  - a filesystem that cannot reserve (ext2: no fallocate) is refused.
 * Needs root, the loop driver and mkfs.ext4 (exit 77 otherwise). */
#include "sandbox_test_util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "pinhole/clock.h"
#include "sandbox-int.h"

#define MIB (1024ull * 1024)
#define SCRATCH_MIB 64
#define INODES 2000

static char *g_top; /* the scratch filesystem's mount point */
static bool g_squat; /* the fault hook fills the scratch filesystem */

static int group_setup(void **state)
{
    (void)state;
    g_top = ph_test_mkdtemp();
    if (g_top == NULL)
        return -1;
    char opts[64];
    snprintf(opts, sizeof opts, "size=%dm,mode=0700", SCRATCH_MIB);
    if (mount("tmpfs", g_top, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0) {
        printf("# tmpfs on %s: %s\n", g_top, strerror(errno));
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ph_sandbox_fault = NULL;
    (void)umount2(g_top, MNT_DETACH);
    ph_test_rmtree(g_top);
    free(g_top);
    g_top = NULL;
    return 0;
}

static uint64_t free_bytes(const char *path)
{
    struct statvfs v;
    assert_int_equal(statvfs(path, &v), 0);
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* A fresh environment directory top/name with an empty workspace in it. */
static int env_dir(const char *top, const char *name, char path[static 512])
{
    snprintf(path, 512, "%s/%s", top, name);
    assert_int_equal(mkdir(path, 0700), 0);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(mkdirat(fd, "workspace", 0755), 0);
    return fd;
}

static ph_status volume(int fd, const char *path, uint64_t mib, ph_diag *diag)
{
    return ph_ws_volume_create(fd, path, mib * MIB, INODES, 4242, 4242, diag);
}

/* Mounts whose mount point is below top (not top itself). */
static int mounts_below(const char *top)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    assert_non_null(f);
    char line[4096], below[600];
    snprintf(below, sizeof below, " %s/", top);
    int n = 0;
    while (fgets(line, sizeof line, f) != NULL)
        n += strstr(line, below) != NULL;
    fclose(f);
    return n;
}

/* A refused create left its environment directory as it was: only the
 * empty, unmounted workspace directory. */
static void assert_refusal_left_nothing(int fd)
{
    struct stat env_sb, ws_sb;
    assert_int_equal(fstat(fd, &env_sb), 0);
    assert_int_equal(fstatat(fd, "workspace", &ws_sb, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(ws_sb.st_dev == env_sb.st_dev);
    assert_int_not_equal(faccessat(fd, ".workspace.img", F_OK, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(env_sb.st_nlink, 3); /* ".", its name, workspace/.. */
}

/* Unmounts the volume of fd and waits for its loop device to let the
 * image go (autoclear runs at the last close). */
static void volume_remove(int fd, const char *path)
{
    assert_int_equal(ph_ws_volume_unmount(fd, path, false), 0);
    assert_int_equal(unlinkat(fd, "workspace", AT_REMOVEDIR), 0);
    close(fd);
    int64_t t0 = ph_monotonic_ms();
    while (sbx_loop_devices_of(g_top) != 0 && ph_monotonic_ms() - t0 < 5000)
        usleep(10 * 1000);
    assert_int_equal(sbx_loop_devices_of(g_top), 0);
    ph_test_rmtree(path);
}

static void expect_host_space(ph_status st, const ph_diag *diag)
{
    printf("# %s\n", diag->message);
    assert_int_equal(st, PH_E_LIMIT);
    assert_non_null(strstr(diag->message, "workspace_host_space"));
}

static void test_second_workspace_over_free_space_is_refused(void **state)
{
    (void)state;
    char a_path[512], b_path[512];
    int a = env_dir(g_top, "a", a_path), b = env_dir(g_top, "b", b_path);
    uint64_t free0 = free_bytes(g_top);
    ph_diag diag = {0};
    /* 40 MiB fits in 64 MiB; the sum of two does not. */
    if (volume(a, a_path, 40, &diag) != PH_OK)
        fail_msg("first volume: %s", diag.message);
    uint64_t free1 = free_bytes(g_top);
    printf("# scratch free: %llu KiB, %llu KiB with the first 40 MiB workspace\n",
           (unsigned long long)(free0 >> 10), (unsigned long long)(free1 >> 10));
    assert_true(free1 + 40 * MIB <= free0);
    expect_host_space(volume(b, b_path, 40, &diag), &diag);
    assert_refusal_left_nothing(b);
    assert_int_equal(sbx_loop_devices_of(g_top), 1);
    assert_int_equal(mounts_below(g_top), 1);
    assert_int_equal(free_bytes(g_top), free1);
    close(b);
    ph_test_rmtree(b_path);
    volume_remove(a, a_path);
    assert_int_equal(free_bytes(g_top), free0);
}

/* Another process takes the space between the free-space check and the
 * reservation: the kernel's answer refuses. */
static ph_status squat_before_reserve(const char *step)
{
    if (!g_squat || strcmp(step, "volume_reserve") != 0)
        return PH_OK;
    g_squat = false;
    char path[600];
    snprintf(path, sizeof path, "%s/squat", g_top);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(fallocate(fd, 0, 0, (off_t)(30 * MIB)), 0);
    close(fd);
    return PH_OK;
}

static void test_space_taken_after_the_check_is_refused(void **state)
{
    (void)state;
    char path[512], squat[600];
    int fd = env_dir(g_top, "raced", path);
    uint64_t free0 = free_bytes(g_top);
    ph_diag diag = {0};
    g_squat = true;
    ph_sandbox_fault = squat_before_reserve;
    ph_status st = volume(fd, path, 40, &diag);
    ph_sandbox_fault = NULL;
    assert_false(g_squat);
    expect_host_space(st, &diag);
    assert_refusal_left_nothing(fd);
    assert_int_equal(sbx_loop_devices_of(g_top), 0);
    assert_int_equal(mounts_below(g_top), 0);
    snprintf(squat, sizeof squat, "%s/squat", g_top);
    assert_int_equal(unlink(squat), 0);
    assert_int_equal(free_bytes(g_top), free0);
    close(fd);
    ph_test_rmtree(path);
}

static void test_full_workspace_takes_and_gives_back_nothing(void **state)
{
    (void)state;
    char path[512], ws[600];
    int fd = env_dir(g_top, "full", path);
    uint64_t free0 = free_bytes(g_top);
    ph_diag diag = {0};
    if (volume(fd, path, 32, &diag) != PH_OK)
        fail_msg("volume: %s", diag.message);
    uint64_t free1 = free_bytes(g_top);
    assert_true(free1 + 32 * MIB <= free0);
    /* Fill it as root (no reserved blocks inside: root and the sandbox
     * user see the same space). */
    snprintf(ws, sizeof ws, "%s/workspace", path);
    int ws_fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(ws_fd >= 0);
    int f = openat(ws_fd, "fill", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(f >= 0);
    static char chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    uint64_t written = 0;
    ssize_t n;
    while ((n = write(f, chunk, sizeof chunk)) > 0)
        written += (uint64_t)n;
    assert_int_equal(errno, ENOSPC);
    assert_int_equal(fsync(f), 0);
    close(f);
    assert_int_equal(syncfs(ws_fd), 0);
    uint64_t free2 = free_bytes(g_top);
    printf("# wrote %llu KiB into the 32 MiB workspace; scratch free %llu KiB before, %llu "
           "KiB after\n",
           (unsigned long long)(written >> 10), (unsigned long long)(free1 >> 10),
           (unsigned long long)(free2 >> 10));
    assert_true(written > 24 * MIB);
    assert_int_equal(free2, free1);
    /* Emptied and trimmed (the host's fstrim.timer trims every mount):
     * the blocks stay reserved. */
    assert_int_equal(unlinkat(ws_fd, "fill", 0), 0);
    assert_int_equal(syncfs(ws_fd), 0);
    struct fstrim_range range = {.start = 0, .len = UINT64_MAX, .minlen = 0};
    int trimmed = ioctl(ws_fd, FITRIM, &range);
    printf("# FITRIM on the workspace: %s\n", trimmed == 0 ? "trimmed" : strerror(errno));
    assert_int_equal(syncfs(ws_fd), 0);
    assert_int_equal(free_bytes(g_top), free1);
    close(ws_fd);
    volume_remove(fd, path);
    assert_int_equal(free_bytes(g_top), free0);
}

/* ext2 has no fallocate: without a reservation the limit would be a
 * sparse promise again, so the workspace is refused. */
static void test_filesystem_without_fallocate_is_refused(void **state)
{
    (void)state;
    char img[600], mnt[600], cmd[4096];
    snprintf(img, sizeof img, "%s/ext2.img", g_top);
    snprintf(mnt, sizeof mnt, "%s/ext2", g_top);
    assert_int_equal(mkdir(mnt, 0700), 0);
    snprintf(cmd, sizeof cmd,
             "truncate -s 24M %s && mkfs.ext2 -q -F %s && mount -o loop,nosuid,nodev %s %s", img,
             img, img, mnt);
    assert_int_equal(system(cmd), 0);
    char path[512];
    int fd = env_dir(mnt, "env", path);
    ph_diag diag = {0};
    ph_status st = volume(fd, path, 16, &diag);
    printf("# %s\n", diag.message);
    assert_int_equal(st, PH_E_UNSUPPORTED);
    assert_non_null(strstr(diag.message, "workspace_volume_no_reservation"));
    assert_refusal_left_nothing(fd);
    close(fd);
    assert_int_equal(sbx_umount(mnt), 0);
    assert_int_equal(sbx_loop_devices_of(img), 0);
}

int main(void)
{
    if (geteuid() != 0 || access("/dev/loop-control", R_OK | W_OK) != 0 ||
        (access("/usr/sbin/mkfs.ext4", X_OK) != 0 && access("/sbin/mkfs.ext4", X_OK) != 0)) {
        printf("SKIP: workspace volumes need root, the loop driver and mkfs.ext4\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_workspace_over_free_space_is_refused),
        cmocka_unit_test(test_space_taken_after_the_check_is_refused),
        cmocka_unit_test(test_full_workspace_takes_and_gives_back_nothing),
        cmocka_unit_test(test_filesystem_without_fallocate_is_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
