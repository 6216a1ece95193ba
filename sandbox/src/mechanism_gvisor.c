/* mechanism_gvisor.c - the production mechanism: Debian's runsc (gVisor,
 * ptrace platform) running an OCI bundle this module writes.
 *
 * One long-lived sandbox per environment:
 *   create   writes <env state>/bundle/config.json and runs
 *            `runsc create --bundle` + `runsc start`; the init is
 *            pinhole-forwarder --init (reaper, and relay to the proxy socket
 *            when the network is granted);
 *   execute  runs `runsc exec --process <json>` with the exact argv (behind
 *            pinhole-forwarder --run, which kills what the command leaves
 *            behind), user, cwd and environment; then asks the sentry
 *            (`runsc ps`) whether anything but the init is left, since the
 *            wrapper shares the command's uid and may have been killed or
 *            stopped by it: what is left runs on until it ends or the
 *            deadline. The wall clock is enforced from here (gVisor does not
 *            enforce RLIMIT_CPU): at the deadline the init sweeps every
 *            other process (SIGUSR1, confirmed with `runsc ps`), or, failing
 *            that, the sandbox is destroyed (`runsc kill --all`, `runsc
 *            delete --force`) and started again at the next execute. So when
 *            execute returns, no process of the command is alive, and
 *            files_changed (computed after) sees all they did;
 *   detach   forgets the sandbox in this process; create with the same
 *            arguments re-attaches to it while it runs (the CLI);
 *   destroy  `runsc kill --all`, `runsc delete --force` (which removes the
 *            sandbox processes and the cgroup), then whatever cgroup a
 *            failed runsc left, the bundle and runsc's state directory.
 * Every file here is made through the environment's verified descriptor
 * (state_dir.c); runsc is given paths below it (--bundle, --root), which
 * only root can change.
 *
 * Operator settings (environment of the service, read at create):
 *   PINHOLE_GVISOR_ROOTFS  read-only root filesystem directory
 *                          (default /var/lib/pinhole/rootfs)
 *   PINHOLE_FORWARDER      static pinhole-forwarder binary (default: the
 *                          installed one, then the build tree's)
 *   PINHOLE_RUNSC          runsc binary (default: /usr/bin/runsc, ...)
 * The sandbox processes run as the environment's own host uid/gid (from
 * the service's id range, ph_service_config.id_first).
 *
 * The root filesystem is shared by every sandbox and must never change:
 * runsc's gofer creates, in the host directory, a mount point for each bind
 * mount that lacks one (run/pinhole/forwarder, run/pinhole/proxy.sock).
 * scripts/build-rootfs.sh makes them; create refuses a root filesystem
 * without them (rootfs_stubs_missing) rather than let runsc write to it.
 */
#include "mechanism_gvisor-int.h"

#include "pinhole/tree_remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cgroup_probe-int.h"
#include "oci_bundle-int.h"
#include "runsc_cli-int.h"

#ifndef PH_FORWARDER_INSTALLED
#define PH_FORWARDER_INSTALLED "/usr/local/libexec/pinhole/pinhole-forwarder"
#endif
#ifndef PH_IDMAP_INSTALLED
#define PH_IDMAP_INSTALLED "/usr/local/libexec/pinhole/pinhole-idmap"
#endif

/* Generous bounds on runsc's own subcommands (they take 20-200 ms; delete
 * can take seconds while the host reaps the sandbox). */
#define LIFECYCLE_TIMEOUT_MS 30000
#define KILL_TIMEOUT_MS 10000
/* Once nothing of the command is left, its pipes reach end of file as soon
 * as the sentry closes its copies. */
#define PIPE_GRACE_MS 2000
/* How long the init's sweep may take before kill --all is used instead. */
#define SWEEP_CONFIRM_MS 1000
/* Where runsc exec records (--internal-pid-file) that the sandbox started
 * the command: written by runsc on the host, in the bundle directory, which
 * no sandbox process can see. */
#define EXEC_PID_NAME "exec.pid"

