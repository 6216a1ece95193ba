/* mechanism_docker.c - the development fallback: the same sandbox as the
 * gvisor mechanism, run by a Docker engine through the `docker` CLI. It
 * shares the host kernel, so the startup check refuses it in production
 * (ph_sandbox_startup_check).
 *
 *   create   imports the operator's rootfs directory once as the image
 *            pinhole-rootfs:<tag> (tar | docker import), then
 *            `docker create` with no network, a read-only root, no
 *            capability, no new privileges, the sandbox user, a fresh /tmp,
 *            the workspace and the forwarder bind-mounted (and the proxy
 *            socket with a grant), the spec's limits, and the forwarder as
 *            init under a path naming the environment
 *            (/run/pinhole/pinhole-<env id>/forwarder); `docker start`;
 *   execute  `docker exec -i --user --workdir --env-file` behind
 *            `pinhole-forwarder --run --unset HOSTNAME` (docker adds
 *            HOSTNAME to every process); then `docker top` must list the
 *            init alone (the wrapper shares the command's uid and may have
 *            been killed or stopped by it): what is left runs on until it
 *            ends or the deadline. At the deadline `docker kill` + `docker
 *            wait` end the init and with it the container's PID namespace,
 *            and the next execute starts the container again. So when
 *            execute returns, no process of the command is alive;
 *   destroy  `docker rm --force`.
 * When no engine answers `docker version`, the mechanism is unavailable
 * (its tests print SKIP).
 */
#include "mechanism_gvisor-int.h"

#include "pinhole/tree_remove.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "oci_bundle-int.h"
#include "runsc_cli-int.h"

#define DOCKER_TIMEOUT_MS 60000
#define PROBE_TIMEOUT_MS 5000
#define PIPE_GRACE_MS 2000

typedef struct docker_state {
    pthread_mutex_t lock;
    char docker[PATH_MAX];
    char name[160];       /* container name: pinhole-<env id> */
    char env_file[PATH_MAX];
    char dir[PATH_MAX];   /* <env state>/docker */
    int dir_fd;           /* <env state>/docker, verified (state_dir.c) */
    int env_fd;           /* the environment's directory (a dup) */
    bool running;
    uid_t uid;
    gid_t gid;
} docker_state;

/* The CLI's environment: PATH and what selects the engine, nothing else. */
static char **cli_env(char *storage[8])
{
    static const char *const pass[] = {"DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG",
                                       "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "HOME"};
    static char path_entry[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    size_t n = 0;
    storage[n++] = path_entry;
    for (size_t i = 0; i < sizeof pass / sizeof pass[0] && n < 7; i++) {
        char *entry = NULL;
        const char *v = getenv(pass[i]);
        if (v != NULL && asprintf(&entry, "%s=%s", pass[i], v) > 0)
            storage[n++] = entry;
    }
    storage[n] = NULL;
    return storage;
}

static void cli_env_free(char *storage[8])
{
    for (size_t i = 1; storage[i] != NULL; i++)
        free(storage[i]);
}

static ph_status docker_run(const char *const *argv, int64_t timeout_ms, char *out, size_t out_cap,
                            ph_diag *diag)
{
    char *env[8];
    char err[PH_RUNSC_STDERR_MAX];
    ph_status st = ph_cli_run(argv, cli_env(env), timeout_ms, out, out_cap, err, sizeof err, diag);
    cli_env_free(env);
    if (st != PH_OK)
        fprintf(stderr, "{\"level\":\"warning\",\"component\":\"sandbox\",\"mechanism\":\"docker\","
                        "\"event\":\"docker_failed\",\"subcommand\":\"%s\"}\n",
                argv[1]);
    return st;
}

static ph_status locate_docker(char out[static PATH_MAX], ph_diag *diag)
{
    const char *env = getenv("PINHOLE_DOCKER");
    const char *candidates[] = {env, "/usr/bin/docker", "/usr/local/bin/docker"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        if (candidates[i] != NULL && candidates[i][0] == '/' && access(candidates[i], X_OK) == 0) {
            snprintf(out, PATH_MAX, "%s", candidates[i]);
            return PH_OK;
        }
    }
    return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "the docker CLI is not installed");
}

static ph_status docker_available(ph_diag *diag)
{
    char docker[PATH_MAX], path[PATH_MAX];
    ph_status st;
    if ((st = locate_docker(docker, diag)) != PH_OK || (st = ph_gvisor_rootfs_path(path, diag)) != PH_OK ||
        (st = ph_gvisor_forwarder_path(path, diag)) != PH_OK)
        return st;
    const char *argv[] = {docker, "version", "--format", "{{.Server.Version}}", NULL};
    char *env[8];
    char out[128];
    st = ph_cli_run(argv, cli_env(env), PROBE_TIMEOUT_MS, out, sizeof out, NULL, 0, NULL);
    cli_env_free(env);
    if (st != PH_OK)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "no Docker engine is reachable (docker version failed)");
    return PH_OK;
}

