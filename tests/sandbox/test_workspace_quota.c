/* test_workspace_quota.c - a workspace's byte and inode limits hold in the
 * kernel (gvisor, or docker with argv[1] = "docker"): a command writing past
 * either gets ENOSPC inside, the result says the workspace is full, and the
 * host's filesystem loses no more than the limit. Also: every environment
 * runs as its own host uid from the service's range, and the figure of what
 * a workspace volume costs to create (printed, documented in
 * docs/sandbox.md). And the host disk workspaces take is bounded: the
 * smallest workspace (16 MiB, inode count unset) is made and used end to end;
 * a sparse file larger than its workspace is never read or exported; a
 * create over the service's cap or the tenant's is refused with its code
 * and makes nothing (no directory, image, loop device, mount); the default
 * caps come from the state directory's filesystem. Exits 77 when the
 * mechanism is not available. */
#include "escape_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "sandbox-int.h"

#define MIB (1024ll * 1024)
#define LIMIT_BYTES (64 * MIB)
#define LIMIT_INODES 2000

static ph_sandbox_mechanism g_mechanism;
static sbx_fixture g_fx;
/* The environments of the running test: its teardown destroys what a
 * failed assertion left (a sandbox, its volume and cgroups otherwise stay). */
static ph_environment *g_env[3];

static ph_execution_service *g_capped;

static int destroy_left(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++)
        ph_environment_destroy(&g_env[i]);
    ph_execution_service_close(&g_capped);
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    esc_use_build_tmpdir();
    return sbx_open(&g_fx, g_mechanism, 120000) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    sbx_close(&g_fx);
    return 0;
}

static ph_environment *limited_env(void)
{
    ph_environment_spec s = sbx_spec(&g_fx);
    s.limits.workspace_bytes = LIMIT_BYTES;
    s.limits.workspace_inodes = LIMIT_INODES;
    return g_env[0] = sbx_create(&g_fx, &s);
}

static uint64_t host_free_bytes(void)
{
    struct statvfs v;
    assert_int_equal(statvfs(g_fx.state_dir, &v), 0);
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* The size of the block device under an environment's workspace mount
 * (/sys/dev/block/MAJ:MIN/size, in 512-byte sectors): the loop device over
 * the image reserved at create, all the host space the workspace can hold. */
static uint64_t workspace_device_bytes(const char *env_id)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/workspace", g_fx.state_dir, env_id);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    snprintf(path, sizeof path, "/sys/dev/block/%u:%u/size", major(st.st_dev), minor(st.st_dev));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    unsigned long long sectors = 0;
    assert_int_equal(fscanf(f, "%llu", &sectors), 1);
    fclose(f);
    return (uint64_t)sectors * 512;
}

static void test_bytes_limit(void **state)
{
    (void)state;
    ph_environment *env = limited_env();
    /* Sixteen times the limit: the write must stop at the limit. */
    ph_execution_result *r = esc_sh(env, "dd if=/dev/zero of=/workspace/fill bs=1M count=1024 "
                                         "2>&1; echo rc=$?; ls -l /workspace/fill");
    printf("# dd: %.*s\n", (int)r->out.len, (const char *)r->out.data);
    assert_true(sbx_contains(r->out.data, r->out.len, "No space left on device"));
    assert_false(sbx_contains(r->out.data, r->out.len, "rc=0"));
    assert_true(r->workspace_full);
    const ph_file_change *c = sbx_change(r, "fill");
    assert_non_null(c);
    assert_true(c->size <= (uint64_t)LIMIT_BYTES);
    assert_true(c->size >= (uint64_t)LIMIT_BYTES / 2);
    /* The host lost about the limit (reserved at create), never the 1 GiB
     * the command asked for: the workspace is a filesystem on a loop device
     * over an image of the limit's size, so that device's size is all it
     * can take from the host (measured on the device, not as the host's
     * free space, which other tests writing at the same time change). */
    uint64_t held = workspace_device_bytes(ph_environment_id(env));
    printf("# host space the workspace can hold after the fill: %llu KiB (limit %lld KiB)\n",
           (unsigned long long)held / 1024, LIMIT_BYTES / 1024);
    assert_true(held <= (uint64_t)LIMIT_BYTES);
    ph_execution_result_free(&r);
    /* Space comes back when the file goes; the flag follows. */
    r = esc_sh(env, "rm /workspace/fill && echo ok > /workspace/small && cat /workspace/small");
    assert_true(sbx_contains(r->out.data, r->out.len, "ok"));
    assert_false(r->workspace_full);
    ph_execution_result_free(&r);
    ph_environment_destroy(&g_env[0]);
}