typedef struct gvisor_state {
    pthread_mutex_t lock; /* one command at a time: --run sweeps the sandbox */
    ph_runsc rt;
    char id[128];          /* container id: the environment id */
    char dir[PATH_MAX];    /* <env state>/gvisor: bundle/, runsc/ */
    char bundle[PATH_MAX];
    char process_json[PATH_MAX];
    char exec_pid[PATH_MAX]; /* <bundle>/exec.pid: runsc exec's --internal-pid-file */
    bool host_uds;         /* a proxy socket is mounted */
    bool running;          /* created and started, not killed */
    int dir_fd;            /* <env state>/gvisor, verified */
    int bundle_fd;         /* <env state>/gvisor/bundle, verified */
    int env_fd;            /* the environment's directory (a dup) */
    uid_t uid;
    gid_t gid;
} gvisor_state;

/* ---- settings ---- */

/* $PINHOLE_GVISOR_ROOTFS when set (and then nothing else: an operator's
 * explicit choice never silently falls back), else the installed default,
 * else (build trees) the busybox root filesystem the build made. */
ph_status ph_gvisor_rootfs_path(char out[static PATH_MAX], ph_diag *diag)
{
    const char *env = getenv("PINHOLE_GVISOR_ROOTFS");
    const char *candidates[] = {PH_GVISOR_DEFAULT_ROOTFS,
#ifdef PH_GVISOR_BUILD_ROOTFS
                                PH_GVISOR_BUILD_ROOTFS,
#endif
    };
    size_t n = sizeof candidates / sizeof candidates[0];
    if (env != NULL && env[0] != '\0') {
        candidates[0] = env;
        n = 1;
    }
    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        const char *c = candidates[i];
        if (c[0] == '/' && stat(c, &sb) == 0 && S_ISDIR(sb.st_mode) && realpath(c, out) != NULL)
            return PH_OK;
    }
    return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                       "no root filesystem for sandboxes: build one (scripts/build-rootfs.sh) "
                       "and set PINHOLE_GVISOR_ROOTFS");
}

/* A helper program of ours: $<env_name>, the installed one, then (build
 * trees, build may be NULL) the build's. */
static ph_status helper_path(const char *env_name, const char *installed, const char *build,
                             const char *what, char out[static PATH_MAX], ph_diag *diag)
{
    const char *candidates[] = {getenv(env_name), installed, build};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        const char *c = candidates[i];
        if (c == NULL || c[0] != '/' || access(c, X_OK) != 0)
            continue;
        if (realpath(c, out) != NULL)
            return PH_OK;
    }
    return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "%s is not installed (set %s)", what, env_name);
}

ph_status ph_gvisor_forwarder_path(char out[static PATH_MAX], ph_diag *diag)
{
#ifdef PH_FORWARDER_BUILD_PATH
    const char *build = PH_FORWARDER_BUILD_PATH;
#else
    const char *build = NULL;
#endif
    return helper_path("PINHOLE_FORWARDER", PH_FORWARDER_INSTALLED, build, "pinhole-forwarder",
                       out, diag);
}

/* pinhole-idmap (tools/pinhole_idmap.c): runsc's newuidmap/newgidmap. */
static ph_status idmap_path(char out[static PATH_MAX], ph_diag *diag)
{
#ifdef PH_IDMAP_BUILD_PATH
    const char *build = PH_IDMAP_BUILD_PATH;
#else
    const char *build = NULL;
#endif
    return helper_path("PINHOLE_IDMAP", PH_IDMAP_INSTALLED, build, "pinhole-idmap", out, diag);
}

/* The mount points runsc would otherwise create in the shared root
 * filesystem: each must already exist as a regular file. */
ph_status ph_gvisor_check_rootfs(const char *rootfs, ph_diag *diag)
{
    static const char *const stubs[] = {"run/pinhole/forwarder", "run/pinhole/proxy.sock"};
    int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "the root filesystem cannot be opened");
    ph_status st = PH_OK;
    for (size_t i = 0; st == PH_OK && i < sizeof stubs / sizeof stubs[0]; i++) {
        struct stat sb;
        if (fstatat(root, stubs[i], &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            st = ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                             "rootfs_stubs_missing: the root filesystem has no regular file "
                             "/%s (a mount point runsc would create in it): rebuild it with "
                             "scripts/build-rootfs.sh --force",
                             stubs[i]);
    }
    close(root);
    return st;
}

