/* test_host_identity.c - each environment's host processes run as a host
 * uid of their own (docs/sandbox.md, "Workspace limits and host
 * identities"; docs/sandbox-gvisor.md, "Host identities").
 *
 * Usage: sandbox.test_host_identity [gvisor|docker]   (default gvisor)
 * Exit 77 with "SKIP: ..." when the mechanism is not available here.
 *
 * Two environments A and B, and G with a network grant whose proxy socket
 * belongs to another user (65534:65534, mode 0666: a proxy running as its
 * own user, reachable by sandboxes). From the host's /proc:
 *  - every process naming A (B) in its command line runs as A's (B's) uid
 *    (real, effective, saved and filesystem), which is not B's, not 65534
 *    and no account's, except gVisor's gofer, which runs as root (runsc
 *    20221219 does not drop its uid; in its own user namespace);
 *  - the same processes run as A's (B's) gid (real, effective, saved and
 *    filesystem: never 0, root's group, nor 65534) with no supplementary
 *    group but that one, the gofer again excepted;
 *  - a process of a third uid (65534, another unused uid, and B's) gets
 *    EPERM for kill(0) and kill(SIGSTOP) on each of A's processes;
 *  - G still reaches its proxy socket (which the gofer, in a user namespace
 *    that does not map the socket's owner, opens as any other user).
 */
#include "test_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "escape_support.h"
#include "sandbox-int.h"

#define MAX_PROCS 64

static ph_sandbox_mechanism g_mechanism;
static sbx_fixture g_fx;
static ph_environment *g_a, *g_b, *g_granted;
static char g_dir[512], g_sock_path[600];
static int g_sock = -1;

static int group_setup(void **state)
{
    (void)state;
    if (!sbx_open(&g_fx, g_mechanism, 30000))
        return -1;
    ph_environment_spec spec = sbx_spec(&g_fx);
    spec.tenant = "tenant-a";
    g_a = sbx_create(&g_fx, &spec);
    spec.tenant = "tenant-b";
    g_b = sbx_create(&g_fx, &spec);
    char *dir = ph_test_mkdtemp();
    assert_non_null(dir);
    snprintf(g_dir, sizeof g_dir, "%s", dir);
    free(dir);
    snprintf(g_sock_path, sizeof g_sock_path, "%s/proxy.sock", g_dir);
    g_sock = esc_unix_listener(g_sock_path);
    assert_int_equal(chown(g_sock_path, 65534, 65534), 0);
    assert_int_equal(chmod(g_sock_path, 0666), 0);
    spec.tenant = "tenant-g";
    spec.network.grant_token = "grant.identity-test";
    spec.network.proxy_socket_path = g_sock_path;
    spec.network.proxy_port = 3128;
    g_granted = sbx_create(&g_fx, &spec);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ph_environment_destroy(&g_a);
    ph_environment_destroy(&g_b);
    ph_environment_destroy(&g_granted);
    if (g_sock >= 0)
        close(g_sock);
    unlink(g_sock_path);
    rmdir(g_dir);
    sbx_close(&g_fx);
    return 0;
}

/* The environment's uid and gid: its workspace root's owner on the host. */
static uid_t env_uid_gid(ph_environment *env, gid_t *gid)
{
    char ws[1024];
    esc_host_workspace(&g_fx, env, ws, sizeof ws);
    struct stat sb;
    assert_int_equal(stat(ws, &sb), 0);
    if (gid != NULL)
        *gid = sb.st_gid;
    return sb.st_uid;
}

static uid_t env_uid(ph_environment *env)
{
    return env_uid_gid(env, NULL);
}

typedef struct host_proc {
    pid_t pid;
    char name[64];  /* argv[0] */
    uid_t uids[4];  /* real, effective, saved, filesystem */
    gid_t gids[4];  /* the same for the group */
    int groups;     /* supplementary groups other than the process's own gid */
} host_proc;