/* A tag naming this rootfs directory and its build (path and mtime). */
static void image_tag(const char *rootfs, char out[static 64])
{
    struct stat sb;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = rootfs; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    if (stat(rootfs, &sb) == 0)
        h = (h ^ (uint64_t)sb.st_mtime) * 1099511628211ull;
    snprintf(out, 64, "pinhole-rootfs:%016llx", (unsigned long long)h);
}

/* tar -C rootfs -c . | docker import - tag, unless the image exists. */
static ph_status ensure_image(const docker_state *ds, const char *rootfs, const char *tag,
                              ph_diag *diag)
{
    const char *inspect[] = {ds->docker, "image", "inspect", tag, NULL};
    if (docker_run(inspect, DOCKER_TIMEOUT_MS, NULL, 0, NULL) == PH_OK)
        return PH_OK;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "pipe: %s", strerror(errno));
    char *env[8];
    cli_env(env);
    const char *tar[] = {"/bin/tar", "-C", rootfs, "-c", ".", NULL};
    const char *import[] = {ds->docker, "import", "-", tag, NULL};
    pid_t tpid, ipid;
    int tfd, ifd;
    ph_status st = ph_cli_spawn(tar, env, -1, p[1], -1, &tpid, &tfd, diag);
    close(p[1]);
    if (st != PH_OK) {
        close(p[0]);
        cli_env_free(env);
        return st;
    }
    st = ph_cli_spawn(import, env, p[0], -1, -1, &ipid, &ifd, diag);
    close(p[0]);
    cli_env_free(env);
    int tws = 0, iws = 0;
    (void)ph_runsc_wait(tpid, tfd, ph_monotonic_ms() + DOCKER_TIMEOUT_MS, &tws);
    close(tfd);
    if (st != PH_OK)
        return st;
    (void)ph_runsc_wait(ipid, ifd, ph_monotonic_ms() + DOCKER_TIMEOUT_MS, &iws);
    close(ifd);
    if (!WIFEXITED(tws) || WEXITSTATUS(tws) != 0 || !WIFEXITED(iws) || WEXITSTATUS(iws) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "importing the root filesystem into docker failed");
    return PH_OK;
}

static bool mount_safe(const char *path)
{
    /* --mount is a comma-separated list: a comma in a path would add options. */
    return path != NULL && path[0] == '/' && strchr(path, ',') == NULL;
}

static void free_state(docker_state *ds)
{
    if (ds->dir_fd >= 0)
        close(ds->dir_fd);
    if (ds->env_fd >= 0)
        close(ds->env_fd);
    pthread_mutex_destroy(&ds->lock);
    free(ds);
}