static ph_status gvisor_available(ph_diag *diag)
{
    ph_runsc rt;
    char path[PATH_MAX];
    ph_status st;
    if ((st = ph_runsc_locate(&rt, diag)) != PH_OK || (st = ph_gvisor_rootfs_path(path, diag)) != PH_OK ||
        (st = ph_gvisor_forwarder_path(path, diag)) != PH_OK || (st = idmap_path(path, diag)) != PH_OK)
        return st;
    if (geteuid() != 0)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "the gvisor mechanism needs root (runsc creates namespaces and cgroups)");
    /* Fail closed: limits that no cgroup controller would enforce. */
    ph_cgroup_probe cg;
    if ((st = ph_cgroup_probe_root(NULL, &cg, diag)) != PH_OK)
        return st;
    return ph_cgroup_require_limits(&cg, diag);
}

/* ---- lifecycle ---- */

static ph_status runsc(gvisor_state *gs, const char *const *tail, int64_t timeout_ms,
                       ph_diag *diag)
{
    char err[PH_RUNSC_STDERR_MAX];
    ph_status st = ph_runsc_run(&gs->rt, gs->host_uds, tail, timeout_ms, NULL, 0, err, sizeof err, diag);
    if (st != PH_OK) {
        /* runsc's text quotes host paths: keep it out of the diagnostic
         * (results never carry one) but in the service's log on stderr. */
        json_t *line = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "level", "warning",
                                 "component", "sandbox", "mechanism", "gvisor", "event",
                                 "runsc_failed", "subcommand", tail[0], "id", gs->id, "stderr",
                                 err);
        char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
        if (text != NULL)
            fprintf(stderr, "%s\n", text);
        free(text);
        json_decref(line);
    }
    return st;
}

/* Removes what a previous sandbox with this id left in runsc's state,
 * and the cgroup runsc made for it (delete leaves it when the sandbox
 * never started, or when runsc itself failed). */
static void force_delete(gvisor_state *gs)
{
    const char *kill_all[] = {"kill", "--all", gs->id, "KILL", NULL};
    const char *del[] = {"delete", "--force", gs->id, NULL};
    if (ph_fault_point("runsc_kill", NULL) == PH_OK)
        (void)ph_runsc_run(&gs->rt, gs->host_uds, kill_all, KILL_TIMEOUT_MS, NULL, 0, NULL, 0,
                           NULL);
    if (ph_fault_point("runsc_delete", NULL) == PH_OK)
        (void)ph_runsc_run(&gs->rt, gs->host_uds, del, LIFECYCLE_TIMEOUT_MS, NULL, 0, NULL, 0,
                           NULL);
    char group[160];
    snprintf(group, sizeof group, "pinhole-%s", gs->id);
    (void)ph_cgroup_remove_group(NULL, group);
    gs->running = false;
}

static ph_status start_sandbox(gvisor_state *gs, ph_diag *diag)
{
    const char *create[] = {"create", "--bundle", gs->bundle, gs->id, NULL};
    const char *start[] = {"start", gs->id, NULL};
    ph_status st = ph_fault_point("runsc_create", diag);
    if (st == PH_OK)
        st = runsc(gs, create, LIFECYCLE_TIMEOUT_MS, diag);
    if (st == PH_OK)
        st = ph_fault_point("runsc_start", diag);
    if (st == PH_OK)
        st = runsc(gs, start, LIFECYCLE_TIMEOUT_MS, diag);
    if (st != PH_OK) {
        force_delete(gs);
        return st;
    }
    gs->running = true;
    return PH_OK;
}

/* Whether runsc reports the sandbox as running. */
static bool sandbox_alive(gvisor_state *gs)
{
    const char *state_cmd[] = {"state", gs->id, NULL};
    char out[1024];
    if (ph_runsc_run(&gs->rt, gs->host_uds, state_cmd, KILL_TIMEOUT_MS, out, sizeof out, NULL, 0,
                     NULL) != PH_OK)
        return false;
    json_t *doc = json_loads(out, 0, NULL);
    const char *status = json_string_value(json_object_get(doc, "status"));
    bool alive = status != NULL && strcmp(status, "running") == 0;
    json_decref(doc);
    return alive;
}

static void free_state(gvisor_state *gs)
{
    if (gs->bundle_fd >= 0)
        close(gs->bundle_fd);
    if (gs->dir_fd >= 0)
        close(gs->dir_fd);
    if (gs->env_fd >= 0)
        close(gs->env_fd);
    pthread_mutex_destroy(&gs->lock);
    free(gs);
}