/* A limit the host filesystem cannot hold now is refused at create, with
 * nothing made (the image would be sparse: the host would find out only as
 * the sandbox filled it). */
/* A second service on the fixture's state directory, with these caps. */
static ph_execution_service *capped_service(uint64_t total_max, uint64_t tenant_max)
{
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = g_mechanism,
                             .hard_cap_ms = 120000,
                             .state_dir = g_fx.state_dir,
                             .workspace_total_max_bytes = total_max,
                             .workspace_tenant_max_bytes = tenant_max};
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    if (ph_execution_service_open(&cfg, &svc, &diag) != PH_OK)
        fail_msg("service open: %s", diag.message);
    return svc;
}

static void test_limit_over_host_free_space(void **state)
{
    (void)state;
    uint64_t free_bytes = host_free_bytes();
    if (free_bytes >= (uint64_t)PH_WORKSPACE_MAX_BYTES) {
        printf("# host has %llu GiB free, more than the largest limit: not checkable here\n",
               (unsigned long long)(free_bytes >> 30));
        return;
    }
    ph_environment_spec s = sbx_spec(&g_fx);
    s.limits.workspace_bytes = PH_WORKSPACE_MAX_BYTES;
    ph_environment *env = NULL;
    ph_diag diag = {0};
    /* The default service cap (half the filesystem) refuses it first. */
    assert_int_equal(ph_environment_create(g_fx.svc, &s, &env, &diag), PH_E_LIMIT);
    assert_null(env);
    printf("# %s\n", diag.message);
    assert_non_null(strstr(diag.message, "workspace_service_cap"));
    /* Caps above the disk: the host's own free space still refuses it. */
    ph_execution_service *svc = capped_service(UINT64_MAX, UINT64_MAX);
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_E_LIMIT);
    ph_execution_service_close(&svc);
    assert_null(env);
    printf("# %s\n", diag.message);
    assert_non_null(strstr(diag.message, "workspace_host_space"));
}

static void test_inode_limit(void **state)
{
    (void)state;
    ph_environment *env = limited_env();
    ph_execution_result *r =
        esc_sh(env, "mkdir /workspace/many && cd /workspace/many && i=0; "
                    "while [ $i -lt 5000 ]; do true > f$i || { echo stopped=$i; exit 3; }; "
                    "i=$((i+1)); done; echo all-created");
    printf("# inodes: %.*s %.*s\n", (int)r->out.len, (const char *)r->out.data, (int)r->err.len,
           (const char *)r->err.data);
    assert_true(r->exited);
    assert_int_equal(r->exit_code, 3);
    assert_true(sbx_contains(r->err.data, r->err.len, "No space left on device"));
    assert_true(r->workspace_full);
    /* mkfs rounds the inode count up to whole block groups, never by more
     * than a group's worth (8192 per 32 MiB group at most here). */
    assert_true(r->files_changed_count < 5000);
    ph_execution_result_free(&r);
    ph_environment_destroy(&g_env[0]);
}