/* Every host process whose command line holds env_id (runsc names the
 * environment in --root; docker's init path names it). */
static size_t procs_of(const char *env_id, host_proc out[static MAX_PROCS])
{
    size_t n = 0;
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < MAX_PROCS) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == (long)getpid())
            continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        size_t len = 0;
        char *cmd = ph_test_read_file(path, &len);
        if (cmd == NULL)
            continue;
        bool ours = sbx_contains(cmd, len, env_id);
        if (ours) {
            out[n].pid = (pid_t)pid;
            snprintf(out[n].name, sizeof out[n].name, "%s", cmd);
        }
        free(cmd);
        if (!ours)
            continue;
        snprintf(path, sizeof path, "/proc/%ld/status", pid);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        int got = 0;
        out[n].groups = 0;
        while (fgets(buf, sizeof buf, f) != NULL) {
            unsigned r, e, s, fs;
            if (sscanf(buf, "Uid: %u %u %u %u", &r, &e, &s, &fs) == 4) {
                out[n].uids[0] = r, out[n].uids[1] = e, out[n].uids[2] = s, out[n].uids[3] = fs;
                got++;
            } else if (sscanf(buf, "Gid: %u %u %u %u", &r, &e, &s, &fs) == 4) {
                out[n].gids[0] = r, out[n].gids[1] = e, out[n].gids[2] = s, out[n].gids[3] = fs;
                got++;
            } else if (strncmp(buf, "Groups:", 7) == 0) {
                /* Docker lists the primary gid here too: only another
                 * group counts. Gid: comes before Groups: in the file. */
                for (char *t = strtok(buf + 7, " \t\n"); t != NULL; t = strtok(NULL, " \t\n"))
                    out[n].groups += strtoul(t, NULL, 10) != out[n].gids[0];
            }
        }
        fclose(f);
        if (got == 2)
            n++;
    }
    closedir(d);
    return n;
}

static bool is_gofer(const host_proc *p)
{
    return strcmp(p->name, "runsc-gofer") == 0;
}

/* Checks env's processes; returns how many run as its own uid. */
static size_t check_env(const char *label, ph_environment *env, uid_t uid, gid_t gid,
                        host_proc procs[static MAX_PROCS], size_t *count)
{
    *count = procs_of(ph_environment_id(env), procs);
    size_t own = 0;
    for (size_t i = 0; i < *count; i++) {
        const host_proc *p = &procs[i];
        printf("  %s: pid %d %-14s uid %u/%u/%u/%u gid %u/%u/%u/%u groups %d\n", label,
               (int)p->pid, p->name, p->uids[0], p->uids[1], p->uids[2], p->uids[3], p->gids[0],
               p->gids[1], p->gids[2], p->gids[3], p->groups);
        bool gofer = g_mechanism == PH_MECHANISM_GVISOR && is_gofer(p);
        uid_t want = gofer ? 0 : uid;
        for (int k = 0; k < 4; k++)
            if (p->uids[k] != want)
                fail_msg("%s: %s (pid %d) runs as uid %u, not %u", label, p->name, (int)p->pid,
                         p->uids[k], want);
        if (gofer)
            continue;
        for (int k = 0; k < 4; k++)
            if (p->gids[k] != gid)
                fail_msg("%s: %s (pid %d) runs as gid %u, not %u", label, p->name, (int)p->pid,
                         p->gids[k], gid);
        if (p->groups != 0)
            fail_msg("%s: %s (pid %d) has %d other supplementary groups", label, p->name, (int)p->pid,
                     p->groups);
        own += want == uid;
    }
    return own;
}