/* <env>/gvisor/idmap/{newuidmap,newgidmap} -> pinhole-idmap.
 *
 * runsc 20221219 runs the sandbox process (the sentry) as host uid 65534,
 * "nobody", for every sandbox when its real uid is 0, and as its real uid
 * otherwise: createSandboxProcess in runsc/sandbox/sandbox.go checks
 * unix.Getuid() != 0 and then maps nobody in the sandbox's user namespace
 * to os.Getuid(). (--rootless would map it to root here, and `runsc create`
 * refuses it.) So `runsc create` runs with the environment's uid as its
 * real uid and 0 as its effective and saved uid: it keeps every
 * capability, and the sentry runs as that uid. The same check then starts
 * the gofer the rootless way (createGoferProcess in
 * runsc/container/container.go): in the spec's user namespace
 * (ph_oci_sandbox.user_namespace), whose maps it has `newuidmap` and
 * `newgidmap` write, found on PATH. This directory, first on runsc's PATH
 * for create only, holds ours. */
static ph_status make_idmap_dir(gvisor_state *gs, const char *idmap, ph_diag *diag)
{
    int fd = -1;
    ph_status st = ph_fault_point("gvisor_idmap", diag);
    if (st == PH_OK)
        st = ph_state_mkdir(gs->dir_fd, "idmap", 0700, false, &fd, diag);
    static const char *const names[] = {"newuidmap", "newgidmap"};
    for (size_t i = 0; st == PH_OK && i < 2; i++) {
        /* Replaced, not reused: a re-attach may come from another build. */
        (void)unlinkat(fd, names[i], 0);
        if (symlinkat(idmap, fd, names[i]) != 0)
            st = ph_diag_set(diag, PH_E_IO, 0, "idmap link: %s", strerror(errno));
    }
    if (fd >= 0)
        close(fd);
    return st;
}