static void test_defaults_and_sparse_files(void **state)
{
    (void)state;
    ph_environment_spec s = sbx_spec(&g_fx);
    ph_environment *env = g_env[0] = sbx_create(&g_fx, &s);
    /* The default limits: 1 GiB and 100000 inodes (df inside). */
    ph_execution_result *r = esc_sh(env, "df -k /workspace | tail -1; df -i /workspace | tail -1");
    printf("# default workspace: %.*s", (int)r->out.len, (const char *)r->out.data);
    long long kib = 0, used = 0, avail = 0, inodes = 0;
    char fs[64];
    const char *text = (const char *)r->out.data;
    assert_int_equal(sscanf(text, "%63s %lld %lld %lld", fs, &kib, &used, &avail), 4);
    const char *second = strchr(text, '\n');
    assert_non_null(second);
    assert_int_equal(sscanf(second + 1, "%63s %lld", fs, &inodes), 2);
    assert_true(kib > 900 * 1024 && kib <= 1024 * 1024);
    assert_true(inodes >= PH_WORKSPACE_DEFAULT_INODES && inodes < 2 * PH_WORKSPACE_DEFAULT_INODES);
    ph_execution_result_free(&r);
    /* A sparse file may claim more than the limit in size, but not in
     * blocks; export refuses it by size (its default limit is the
     * workspace's). */
    r = esc_sh(env, "dd if=/dev/zero of=/workspace/sparse bs=1 count=1 seek=3221225471 2>&1; "
                    "ls -l /workspace/sparse");
    assert_true(sbx_contains(r->out.data, r->out.len, "3221225472"));
    ph_execution_result_free(&r);
    /* What export does with it (the same limit, the artifact store's
     * default): refused by size before a byte is read. */
    ph_workspace *ws = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_workspace(env, &ws, &diag), PH_OK);
    int fd = -1;
    ph_ws_stat st;
    assert_int_equal(ph_workspace_open_read(ws, "sparse", PH_WORKSPACE_DEFAULT_BYTES, &fd, &st,
                                            &diag),
                     PH_E_LIMIT);
    assert_int_equal(fd, -1);
    ph_workspace_close(&ws);
    ph_environment_destroy(&g_env[0]);
}

static void test_each_environment_has_its_own_host_id(void **state)
{
    (void)state;
    ph_environment_spec s = sbx_spec(&g_fx);
    ph_environment *a = g_env[0] = sbx_create(&g_fx, &s);
    ph_environment *b = g_env[1] = sbx_create(&g_fx, &s);
    long ids[2];
    ph_environment *envs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        ph_execution_result *r = esc_sh(envs[i], "id -u; id -g; : > /workspace/mine");
        assert_int_equal(r->exit_code, 0);
        long uid = -1, gid = -1;
        assert_int_equal(sscanf((const char *)r->out.data, "%ld %ld", &uid, &gid), 2);
        assert_int_equal(uid, gid);
        assert_true(uid >= (long)PH_SANDBOX_ID_DEFAULT_FIRST &&
                    uid < (long)PH_SANDBOX_ID_DEFAULT_FIRST + (long)PH_SANDBOX_ID_DEFAULT_COUNT);
        ids[i] = uid;
        /* On the host, the workspace's files belong to that uid. */
        char ws[1024], file[1100];
        esc_host_workspace(&g_fx, envs[i], ws, sizeof ws);
        snprintf(file, sizeof file, "%s/mine", ws);
        struct stat sb;
        assert_int_equal(stat(file, &sb), 0);
        assert_int_equal((long)sb.st_uid, uid);
        ph_execution_result_free(&r);
    }
    assert_true(ids[0] != ids[1]);
    /* The state directory is not traversable by others. */
    struct stat sb;
    assert_int_equal(stat(g_fx.state_dir, &sb), 0);
    assert_int_equal(sb.st_mode & 0077, 0);
    (void)a;
    (void)b;
    destroy_left(NULL);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_volume_creation_cost(void **state)
{
    (void)state;
    /* The volume alone (image, loop device, mkfs, mount), 1 GiB and 100000
     * inodes, as create makes it; median of 9. */
    enum { RUNS = 9 };
    int64_t ms[RUNS];
    char *dir = ph_test_mkdtemp();
    assert_non_null(dir);
    for (int i = 0; i < RUNS; i++) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY);
        assert_true(fd >= 0);
        assert_int_equal(mkdirat(fd, "workspace", 0755), 0);
        ph_diag diag = {0};
        int64_t t0 = ph_monotonic_ms();
        ph_status st = ph_ws_volume_create(fd, dir, PH_WORKSPACE_DEFAULT_BYTES,
                                           PH_WORKSPACE_DEFAULT_INODES, 4242, 4242, &diag);
        ms[i] = ph_monotonic_ms() - t0;
        if (st != PH_OK)
            fail_msg("volume: %s", diag.message);
        assert_int_equal(ph_ws_volume_unmount(fd, dir, false), 0);
        assert_int_equal(unlinkat(fd, "workspace", AT_REMOVEDIR), 0);
        close(fd);
    }
    qsort(ms, RUNS, sizeof ms[0], cmp_i64);
    printf("# workspace volume creation (1 GiB, 100000 inodes): median %lld ms, max %lld ms\n",
           (long long)ms[RUNS / 2], (long long)ms[RUNS - 1]);
    ph_test_rmtree(dir);
    free(dir);
}