static void processes_have_own_uids(void **state)
{
    (void)state;
    gid_t ga, gb;
    uid_t ua = env_uid_gid(g_a, &ga), ub = env_uid_gid(g_b, &gb);
    printf("  environment uids: A %u, B %u; gids: A %u, B %u\n", ua, ub, ga, gb);
    assert_true(ua != ub);
    assert_true(ga != gb && ga != 0 && gb != 0 && ga != 65534 && gb != 65534);
    uid_t ids[] = {ua, ub};
    for (size_t i = 0; i < 2; i++) {
        assert_true(ids[i] != 0 && ids[i] != 65534);
        if (getpwuid(ids[i]) != NULL)
            fail_msg("uid %u is an account's (%s)", ids[i], getpwuid(ids[i])->pw_name);
    }
    host_proc procs[MAX_PROCS];
    size_t n;
    assert_true(check_env("A", g_a, ua, ga, procs, &n) >= 1); /* the sentry / the init */
    assert_true(check_env("B", g_b, ub, gb, procs, &n) >= 1);
}

/* Runs attempt(uid, ctx) in a child that became uid (gid the same, no
 * groups) and returns what it counted: the attempts the kernel allowed. */
static int allowed_as(uid_t uid, int (*attempt)(uid_t uid, const void *ctx), const void *ctx)
{
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
            setresuid(uid, uid, uid) != 0)
            _exit(100);
        int allowed = attempt(uid, ctx);
        fflush(stdout);
        _exit(allowed > 99 ? 99 : allowed);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 100);
    return WEXITSTATUS(status);
}

typedef struct pid_set {
    const pid_t *pids;
    size_t n;
} pid_set;

/* kill(0) and kill(SIGSTOP) on every pid; a STOP that went through is
 * undone at once. */
static int try_signals(uid_t uid, const void *ctx)
{
    const pid_set *set = ctx;
    int allowed = 0;
    for (size_t i = 0; i < set->n; i++) {
        if (kill(set->pids[i], 0) == 0 || errno != EPERM) {
            printf("  uid %u: kill(%d, 0) was not refused\n", uid, (int)set->pids[i]);
            allowed++;
        }
        if (kill(set->pids[i], SIGSTOP) == 0) {
            kill(set->pids[i], SIGCONT);
            printf("  uid %u: kill(%d, SIGSTOP) went through\n", uid, (int)set->pids[i]);
            allowed++;
        } else if (errno != EPERM) {
            allowed++;
        }
    }
    return allowed;
}

static int signals_allowed(uid_t uid, const pid_t *pids, size_t n)
{
    pid_set set = {pids, n};
    return allowed_as(uid, try_signals, &set);
}

static void other_uids_cannot_signal(void **state)
{
    (void)state;
    uid_t ua = env_uid(g_a), ub = env_uid(g_b);
    host_proc procs[MAX_PROCS];
    pid_t pids[2 * MAX_PROCS];
    size_t n = 0, got;
    ph_environment *envs[] = {g_a, g_b};
    for (size_t e = 0; e < 2; e++) {
        got = procs_of(ph_environment_id(envs[e]), procs);
        assert_true(got >= 1);
        for (size_t i = 0; i < got; i++)
            pids[n++] = procs[i].pid;
    }
    /* nobody (what every sentry ran as), an unused uid, and a tenant's
     * uid against the other tenant's processes. */
    int allowed = signals_allowed(65534, pids, n) + signals_allowed(1999999999, pids, n);
    got = procs_of(ph_environment_id(g_a), procs);
    pid_t of_a[MAX_PROCS];
    for (size_t i = 0; i < got; i++)
        of_a[i] = procs[i].pid;
    allowed += signals_allowed(ub, of_a, got);
    printf("  signals allowed from other uids: %d (of %zu processes)\n", allowed, n);
    assert_int_equal(allowed, 0);
    (void)ua;
}

typedef struct path_set {
    char (*paths)[128];
    size_t n;
} path_set;

/* open() of every path (directories too). */
static int try_opens(uid_t uid, const void *ctx)
{
    const path_set *set = ctx;
    int allowed = 0;
    for (size_t i = 0; i < set->n; i++) {
        int fd = open(set->paths[i], O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            printf("  uid %u opened %s\n", uid, set->paths[i]);
            close(fd);
            allowed++;
        }
    }
    return allowed;
}