static ph_status docker_create(const ph_mech_create_args *args, void **state, ph_diag *diag)
{
    *state = NULL;
    docker_state *ds = calloc(1, sizeof *ds);
    if (ds == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    pthread_mutex_init(&ds->lock, NULL);
    ds->dir_fd = -1;
    ds->env_fd = fcntl(args->env_fd, F_DUPFD_CLOEXEC, 3);
    ds->uid = args->uid;
    ds->gid = args->gid;
    char rootfs[PATH_MAX], forwarder[PATH_MAX], tag[64];
    const ph_environment_spec *spec = args->spec;
    bool granted = spec->network.grant_token != NULL;
    ph_status st;
    if (ds->env_fd < 0) {
        st = ph_diag_set(diag, PH_E_IO, 0, "dup: %s", strerror(errno));
        goto fail;
    }
    if ((st = locate_docker(ds->docker, diag)) != PH_OK ||
        (st = ph_gvisor_rootfs_path(rootfs, diag)) != PH_OK ||
        (st = ph_gvisor_forwarder_path(forwarder, diag)) != PH_OK)
        goto fail;
    if (!mount_safe(args->workspace_dir) || !mount_safe(forwarder) ||
        (granted && !mount_safe(args->proxy_socket))) {
        st = ph_diag_set(diag, PH_E_INVAL, 0, "a path for a docker mount contains a comma");
        goto fail;
    }
    snprintf(ds->name, sizeof ds->name, "pinhole-%s", args->env_id);
    if (snprintf(ds->dir, sizeof ds->dir, "%s/docker", args->env_state_dir) >= (int)sizeof ds->dir ||
        snprintf(ds->env_file, sizeof ds->env_file, "%s/env", ds->dir) >= (int)sizeof ds->env_file) {
        st = ph_diag_set(diag, PH_E_LIMIT, 0, "environment state path too long");
        goto fail;
    }
    if ((st = ph_fault_point("docker_state", diag)) != PH_OK ||
        (st = ph_state_mkdir(ds->env_fd, "docker", 0700, false, &ds->dir_fd, diag)) != PH_OK)
        goto fail;
    if (fchownat(args->workspace_fd, "", ds->uid, ds->gid, AT_EMPTY_PATH) != 0) {
        st = ph_diag_set(diag, PH_E_IO, 0, "cannot hand the workspace to the sandbox user: %s",
                         strerror(errno));
        goto fail;
    }
    image_tag(rootfs, tag);
    if ((st = ph_fault_point("docker_image", diag)) != PH_OK ||
        (st = ensure_image(ds, rootfs, tag, diag)) != PH_OK)
        goto fail;

    char user[64], ws_mount[PATH_MAX + 64], fwd_mount[PATH_MAX + 64], sock_mount[PATH_MAX + 64];
    char init_path[sizeof ds->name + 32], init_mount[PATH_MAX + sizeof init_path + 64];
    char memory[32], pids[32], cpus[32], listen[32];
    snprintf(user, sizeof user, "%u:%u", (unsigned)ds->uid, (unsigned)ds->gid);
    snprintf(ws_mount, sizeof ws_mount, "type=bind,source=%s,target=%s", args->workspace_dir,
             PH_OCI_WORKSPACE);
    snprintf(fwd_mount, sizeof fwd_mount, "type=bind,source=%s,target=%s,readonly", forwarder,
             PH_OCI_FORWARDER);
    /* The init runs as /run/pinhole/pinhole-<env id>/forwarder (the
     * forwarder bound a second time; `--run` wants PID 1 named forwarder):
     * the host's process list then names the environment its container
     * belongs to, as runsc's does, so an operator (and the escape test) can
     * tell that destroy left no process behind. The id is not a credential;
     * the sandbox learning it gains nothing. */
    snprintf(init_path, sizeof init_path, "%s/%s/forwarder", PH_OCI_RUN_DIR, ds->name);
    snprintf(init_mount, sizeof init_mount, "type=bind,source=%s,target=%s,readonly", forwarder,
             init_path);
    snprintf(sock_mount, sizeof sock_mount, "type=bind,source=%s,target=%s",
             granted ? args->proxy_socket : "", PH_OCI_PROXY_SOCKET);
    uint64_t mem = spec->limits.memory_bytes > 0 ? (uint64_t)spec->limits.memory_bytes
                                                 : PH_GVISOR_DEFAULT_MEMORY;
    snprintf(memory, sizeof memory, "%llu", (unsigned long long)mem);
    snprintf(pids, sizeof pids, "%lld",
             spec->limits.pids > 0 ? (long long)spec->limits.pids : (long long)PH_GVISOR_DEFAULT_PIDS);
    snprintf(cpus, sizeof cpus, "%.3f",
             spec->limits.cpu_millis > 0 ? (double)spec->limits.cpu_millis / 1000.0 : 0.0);
    snprintf(listen, sizeof listen, "127.0.0.1:%u",
             (unsigned)(spec->network.proxy_port ? spec->network.proxy_port : 3128));
    const char *argv[64];
    size_t n = 0;
    const char *head[] = {ds->docker, "create", "--name", ds->name, "--network", "none",
                          "--read-only", "--cap-drop", "ALL", "--security-opt",
                          "no-new-privileges", "--user", user, "--hostname", "pinhole",
                          "--tmpfs", "/tmp:rw,nosuid,nodev,size=64m", "--tmpfs",
                          "/run/pinhole:rw,nosuid,nodev,size=64k", "--mount", ws_mount,
                          "--mount", fwd_mount, "--mount", init_mount, "--memory", memory,
                          "--memory-swap", memory, "--pids-limit", pids, "--ulimit",
                          "nofile=1024:1024", "--ulimit", "core=0", "--entrypoint", init_path};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[n++] = head[i];
    if (spec->limits.cpu_millis > 0) {
        argv[n++] = "--cpus";
        argv[n++] = cpus;
    }
    if (granted) {
        argv[n++] = "--mount";
        argv[n++] = sock_mount;
    }
    argv[n++] = tag;
    argv[n++] = "--init";
    if (granted) {
        argv[n++] = "--listen";
        argv[n++] = listen;
        argv[n++] = "--connect";
        argv[n++] = PH_OCI_PROXY_SOCKET;
    }
    argv[n] = NULL;
    /* Re-attach after detach (same arguments, container still running). */
    const char *inspect[] = {ds->docker, "inspect", "--format", "{{.State.Running}}", ds->name,
                             NULL};
    char running[16] = "";
    if (docker_run(inspect, DOCKER_TIMEOUT_MS, running, sizeof running, NULL) == PH_OK &&
        strncmp(running, "true", 4) == 0) {
        ds->running = true;
        *state = ds;
        return PH_OK;
    }
    const char *rm[] = {ds->docker, "rm", "--force", ds->name, NULL};
    (void)docker_run(rm, DOCKER_TIMEOUT_MS, NULL, 0, NULL); /* a stale one of a crashed service */
    const char *start[] = {ds->docker, "start", ds->name, NULL};
    if ((st = ph_fault_point("docker_create", diag)) != PH_OK ||
        (st = docker_run(argv, DOCKER_TIMEOUT_MS, NULL, 0, diag)) != PH_OK ||
        (st = ph_fault_point("docker_start", diag)) != PH_OK ||
        (st = docker_run(start, DOCKER_TIMEOUT_MS, NULL, 0, diag)) != PH_OK) {
        (void)docker_run(rm, DOCKER_TIMEOUT_MS, NULL, 0, NULL);
        goto fail;
    }
    ds->running = true;
    *state = ds;
    return PH_OK;
fail:
    if (ds->env_fd >= 0)
        (void)ph_tree_remove_at(ds->env_fd, "docker", PH_TREE_ONE_FS, NULL);
    free_state(ds);
    return st;
}

/* Leaves the container running for a later create with the same arguments. */
static void docker_detach(void **state)
{
    if (state == NULL || *state == NULL)
        return;
    free_state(*state);
    *state = NULL;
}

static void docker_destroy(void **state)
{
    if (state == NULL || *state == NULL)
        return;
    docker_state *ds = *state;
    /* rm can fail while the engine is busy with the container ("removal
     * in progress"): try again, a container left behind would keep the
     * workspace and its processes alive. */
    const char *rm[] = {ds->docker, "rm", "--force", ds->name, NULL};
    for (int attempt = 0; attempt < 3; attempt++) {
        if (ph_fault_point("docker_rm", NULL) == PH_OK &&
            docker_run(rm, DOCKER_TIMEOUT_MS, NULL, 0, NULL) == PH_OK)
            break;
        usleep(200 * 1000);
    }
    (void)ph_tree_remove_at(ds->env_fd, "docker", PH_TREE_ONE_FS, NULL);
    free_state(ds);
    *state = NULL;
}

/* Recovery: a `docker create` the dead service left running could make the
 * container after the removal below, so it is killed first. */
static void docker_recover(const char *env_id, int env_fd, const char *env_state_dir)
{
    (void)env_state_dir;
    char docker[PATH_MAX], name[160];
    snprintf(name, sizeof name, "pinhole-%s", env_id);
    if (locate_docker(docker, NULL) == PH_OK) {
        char exe[PATH_MAX];
        if (realpath(docker, exe) != NULL)
            (void)ph_kill_by_argument(exe, "--name", name);
        const char *rm[] = {docker, "rm", "--force", name, NULL};
        for (int attempt = 0; attempt < 3; attempt++) {
            if (docker_run(rm, DOCKER_TIMEOUT_MS, NULL, 0, NULL) == PH_OK)
                break;
            usleep(200 * 1000);
        }
    }
    (void)ph_tree_remove_at(env_fd, "docker", PH_TREE_ONE_FS, NULL);
}

/* --env-file holds one NAME=value per line: a value with a newline cannot
 * be expressed, so it is refused rather than split. */
static ph_status write_env_file(const docker_state *ds, char *const *envp, ph_diag *diag)
{
    size_t len = 0;
    for (size_t i = 0; envp[i] != NULL; i++) {
        if (strchr(envp[i], '\n') != NULL)
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "environment entry %zu holds a newline (docker cannot pass it)", i);
        len += strlen(envp[i]) + 1;
    }
    char *text = malloc(len + 1);
    if (text == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    size_t off = 0;
    for (size_t i = 0; envp[i] != NULL; i++) {
        size_t n = strlen(envp[i]);
        memcpy(text + off, envp[i], n);
        text[off + n] = '\n';
        off += n + 1;
    }
    ph_status st = ph_fault_point("env_file", diag);
    if (st == PH_OK)
        st = ph_state_write(ds->dir_fd, "env", text, off, 0600, diag);
    free(text);
    return st;
}

/* Ends the container: its init dies, and with it (the kernel's rule for a
 * PID namespace) every process of the container; `docker wait` returns once
 * the init has been reaped, which the kernel allows only after every other
 * member of its namespace has exited. The next execute starts it again. */
static void kill_container(docker_state *ds)
{
    const char *kill_cmd[] = {ds->docker, "kill", ds->name, NULL};
    const char *wait_cmd[] = {ds->docker, "wait", ds->name, NULL};
    (void)docker_run(kill_cmd, DOCKER_TIMEOUT_MS, NULL, 0, NULL);
    (void)docker_run(wait_cmd, DOCKER_TIMEOUT_MS, NULL, 0, NULL);
    ds->running = false;
}

/* What the engine lists in the container (`docker top`: the host's view of
 * the container's cgroup, which nothing inside can leave or forge). */
ph_leftovers ph_docker_top_leftovers(const char *out, size_t cap)
{
    /* A list as long as the buffer may have lost lines: more than the init. */
    if (strnlen(out, cap) >= cap - 1)
        return PH_LEFT_SOME;
    const char *nl = strchr(out, '\n');
    if (nl == NULL)
        return PH_LEFT_UNKNOWN;
    int rows = 0;
    unsigned long threads = 0;
    for (const char *line = nl + 1; *line != '\0'; rows++) {
        unsigned long pid;
        int used = 0;
        if (sscanf(line, "%lu %lu%n", &pid, &threads, &used) != 2)
            return PH_LEFT_UNKNOWN;
        line += used;
        line += strspn(line, " \t");
        if (*line == '\n')
            line++;
        else if (*line != '\0')
            return PH_LEFT_UNKNOWN;
    }
    if (rows == 0)
        return PH_LEFT_UNKNOWN;
    return rows == 1 && threads == 1 ? PH_LEFT_NOTHING : PH_LEFT_SOME;
}

static ph_leftovers container_leftovers(void *ctx)
{
    const docker_state *ds = ctx;
    const char *top[] = {ds->docker, "top", ds->name, "-o", "pid,nlwp", NULL};
    char out[512];
    if (docker_run(top, DOCKER_TIMEOUT_MS, out, sizeof out, NULL) != PH_OK)
        return PH_LEFT_UNKNOWN;
    return ph_docker_top_leftovers(out, sizeof out);
}

/* After the command's wrapper has exited: the wrapper kills what the
 * command left behind before it exits, but it runs as the command's uid and
 * the command can kill or stop it first; so the host asks the engine
 * (ph_wait_for_leftovers). Returns true when something was still there at
 * the deadline (then killed with the container: the command timed out). */
static bool wait_for_the_rest(docker_state *ds, ph_capture caps[static 2], int64_t deadline)
{
    ph_leftovers left = ph_wait_for_leftovers(container_leftovers, ds, caps, deadline);
    if (left != PH_LEFT_NOTHING)
        kill_container(ds); /* at the deadline, or no answer: make sure */
    return left == PH_LEFT_SOME;
}

static ph_status docker_execute(void *state, const ph_mech_exec_args *a, ph_mech_outcome *o,
                                ph_diag *diag)
{
    docker_state *ds = state;
    pthread_mutex_lock(&ds->lock);
    ph_status st = PH_OK;
    char **hexv = NULL; /* the argv in hex, when it is not all text */
    if (!ds->running) {
        const char *start[] = {ds->docker, "start", ds->name, NULL};
        if ((st = docker_run(start, DOCKER_TIMEOUT_MS, NULL, 0, diag)) != PH_OK)
            goto out;
        ds->running = true;
    }
    if ((st = write_env_file(ds, a->envp, diag)) != PH_OK)
        goto out;
    bool has_hostname = false;
    for (size_t i = 0; a->envp[i] != NULL; i++)
        has_hostname |= strncmp(a->envp[i], "HOSTNAME=", 9) == 0;
    char user[64], cwd[PH_WS_PATH_MAX + 32];
    snprintf(user, sizeof user, "%u:%u", (unsigned)ds->uid, (unsigned)ds->gid);
    if (strcmp(a->cwd, ".") == 0 || a->cwd[0] == '\0')
        snprintf(cwd, sizeof cwd, "%s", PH_OCI_WORKSPACE);
    else
        snprintf(cwd, sizeof cwd, "%s/%s", PH_OCI_WORKSPACE, a->cwd);
    const char *argv[PH_CLI_ARGV_MAX];
    size_t n = 0;
    const char *head[] = {ds->docker, "exec", "-i", "--user", user, "--workdir", cwd,
                          "--env-file", ds->env_file, ds->name, PH_OCI_FORWARDER, "--run"};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++)
        argv[n++] = head[i];
    if (!has_hostname) {
        argv[n++] = "--unset";
        argv[n++] = "HOSTNAME";
    }
    bool hex = false;
    if ((st = ph_oci_run_argv(a->argv, &hexv, &hex, diag)) != PH_OK)
        goto out;
    if (hex)
        argv[n++] = "--argv-hex";
    argv[n++] = "--";
    for (size_t i = 0; a->argv[i] != NULL; i++) {
        if (n + 1 >= PH_CLI_ARGV_MAX) {
            st = ph_diag_set(diag, PH_E_LIMIT, 0, "too many arguments for docker exec");
            goto out;
        }
        argv[n++] = hex ? hexv[i] : a->argv[i];
    }
    argv[n] = NULL;

    char *env[8];
    int64_t start = ph_monotonic_ms(), deadline = start + a->timeout_ms;
    pid_t pid;
    int pidfd;
    ph_capture caps[2];
    st = ph_cli_spawn_captured(argv, cli_env(env), a->stdin_fd, &o->out, &o->err, a->output_cap,
                               &pid, &pidfd, caps, diag);
    cli_env_free(env);
    if (st != PH_OK)
        goto out;
    ph_capture_stream(caps, a);
    int ws = 0;
    if (ph_cli_collect(pid, pidfd, caps, 2, deadline, &ws) == PH_E_TIMEOUT) {
        kill_container(ds);
        kill(pid, SIGKILL);
        (void)ph_runsc_wait(pid, pidfd, -1, &ws);
        o->timed_out = true;
    } else if (!WIFEXITED(ws)) {
        /* The client was killed on the host: the service cancelled the
         * command (pinhole-execd does when its worker goes away). */
        kill_container(ds);
    } else {
        o->timed_out = wait_for_the_rest(ds, caps, deadline);
    }
    close(pidfd);
    ph_capture_drain(caps, 2, ph_monotonic_ms() + PIPE_GRACE_MS);
    for (int i = 0; i < 2; i++)
        if (caps[i].fd >= 0)
            close(caps[i].fd);
    o->duration_ms = ph_monotonic_ms() - start;
    if (o->timed_out) {
        o->exited = false;
        o->term_signal = SIGKILL;
    } else if (WIFEXITED(ws)) {
        ph_gvisor_map_status(WEXITSTATUS(ws), o);
    } else {
        st = ph_diag_set(diag, PH_E_IO, 0, "docker exec was killed by signal %d",
                         WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
    }
out:
    ph_oci_run_argv_free(hexv);
    pthread_mutex_unlock(&ds->lock);
    return st;
}

const ph_mechanism_ops ph_mechanism_docker = {
    .id = PH_MECHANISM_DOCKER,
    .name = "docker",
    .available = docker_available,
    .create = docker_create,
    .execute = docker_execute,
    .destroy = docker_destroy,
    .detach = docker_detach,
    .recover = docker_recover,
};
