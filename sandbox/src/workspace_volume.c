/* workspace_volume.c - a workspace's byte and inode limit, enforced by the
 * kernel: each workspace is its own small ext4 filesystem.
 *
 * Why an image and not project quotas: quotas need the host filesystem to
 * be XFS or ext4 mounted with prjquota, which the service cannot assume or
 * change; a loop-mounted image needs only the loop driver and e2fsprogs,
 * holds both limits (size of the image, inode count of mkfs -N), and the
 * host loses at most the image's size however the sandbox writes.
 *
 * Why the image is allocated in full (fallocate), not sparse: a sparse image
 * takes host blocks only as the sandbox writes, so N workspaces of limit L
 * each passed a free-space check that N*L did not, and together they filled
 * the host filesystem. fallocate makes the kernel hold every block of the
 * limit at create, atomically and across processes: the create that does
 * not fit gets ENOSPC. The cost is disk: an empty workspace uses its whole
 * limit on the host. Nothing may hand the blocks back behind our back: a
 * discard on the loop device punches holes in its backing file (the
 * host's fstrim.timer trims every mounted filesystem), so discard is
 * switched off on the device before mkfs, and mkfs and the mount say
 * nodiscard too.
 *
 * Steps (creation costs about 10-40 ms, see docs/sandbox.md):
 *   1. env/.workspace.img: O_CREAT|O_EXCL|O_NOFOLLOW from the verified
 *      environment descriptor, fallocate to the limit;
 *   2. a free loop device (LOOP_CTL_GET_FREE) configured on that descriptor
 *      (LOOP_CONFIGURE, autoclear), then the image is unlinked: the loop
 *      device holds the only reference, so nothing is left by name; the
 *      device's discard_max_bytes is set to 0;
 *   3. mkfs.ext4 on /dev/loopN (no journal: the workspace is a cache; no
 *      reserved blocks; -N inodes; the root owned by the sandbox user);
 *   4. fsopen/fsmount (nosuid, nodev, nodiscard) and move_mount onto the
 *      workspace directory's descriptor, never onto a path string;
 *   5. lost+found is removed so the workspace starts empty.
 * Removal unmounts (the loop device then detaches by itself: autoclear);
 * umount2 is the one call given a path (see ph_ws_volume_unmount).
 */
#include "sandbox-int.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runsc_cli-int.h"

#define IMAGE_NAME ".workspace.img"
#define MKFS_TIMEOUT_MS 60000
#define LOOP_ATTEMPTS 16

static const char *mkfs_path(void)
{
    static const char *const candidates[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return NULL;
}

/* Attaches image_fd to a free loop device; *loop_fd and name on success. */
static ph_status attach_loop(int image_fd, int *loop_fd, char name[static 32], ph_diag *diag)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "workspace_volume_no_loop: /dev/loop-control: %s (workspace limits "
                           "need the loop driver and root)",
                           strerror(errno));
    ph_status st = PH_E_IO;
    int err = 0;
    for (int attempt = 0; attempt < LOOP_ATTEMPTS; attempt++) {
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) {
            err = errno;
            break;
        }
        snprintf(name, 32, "/dev/loop%d", n);
        int fd = open(name, O_RDWR | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISBLK(sb.st_mode) || major(sb.st_rdev) != 7) {
            err = fd < 0 ? errno : ENODEV;
            if (fd >= 0)
                close(fd);
            continue;
        }
        struct loop_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.fd = (unsigned)image_fd;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
            *loop_fd = fd;
            st = PH_OK;
            break;
        }
        err = errno;
        close(fd);
        if (err != EBUSY) /* EBUSY: another process took it first */
            break;
    }
    close(ctl);
    if (st != PH_OK)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_loop_failed: %s", strerror(err));
    return PH_OK;
}

/* Switches discard off on the loop device: a discard (FITRIM from the host's
 * fstrim, a discard mount) would punch holes in the backing file and give
 * the reserved blocks back to the host. The setting stays with the device
 * after it is freed. */
static ph_status no_discard(int loop_fd, ph_diag *diag)
{
    struct stat sb;
    char path[96];
    int fd = -1;
    bool ok = fstat(loop_fd, &sb) == 0;
    if (ok) {
        snprintf(path, sizeof path, "/sys/dev/block/%u:%u/queue/discard_max_bytes",
                 major(sb.st_rdev), minor(sb.st_rdev));
        fd = open(path, O_RDWR | O_CLOEXEC);
    }
    char back[32] = "";
    ok = fd >= 0 && write(fd, "0", 1) == 1 && pread(fd, back, sizeof back - 1, 0) > 0 &&
         strtoull(back, NULL, 10) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "workspace_volume_discard: cannot switch discard off on the loop "
                           "device (%s): a trim would give the workspace's reserved blocks back",
                           back[0] != '\0' ? "still on" : strerror(e));
    return PH_OK;
}