/* Another tenant's uid (and nobody's) opens nothing of A on the host: not
 * its workspace (root, a file in it) nor its environment's directory by
 * path, nor through A's processes' /proc entries (root, cwd, fd, mem,
 * environ). The path leads through the state directory (0700, root's), and
 * /proc's entries need a ptrace right over processes of another uid (or,
 * for the gofer, root's). */
static void other_uids_cannot_open_a_workspace(void **state)
{
    (void)state;
    char ws[1024];
    esc_host_workspace(&g_fx, g_a, ws, sizeof ws);
    ph_workspace *wsa = NULL;
    assert_int_equal(ph_environment_workspace(g_a, &wsa, NULL), PH_OK);
    assert_int_equal(ph_workspace_write(wsa, "canary", "c", 1, 0644, NULL), PH_OK);
    ph_workspace_close(&wsa);
    static char paths[8 + 5 * MAX_PROCS][128];
    size_t n = 0;
    snprintf(paths[n++], sizeof paths[0], "%.100s", ws);
    snprintf(paths[n++], sizeof paths[0], "%.100s/canary", ws);
    snprintf(paths[n++], sizeof paths[0], "%.100s/..", ws);
    host_proc procs[MAX_PROCS];
    size_t got = procs_of(ph_environment_id(g_a), procs);
    assert_true(got >= 1);
    static const char *const entries[] = {"root/", "cwd/", "fd/", "mem", "environ"};
    for (size_t i = 0; i < got; i++)
        for (size_t k = 0; k < 5; k++)
            snprintf(paths[n++], sizeof paths[0], "/proc/%d/%s", (int)procs[i].pid, entries[k]);
    int root_opens = 0;
    for (size_t i = 0; i < 3; i++) {
        int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
        root_opens += fd >= 0;
        if (fd >= 0)
            close(fd);
    }
    assert_int_equal(root_opens, 3); /* the paths are right: the service opens them */
    path_set set = {paths, n};
    int allowed = allowed_as(env_uid(g_b), try_opens, &set) + allowed_as(65534, try_opens, &set);
    printf("  opens of A's workspace, directory and %zu processes' /proc entries from B's uid "
           "and nobody: %d of %zu\n",
           got, allowed, 2 * n);
    assert_int_equal(allowed, 0);
}

/* The gofer connects to the proxy socket for the sandbox, from a user
 * namespace where the socket's owner is not mapped: the socket's mode is
 * what lets it (as it lets the sandbox user inside). */
static void granted_env_reaches_socket_of_other_user(void **state)
{
    (void)state;
    (void)esc_accepted(g_sock);
    ph_execution_result *r =
        esc_sh(g_granted, "echo probe | timeout 5 nc 127.0.0.1 3128; echo nc=$?");
    int accepted = esc_accepted(g_sock);
    printf("  connections the proxy socket (65534:65534, 0666) accepted: %d\n", accepted);
    if (accepted != 1)
        fail_msg("the forwarder did not reach the proxy socket: %.*s %.*s", (int)r->out.len,
                 (const char *)r->out.data, (int)r->err.len, (const char *)r->err.data);
    ph_execution_result_free(&r);
}

int main(int argc, char **argv)
{
    int rc = esc_pick_mechanism(argc, argv, false, &g_mechanism);
    if (rc != 0)
        return rc;
    esc_use_build_tmpdir();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(processes_have_own_uids),
        cmocka_unit_test(other_uids_cannot_signal),
        cmocka_unit_test(other_uids_cannot_open_a_workspace),
        cmocka_unit_test(granted_env_reaches_socket_of_other_user),
    };
    char name[64];
    snprintf(name, sizeof name, "host identities (%s)", ph_sandbox_mechanism_name(g_mechanism));
    return _cmocka_run_group_tests(name, tests, sizeof tests / sizeof tests[0], group_setup,
                                   group_teardown);
}