static ph_status gvisor_create(const ph_mech_create_args *args, void **state, ph_diag *diag)
{
    *state = NULL;
    gvisor_state *gs = calloc(1, sizeof *gs);
    if (gs == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    pthread_mutex_init(&gs->lock, NULL);
    gs->dir_fd = gs->bundle_fd = -1;
    gs->env_fd = fcntl(args->env_fd, F_DUPFD_CLOEXEC, 3);
    gs->uid = args->uid;
    gs->gid = args->gid;
    const ph_environment_spec *spec = args->spec;
    char rootfs[PATH_MAX], forwarder[PATH_MAX], idmap[PATH_MAX];
    ph_status st;
    if (gs->env_fd < 0) {
        free_state(gs);
        return ph_diag_set(diag, PH_E_IO, 0, "dup: %s", strerror(errno));
    }
    if ((st = ph_runsc_locate(&gs->rt, diag)) != PH_OK || (st = ph_gvisor_rootfs_path(rootfs, diag)) != PH_OK ||
        (st = ph_gvisor_check_rootfs(rootfs, diag)) != PH_OK ||
        (st = ph_gvisor_forwarder_path(forwarder, diag)) != PH_OK ||
        (st = idmap_path(idmap, diag)) != PH_OK) {
        free_state(gs);
        return st;
    }
    if (snprintf(gs->id, sizeof gs->id, "%s", args->env_id) >= (int)sizeof gs->id ||
        snprintf(gs->dir, sizeof gs->dir, "%s/gvisor", args->env_state_dir) >= (int)sizeof gs->dir ||
        snprintf(gs->bundle, sizeof gs->bundle, "%s/bundle", gs->dir) >= (int)sizeof gs->bundle ||
        snprintf(gs->process_json, sizeof gs->process_json, "%s/process.json", gs->bundle) >=
            (int)sizeof gs->process_json ||
        snprintf(gs->exec_pid, sizeof gs->exec_pid, "%s/" EXEC_PID_NAME, gs->bundle) >=
            (int)sizeof gs->exec_pid ||
        snprintf(gs->rt.root, sizeof gs->rt.root, "%s/runsc", gs->dir) >= (int)sizeof gs->rt.root ||
        snprintf(gs->rt.create_path, sizeof gs->rt.create_path, "%s/idmap", gs->dir) >=
            (int)sizeof gs->rt.create_path) {
        free_state(gs);
        return ph_diag_set(diag, PH_E_LIMIT, 0, "environment state path too long");
    }
    /* Existing directories are reused (re-attach) only when verified ours. */
    int runsc_fd = -1;
    if ((st = ph_fault_point("gvisor_state", diag)) != PH_OK ||
        (st = ph_state_mkdir(gs->env_fd, "gvisor", 0700, false, &gs->dir_fd, diag)) != PH_OK ||
        (st = ph_state_mkdir(gs->dir_fd, "bundle", 0700, false, &gs->bundle_fd, diag)) != PH_OK ||
        (st = ph_state_mkdir(gs->dir_fd, "runsc", 0700, false, &runsc_fd, diag)) != PH_OK)
        goto fail;
    close(runsc_fd);
    if ((st = make_idmap_dir(gs, idmap, diag)) != PH_OK)
        goto fail;
    /* The sandbox process runs as the environment's host uid and gid: runsc
     * create runs with them as its real uid and gid (see make_idmap_dir). */
    gs->rt.create_ruid = gs->uid;
    gs->rt.create_rgid = gs->gid;
    /* The sandbox user must own its workspace root to create files in it. */
    if (fchownat(args->workspace_fd, "", gs->uid, gs->gid, AT_EMPTY_PATH) != 0) {
        st = ph_diag_set(diag, PH_E_IO, 0, "cannot hand the workspace to the sandbox user: %s",
                         strerror(errno));
        goto fail;
    }

    char cgroup[160];
    snprintf(cgroup, sizeof cgroup, "/pinhole-%s", gs->id);
    bool granted = spec->network.grant_token != NULL;
    gs->host_uds = granted;
    ph_oci_sandbox sb = {
        .rootfs = rootfs,
        .workspace = args->workspace_dir,
        .forwarder = forwarder,
        .proxy_socket = granted ? args->proxy_socket : NULL,
        .forwarder_port = spec->network.proxy_port ? spec->network.proxy_port : 3128,
        .uid = gs->uid,
        .gid = gs->gid,
        .cgroups_path = cgroup,
        .memory_bytes = spec->limits.memory_bytes > 0 ? (uint64_t)spec->limits.memory_bytes
                                                      : PH_GVISOR_DEFAULT_MEMORY,
        .pids = spec->limits.pids > 0 ? (uint64_t)spec->limits.pids : PH_GVISOR_DEFAULT_PIDS,
        .cpu_millis = spec->limits.cpu_millis > 0 ? (uint64_t)spec->limits.cpu_millis : 0,
        .user_namespace = true,
    };
    json_t *config = NULL;
    if ((st = ph_oci_config_new(&sb, &config, diag)) != PH_OK)
        goto fail;
    if ((st = ph_fault_point("bundle_write", diag)) == PH_OK)
        st = ph_oci_write_json(gs->bundle_fd, "config.json", config, diag);
    json_decref(config);
    if (st != PH_OK)
        goto fail;
    /* Called again with the same arguments after detach (the CLI's create
     * then exec from another process): a running sandbox is re-attached.
     * Anything else under this id is stale and replaced. */
    if (sandbox_alive(gs)) {
        gs->running = true;
        *state = gs;
        return PH_OK;
    }
    force_delete(gs);
    if ((st = start_sandbox(gs, diag)) != PH_OK)
        goto fail;
    *state = gs;
    return PH_OK;
fail:
    (void)ph_tree_remove_at(gs->env_fd, "gvisor", PH_TREE_ONE_FS, NULL);
    free_state(gs);
    return st;
}

/* Leaves the sandbox running for a later create with the same arguments. */
static void gvisor_detach(void **state)
{
    if (state == NULL || *state == NULL)
        return;
    free_state(*state);
    *state = NULL;
}

static void gvisor_destroy(void **state)
{
    if (state == NULL || *state == NULL)
        return;
    gvisor_state *gs = *state;
    pthread_mutex_lock(&gs->lock);
    force_delete(gs);
    (void)ph_tree_remove_at(gs->env_fd, "gvisor", PH_TREE_ONE_FS, NULL);
    pthread_mutex_unlock(&gs->lock);
    free_state(gs);
    *state = NULL;
}

/* Recovery after the service died at any step of create, execute or
 * destroy: the runsc clients it had running (they die with it, but not
 * before a restart may look) and the sandbox's own processes (gofer,
 * sandbox: runsc names them with our --root) are killed first, so nothing
 * is still creating while this removes; then what runsc recorded, the
 * cgroup and the state. */
static void gvisor_recover(const char *env_id, int env_fd, const char *env_state_dir)
{
    gvisor_state *gs = calloc(1, sizeof *gs);
    if (gs == NULL)
        return;
    pthread_mutex_init(&gs->lock, NULL);
    gs->dir_fd = gs->bundle_fd = gs->env_fd = -1;
    bool named = snprintf(gs->id, sizeof gs->id, "%s", env_id) < (int)sizeof gs->id &&
                 snprintf(gs->rt.root, sizeof gs->rt.root, "%s/gvisor/runsc", env_state_dir) <
                     (int)sizeof gs->rt.root;
    if (named && ph_runsc_locate(&gs->rt, NULL) == PH_OK) {
        char exe[PATH_MAX];
        if (realpath(gs->rt.binary, exe) != NULL)
            (void)ph_kill_by_argument(exe, "--root", gs->rt.root);
        force_delete(gs);
    } else if (named) {
        /* No runsc to ask: its processes die with their cgroup. */
        char group[160];
        snprintf(group, sizeof group, "pinhole-%s", gs->id);
        (void)ph_cgroup_remove_group(NULL, group);
    }
    (void)ph_tree_remove_at(env_fd, "gvisor", PH_TREE_ONE_FS, NULL);
    free_state(gs);
}

/* ---- execute ---- */

static ph_status write_process(gvisor_state *gs, const ph_mech_exec_args *a, ph_diag *diag)
{
    size_t argc = 0, envc = 0;
    while (a->argv[argc] != NULL)
        argc++;
    while (a->envp[envc] != NULL)
        envc++;
    /* The wrapper in front of the command: PATH search, 127 for a missing
     * program, and the sweep of what the command leaves behind. */
    char **hexv = NULL;
    bool hex = false;
    ph_status st = ph_oci_run_argv(a->argv, &hexv, &hex, diag);
    const char **argv = st == PH_OK ? calloc(argc + 5, sizeof *argv) : NULL;
    if (argv == NULL) {
        ph_oci_run_argv_free(hexv);
        return st != PH_OK ? st : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    size_t head = 0;
    argv[head++] = PH_OCI_FORWARDER;
    argv[head++] = "--run";
    if (hex)
        argv[head++] = "--argv-hex";
    argv[head++] = "--";
    for (size_t i = 0; i < argc; i++)
        argv[head + i] = hex ? hexv[i] : a->argv[i];
    char cwd[PH_WS_PATH_MAX + 32];
    if (strcmp(a->cwd, ".") == 0 || a->cwd[0] == '\0')
        snprintf(cwd, sizeof cwd, "%s", PH_OCI_WORKSPACE);
    else
        snprintf(cwd, sizeof cwd, "%s/%s", PH_OCI_WORKSPACE, a->cwd);
    json_t *doc = NULL;
    st = ph_oci_process_new(argv, argc + head, (const char *const *)a->envp, envc, cwd, gs->uid,
                            gs->gid, &doc, diag);
    free(argv);
    ph_oci_run_argv_free(hexv);
    if (st != PH_OK)
        return st;
    if ((st = ph_fault_point("process_write", diag)) == PH_OK)
        st = ph_oci_write_json(gs->bundle_fd, "process.json", doc, diag);
    json_decref(doc);
    return st;
}

/* Maps the wrapper's exit code onto the outcome: 128 + N is signal N (the
 * shell convention; a command that exits 129..192 by itself is reported as
 * a signal too, a documented ambiguity of runsc exec). */
void ph_gvisor_map_status(int code, ph_mech_outcome *o)
{
    if (code > 128 && code <= 128 + 64) {
        o->exited = false;
        o->term_signal = code - 128;
    } else {
        o->exited = true;
        o->exit_code = code;
    }
}

/* What `runsc ps` says of the sandbox's processes. The list comes from the
 * sentry (gVisor's kernel, on the host side of the boundary): nothing the
 * command runs can answer in its place, unlike the in-sandbox wrapper and
 * init, which run as the command's own uid. */
typedef enum sandbox_procs { PROCS_ONLY_INIT, PROCS_OTHERS, PROCS_UNKNOWN } sandbox_procs;

static sandbox_procs list_processes(gvisor_state *gs)
{
    const char *ps[] = {"ps", "--format", "json", gs->id, NULL};
    char out[256];
    if (ph_runsc_run(&gs->rt, gs->host_uds, ps, KILL_TIMEOUT_MS, out, sizeof out, NULL, 0,
                     NULL) != PH_OK)
        return PROCS_UNKNOWN;
    /* A list that does not fit the buffer holds more than the init. */
    json_t *pids = json_loads(out, 0, NULL);
    sandbox_procs r = PROCS_OTHERS;
    if (pids == NULL && strlen(out) < sizeof out - 1)
        r = PROCS_UNKNOWN;
    else if (json_is_array(pids) && json_array_size(pids) == 1 &&
             json_integer_value(json_array_get(pids, 0)) == 1)
        r = PROCS_ONLY_INIT;
    json_decref(pids);
    return r;
}

/* Ends every process of the sandbox but its init: SIGUSR1 asks the init
 * (pinhole-forwarder --init) to kill(-1, SIGKILL) until nothing else is
 * left, which keeps the sandbox (and a granted relay) up for the next
 * command. The init runs as the command's uid, so it is trusted with
 * nothing: the end is confirmed by `runsc ps`, and when it cannot be within
 * SWEEP_CONFIRM_MS the sandbox is destroyed: `runsc kill --all` sends
 * SIGKILL to every process (it does not wait, and `runsc ps` answers nothing
 * once the init is gone), then `runsc delete --force` kills the sandbox's
 * host process (gVisor's kernel: every process of the sandbox lives in it)
 * and returns once it has exited. The next execute starts a new one. Either
 * way nothing the command started is alive on return. */
static void kill_everything(gvisor_state *gs)
{
    const char *sweep[] = {"kill", gs->id, "USR1", NULL};
    if (gs->running &&
        ph_runsc_run(&gs->rt, gs->host_uds, sweep, KILL_TIMEOUT_MS, NULL, 0, NULL, 0, NULL) == PH_OK) {
        int64_t give_up = ph_monotonic_ms() + SWEEP_CONFIRM_MS;
        do {
            if (list_processes(gs) == PROCS_ONLY_INIT)
                return;
        } while (ph_monotonic_ms() < give_up);
    }
    force_delete(gs);
}

static ph_leftovers gvisor_leftovers(void *ctx)
{
    switch (list_processes(ctx)) {
    case PROCS_ONLY_INIT: return PH_LEFT_NOTHING;
    case PROCS_OTHERS: return PH_LEFT_SOME;
    case PROCS_UNKNOWN: break;
    }
    return PH_LEFT_UNKNOWN;
}

/* After the command's wrapper has exited: the wrapper normally kills what
 * the command left behind before it exits, but it runs as the command's
 * uid and the command can kill or stop it first; so the host asks the
 * sentry (ph_wait_for_leftovers). Returns true when something was still
 * there at the deadline (then killed: the command timed out). */
static bool wait_for_the_rest(gvisor_state *gs, ph_capture caps[static 2], int64_t deadline)
{
    switch (ph_wait_for_leftovers(gvisor_leftovers, gs, caps, deadline)) {
    case PH_LEFT_NOTHING:
        return false;
    case PH_LEFT_SOME:
        kill_everything(gs);
        return true;
    case PH_LEFT_UNKNOWN:
        break;
    }
    force_delete(gs); /* no answer (the sandbox died, or runsc failed): make sure */
    return false;
}

static ph_status execute_locked(gvisor_state *gs, const ph_mech_exec_args *a, ph_mech_outcome *o,
                                bool *retry, ph_diag *diag)
{
    ph_status st;
    if (!gs->running) {
        force_delete(gs);
        if ((st = start_sandbox(gs, diag)) != PH_OK)
            return st;
    }
    /* The clock starts once the sandbox is up: restarting it after an
     * earlier kill is the mechanism's cost, not the command's. */
    int64_t start = ph_monotonic_ms();
    int64_t deadline = start + a->timeout_ms;
    if ((st = write_process(gs, a, diag)) != PH_OK)
        return st;
    if (unlinkat(gs->bundle_fd, EXEC_PID_NAME, 0) != 0 && errno != ENOENT)
        return ph_diag_set(diag, PH_E_IO, 0, "removing the last exec record: %s", strerror(errno));
    const char *tail[] = {"exec",           "--internal-pid-file", gs->exec_pid, "--process",
                          gs->process_json, gs->id,                NULL};
    pid_t pid;
    int pidfd;
    ph_capture caps[2];
    if ((st = ph_runsc_spawn_captured(&gs->rt, gs->host_uds, tail, a->stdin_fd, &o->out, &o->err,
                                      a->output_cap, &pid, &pidfd, caps, diag)) != PH_OK)
        return st;
    ph_capture_stream(caps, a);
    int ws = 0;
    if (ph_cli_collect(pid, pidfd, caps, 2, deadline, &ws) == PH_E_TIMEOUT) {
        o->timed_out = true;
        kill_everything(gs);
        kill(pid, SIGKILL); /* the client; its processes are gone already */
        (void)ph_runsc_wait(pid, pidfd, -1, &ws);
    } else if (!WIFEXITED(ws)) {
        /* The client was killed on the host: nothing in the sandbox can
         * signal it, so the service cancelled the command (pinhole-execd
         * does when its worker goes away). Everything ends now. */
        kill_everything(gs);
    } else if (gs->running) {
        o->timed_out = wait_for_the_rest(gs, caps, deadline);
    }
    o->duration_ms = ph_monotonic_ms() - start;
    close(pidfd);
    /* Nothing of the command is left: the pipes are at end of file once
     * the sentry has closed its copies. */
    ph_capture_drain(caps, 2, ph_monotonic_ms() + PIPE_GRACE_MS);
    for (int i = 0; i < 2; i++)
        if (caps[i].fd >= 0)
            close(caps[i].fd);
    if (o->timed_out) {
        o->exited = false;
        o->term_signal = SIGKILL;
        return PH_OK;
    }
    if (!WIFEXITED(ws))
        return ph_diag_set(diag, PH_E_IO, 0, "runsc exec was killed by signal %d",
                           WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    /* 128 is also what runsc exits with when it failed itself: the sandbox
     * is gone (its memory limit kills the whole sandbox, gVisor's kernel
     * included) or could not start the command. Whether the command
     * started is runsc's record on the host (the pid file), never its
     * stderr: the command writes to that same pipe and could print runsc's
     * words, then kill the sandbox, and be run a second time with a fresh
     * deadline and its first output dropped. */
    if (WEXITSTATUS(ws) == 128) {
        struct stat pid_sb;
        bool started = fstatat(gs->bundle_fd, EXEC_PID_NAME, &pid_sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                       S_ISREG(pid_sb.st_mode);
        bool alive = sandbox_alive(gs);
        if (!alive)
            gs->running = false;
        if (!started && !alive) {
            *retry = true; /* nothing ran: start a new sandbox and run it there */
            return ph_diag_set(diag, PH_E_IO, 0, "the sandbox had stopped; runsc exec failed");
        }
        if (!started)
            return ph_diag_set(diag, PH_E_IO, 0,
                               "runsc exec failed (exit 128) without recording that the "
                               "command started");
        if (!alive) {
            o->exited = false;
            o->term_signal = SIGKILL;
            return PH_OK;
        }
    }
    ph_gvisor_map_status(WEXITSTATUS(ws), o);
    return PH_OK;
}

static void outcome_reset(ph_mech_outcome *o)
{
    free(o->out.data);
    free(o->err.data);
    memset(o, 0, sizeof *o);
}

static ph_status gvisor_execute(void *state, const ph_mech_exec_args *a, ph_mech_outcome *o,
                                ph_diag *diag)
{
    gvisor_state *gs = state;
    pthread_mutex_lock(&gs->lock);
    bool retry = false;
    ph_status st = execute_locked(gs, a, o, &retry, diag);
    if (retry) {
        outcome_reset(o);
        (void)lseek(a->stdin_fd, 0, SEEK_SET);
        retry = false;
        st = execute_locked(gs, a, o, &retry, diag);
    }
    pthread_mutex_unlock(&gs->lock);
    return st;
}

const ph_mechanism_ops ph_mechanism_gvisor = {
    .id = PH_MECHANISM_GVISOR,
    .name = "gvisor",
    .available = gvisor_available,
    .create = gvisor_create,
    .execute = gvisor_execute,
    .destroy = gvisor_destroy,
    .detach = gvisor_detach,
    .recover = gvisor_recover,
};