static ph_status run_mkfs(const char *dev, uint64_t inodes, uid_t uid, gid_t gid, ph_diag *diag)
{
    const char *mkfs = mkfs_path();
    if (mkfs == NULL)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "workspace_volume_no_mkfs: mkfs.ext4 is not installed (e2fsprogs)");
    char n[32], ext[96];
    snprintf(n, sizeof n, "%llu", (unsigned long long)inodes);
    snprintf(ext, sizeof ext, "lazy_itable_init=1,nodiscard,root_owner=%u:%u", (unsigned)uid,
             (unsigned)gid);
    const char *argv[] = {mkfs, "-q", "-F", "-b", "4096", "-N", n, "-m", "0", "-O",
                          "^has_journal,^resize_inode", "-E", ext, dev, NULL};
    static char *const env[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    char err[256] = "";
    ph_status st = ph_cli_run(argv, env, MKFS_TIMEOUT_MS, NULL, 0, err, sizeof err, diag);
    if (st != PH_OK)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_mkfs_failed: %s", err);
    return PH_OK;
}

static ph_status mount_on(const char *dev, int target_fd, ph_diag *diag)
{
    int fs = fsopen("ext4", FSOPEN_CLOEXEC);
    if (fs < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_mount_failed: fsopen: %s",
                           strerror(errno));
    int mnt = -1;
    ph_status st = PH_OK;
    if (fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) != 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) != 0 ||
        fsconfig(fs, FSCONFIG_SET_FLAG, "nodiscard", NULL, 0) != 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0 ||
        (mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)) < 0 ||
        move_mount(mnt, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
        st = ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_mount_failed: %s", strerror(errno));
    if (mnt >= 0)
        close(mnt);
    close(fs);
    return st;
}

/* What unprivileged users can still allocate on the host filesystem after a
 * reservation: root's fallocate may take ext4's reserved blocks, so
 * ENOSPC alone would let workspaces fill the disk for everyone else. */
static uint64_t host_floor(const struct statvfs *v)
{
    uint64_t one_percent = (uint64_t)v->f_blocks * v->f_frsize / 100;
    return one_percent < (1ull << 30) ? one_percent : (1ull << 30);
}

/* Allocates every block of the image now (fallocate, not posix_fallocate:
 * glibc's fallback writes zeros, slowly and without the atomic answer).
 * The free-space check first is only a fast refusal (a fallocate that
 * cannot succeed takes every free block before it fails); the kernel's
 * answer and the check after it are what hold across processes. */
static ph_status reserve(int image, uint64_t bytes, ph_diag *diag)
{
    struct statvfs v;
    if (fstatvfs(image, &v) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_image_failed: statvfs: %s",
                           strerror(errno));
    uint64_t floor = host_floor(&v), before = (uint64_t)v.f_bavail * v.f_frsize;
    int err = ENOSPC;
    ph_status st = ph_fault_point("volume_reserve", diag);
    if (st != PH_OK)
        return st;
    if (before >= bytes + floor)
        err = fallocate(image, 0, 0, (off_t)bytes) == 0 ? 0 : errno;
    if (err == 0 && (fstatvfs(image, &v) != 0 || (uint64_t)v.f_bavail * v.f_frsize < floor))
        err = ENOSPC;
    if (err == ENOSPC || err == EFBIG)
        return ph_diag_set(diag, PH_E_LIMIT, 0,
                           "workspace_host_space: the host filesystem (%llu MiB free) cannot "
                           "hold the workspace limit of %llu MiB and keep %llu MiB for itself",
                           (unsigned long long)(before >> 20), (unsigned long long)(bytes >> 20),
                           (unsigned long long)(floor >> 20));
    if (err == EOPNOTSUPP)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "workspace_volume_no_reservation: the state directory's filesystem "
                           "cannot reserve a workspace's blocks (fallocate: %s); workspace "
                           "limits need ext4, xfs or tmpfs there",
                           strerror(err));
    if (err != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_image_failed: fallocate: %s",
                           strerror(err));
    return PH_OK;
}