/* The smallest workspace, export capped by a workspace's size, caps on
 * the disk workspaces reserve. */
#define SMALL (16 * MIB)
#define TOTAL_CAP (48 * MIB)
#define TENANT_CAP (32 * MIB)

static ph_environment_spec small_spec(const char *tenant, int64_t inodes)
{
    ph_environment_spec s = sbx_spec(&g_fx);
    s.tenant = tenant;
    s.limits.workspace_bytes = SMALL;
    s.limits.workspace_inodes = inodes;
    return s;
}

/* The documented minimum, inode count unset: made, written, read back; a
 * sparse file over its size is not read. */
static void test_minimum_workspace_works(void **state)
{
    (void)state;
    ph_environment_spec s = small_spec("t-min", PH_SANDBOX_UNSET);
    ph_environment *env = NULL;
    ph_diag diag = {0};
    ph_status st = ph_environment_create(g_fx.svc, &s, &env, &diag);
    if (st != PH_OK)
        fail_msg("a 16 MiB workspace with the default inode count: %s (%s)", ph_strerror(st),
                 diag.message);
    g_env[0] = env;
    ph_execution_result *r =
        esc_sh(env, "mkdir d && i=0; while [ $i -lt 200 ]; do echo $i > d/f$i; i=$((i+1)); done;"
                    "dd if=/dev/zero of=/workspace/real bs=1M count=4 2>/dev/null; echo rc=$?;"
                    "truncate -s 1G /workspace/sparse; df -i /workspace | tail -1");
    printf("# 16 MiB workspace: %.*s", (int)r->out.len, (const char *)r->out.data);
    assert_true(sbx_contains(r->out.data, r->out.len, "rc=0"));
    assert_non_null(sbx_change(r, "real"));
    assert_non_null(sbx_change(r, "d/f199"));
    ph_execution_result_free(&r);
    ph_workspace *ws = NULL;
    assert_int_equal(ph_environment_workspace(env, &ws, &diag), PH_OK);
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(ph_workspace_read(ws, "d/f199", 64, &data, &len, &diag), PH_OK);
    assert_string_equal((const char *)data, "199\n");
    free(data);
    /* A 1 GiB sparse file in it is refused by the read an export makes,
     * whatever the export's own limit: no artifact is larger than the
     * space that held it. */
    int fd = -1;
    ph_ws_stat ws_st;
    ph_status rc = ph_workspace_open_read(ws, "sparse", UINT64_MAX, &fd, &ws_st, &diag);
    printf("# export of a 1 GiB sparse file from a 16 MiB workspace: %s (%s)\n",
           ph_strerror(rc), diag.message);
    if (fd >= 0)
        close(fd);
    assert_int_equal(rc, PH_E_LIMIT);
    assert_non_null(strstr(diag.message, "file_over_workspace_size"));
    ph_workspace_close(&ws);
    ph_environment_destroy(&g_env[0]);
}

/* What a create leaves on the host, by this test's state directory. */
typedef struct traces {
    int entries, mounts, loops;
} traces;

static traces host_traces(void)
{
    traces t = {0};
    DIR *d = opendir(g_fx.state_dir);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        t.entries += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    if (d)
        closedir(d);
    char *mi = ph_test_read_file("/proc/self/mountinfo", NULL);
    for (const char *p = mi; p && (p = strstr(p, g_fx.state_dir)) != NULL; p++)
        t.mounts++;
    free(mi);
    t.loops = sbx_loop_devices_of(g_fx.state_dir);
    return t;
}

static ph_environment *capped_create(ph_execution_service *svc, const char *tenant)
{
    ph_environment_spec s = small_spec(tenant, 1000);
    ph_environment *env = NULL;
    ph_diag diag = {0};
    if (ph_environment_create(svc, &s, &env, &diag) != PH_OK)
        fail_msg("create for %s: %s", tenant, diag.message);
    return env;
}

static void refused_over(ph_execution_service *svc, const char *tenant, const char *code)
{
    traces before = host_traces();
    ph_environment_spec s = small_spec(tenant, 1000);
    ph_environment *env = NULL;
    ph_diag diag = {0};
    ph_status st = ph_environment_create(svc, &s, &env, &diag);
    traces after = host_traces();
    printf("# create for %s: %s (%s); state entries %d -> %d, mounts %d -> %d, loop devices "
           "%d -> %d\n",
           tenant, ph_strerror(st), diag.message, before.entries, after.entries, before.mounts,
           after.mounts, before.loops, after.loops);
    if (env != NULL)
        ph_environment_destroy(&env);
    assert_int_equal(st, PH_E_LIMIT);
    assert_non_null(strstr(diag.message, code));
    assert_int_equal(after.entries, before.entries);
    assert_int_equal(after.mounts, before.mounts);
    assert_int_equal(after.loops, before.loops);
}

/* Caps of 48 MiB for the service and 32 MiB per tenant (a second service on
 * the fixture's state directory: the fixture's has the defaults), 16 MiB
 * workspaces:
 * a third for tenant a passes the tenant's cap, a fourth in all the
 * service's; destroying one gives its bytes back. */
static void test_caps_refuse_and_make_nothing(void **state)
{
    (void)state;
    int start = host_traces().entries;
    ph_execution_service *svc = g_capped = capped_service(TOTAL_CAP, TENANT_CAP);
    g_env[0] = capped_create(svc, "tenant-a");
    g_env[1] = capped_create(svc, "tenant-a");
    refused_over(svc, "tenant-a", "workspace_tenant_cap");
    g_env[2] = capped_create(svc, "tenant-b");
    refused_over(svc, "tenant-c", "workspace_service_cap");
    ph_environment_destroy(&g_env[1]);
    g_env[1] = capped_create(svc, "tenant-a");
    for (int i = 0; i < 3; i++)
        ph_environment_destroy(&g_env[i]);
    ph_execution_service_close(&g_capped);
    /* Nothing reserved is left: the directory is as the test found it. */
    assert_int_equal(host_traces().entries, start);
}

/* 0 in the configuration: half the filesystem for the service, a quarter
 * of that per tenant. */
static void test_default_caps_from_the_filesystem(void **state)
{
    (void)state;
    int fd = open(g_fx.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct statvfs v;
    assert_int_equal(fstatvfs(fd, &v), 0);
    ph_ws_caps caps;
    assert_int_equal(ph_ws_caps_init(fd, 0, 0, &caps, NULL), PH_OK);
    close(fd);
    uint64_t size = (uint64_t)v.f_blocks * v.f_frsize;
    printf("# default caps on a %llu MiB filesystem: service %llu MiB, tenant %llu MiB\n",
           (unsigned long long)(size >> 20), (unsigned long long)(caps.total_max >> 20),
           (unsigned long long)(caps.tenant_max >> 20));
    assert_int_equal(caps.total_max, size / 2);
    assert_int_equal(caps.tenant_max, size / 8);
}

int main(int argc, char **argv)
{
    int rc = esc_pick_mechanism(argc, argv, false, &g_mechanism);
    if (rc != 0)
        return rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_bytes_limit, destroy_left),
        cmocka_unit_test_teardown(test_inode_limit, destroy_left),
        cmocka_unit_test(test_limit_over_host_free_space),
        cmocka_unit_test_teardown(test_defaults_and_sparse_files, destroy_left),
        cmocka_unit_test_teardown(test_each_environment_has_its_own_host_id, destroy_left),
        cmocka_unit_test(test_volume_creation_cost),
        cmocka_unit_test_teardown(test_minimum_workspace_works, destroy_left),
        cmocka_unit_test_teardown(test_caps_refuse_and_make_nothing, destroy_left),
        cmocka_unit_test(test_default_caps_from_the_filesystem),
    };
    char name[64];
    snprintf(name, sizeof name, "workspace quota (%s)", ph_sandbox_mechanism_name(g_mechanism));
    return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], group_setup,
                                   group_teardown);
}