uint64_t ph_ws_limit_bytes(const ph_sandbox_limits *l)
{
    return (uint64_t)(l->workspace_bytes > 0 ? l->workspace_bytes : PH_WORKSPACE_DEFAULT_BYTES);
}

uint64_t ph_ws_limit_inodes(const ph_sandbox_limits *l)
{
    if (l->workspace_inodes > 0)
        return (uint64_t)l->workspace_inodes;
    uint64_t by_size = ph_ws_limit_bytes(l) / PH_WORKSPACE_DEFAULT_BYTES_PER_INODE;
    return by_size < PH_WORKSPACE_DEFAULT_INODES ? by_size : PH_WORKSPACE_DEFAULT_INODES;
}

ph_status ph_ws_volume_create(int env_fd, const char *env_path, uint64_t bytes, uint64_t inodes,
                              uid_t uid, gid_t gid, ph_diag *diag)
{
    ph_status st;
    if ((st = ph_fault_point("volume_image", diag)) != PH_OK)
        return st;
    int image = openat(env_fd, IMAGE_NAME, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0600);
    if (image < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_image_failed: %s",
                           strerror(errno));
    int loop = -1;
    char dev[32];
    st = reserve(image, bytes, diag);
    if (st == PH_OK && (st = ph_fault_point("volume_loop", diag)) == PH_OK)
        st = attach_loop(image, &loop, dev, diag);
    /* From here the loop device holds the image: no name is left to clean
     * (and a refused reservation's blocks go with the last descriptor). */
    (void)unlinkat(env_fd, IMAGE_NAME, 0);
    close(image);
    if (st == PH_OK && (st = ph_fault_point("volume_discard", diag)) == PH_OK)
        st = no_discard(loop, diag);
    if (st == PH_OK && (st = ph_fault_point("volume_mkfs", diag)) == PH_OK)
        st = run_mkfs(dev, inodes, uid, gid, diag);
    int target = -1;
    if (st == PH_OK && (st = ph_fault_point("volume_mount", diag)) == PH_OK) {
        target = openat(env_fd, "workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (target < 0)
            st = ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_mount_failed: %s",
                             strerror(errno));
        else
            st = mount_on(dev, target, diag);
    }
    if (target >= 0)
        close(target);
    /* The mount (if made) now holds the device; closing ours lets autoclear
     * detach it when the mount goes. */
    if (loop >= 0)
        close(loop);
    if (st == PH_OK) {
        int root = openat(env_fd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0 || unlinkat(root, "lost+found", AT_REMOVEDIR) != 0)
            st = ph_diag_set(diag, PH_E_IO, 0, "workspace_volume_prepare_failed: %s",
                             strerror(errno));
        if (root >= 0)
            close(root);
        if (st == PH_OK)
            st = ph_fault_point("volume_ready", diag);
        if (st != PH_OK)
            (void)ph_ws_volume_unmount(env_fd, env_path, true);
    }
    return st;
}

int ph_ws_volume_unmount(int env_fd, const char *env_path, bool lazy)
{
    struct stat env_sb, ws_sb;
    int ws = openat(env_fd, "workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ws < 0)
        return 1;
    bool mounted =
        fstat(env_fd, &env_sb) == 0 && fstat(ws, &ws_sb) == 0 && ws_sb.st_dev != env_sb.st_dev;
    if (mounted && lazy) {
        /* Whoever still holds it must not write into it any more. */
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
        (void)mount_setattr(ws, "", AT_EMPTY_PATH, &ro, sizeof ro);
    }
    /* A descriptor on the mount keeps it busy, so umount2 needs the path:
     * env_path is the verified state directory chain (only root can change
     * a component of it) and UMOUNT_NOFOLLOW refuses a symlink at the end. */
    close(ws);
    if (!mounted)
        return 1;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/workspace", env_path) >= (int)sizeof path)
        return -1;
    return umount2(path, UMOUNT_NOFOLLOW | (lazy ? MNT_DETACH : 0)) == 0 ? 0 : -1;
}

bool ph_ws_volume_full(int ws_fd)
{
    struct statvfs v;
    if (fstatvfs(ws_fd, &v) != 0)
        return false;
    uint64_t left = (uint64_t)v.f_bavail * v.f_frsize;
    uint64_t total = (uint64_t)v.f_blocks * v.f_frsize;
    uint64_t floor = total / 128;
    floor = floor < (2u << 20) ? (2u << 20) : floor > (16u << 20) ? (16u << 20) : floor;
    return left < floor || v.f_favail == 0;
}
