/* mechanism_fake.c - decision 13: a real adapter without isolation.
 *
 * Each command runs as the init of a new PID namespace with a private mount
 * namespace, so:
 *  - the whole process tree, daemonized children included, dies when the
 *    service kills that init at the deadline (the kernel kills every member
 *    of a PID namespace with its init) or when the command exits;
 *  - the workspace is bind-mounted at the constant /workspace of a root
 *    assembled on a tmpfs from bind mounts of the host's top-level
 *    directories (nothing is created on the host's /), with a private /tmp
 *    and a fresh /proc.
 * This is not isolation: the host's directories are all there, writable, as
 * the service's user. It exists so the contract suite runs without a
 * runtime, and the startup check refuses it in production.
 *
 * Where namespaces cannot be made (no privilege), the fallback is a plain
 * process in its own session: the working directory is the host workspace
 * directory with PWD=/workspace/..., a command that asks the kernel for its
 * cwd sees the host path, and the kill is the process group plus a sweep of
 * the session (a child that calls setsid() itself escapes the sweep). */
#include "sandbox-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

bool ph_fake_force_plain = false;

typedef struct fake_state {
    char *workspace_dir; /* host */
    char *root_dir;      /* host: tmpfs mount point for the assembled root */
    bool namespaces;
} fake_state;

static ph_status fake_available(ph_diag *diag)
{
    (void)diag;
    return PH_OK; /* runs anywhere: namespaces when possible, else plain */
}

static bool namespaces_work(void)
{
    static int cached = -1;
    if (cached >= 0)
        return cached == 1;
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        bool ok = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cached = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0;
    return cached == 1;
}

static ph_status fake_create(const ph_mech_create_args *args, void **state, ph_diag *diag)
{
    fake_state *fs = calloc(1, sizeof *fs);
    if (fs == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    fs->workspace_dir = strdup(args->workspace_dir);
    if (asprintf(&fs->root_dir, "%s/root", args->env_state_dir) < 0)
        fs->root_dir = NULL;
    if (fs->workspace_dir == NULL || fs->root_dir == NULL) {
        void *p = fs;
        free(fs->workspace_dir);
        free(fs->root_dir);
        free(p);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    fs->namespaces = !ph_fake_force_plain && namespaces_work();
    if (fs->namespaces && mkdirat(args->env_fd, "root", 0700) != 0 && errno != EEXIST)
        fs->namespaces = false;
    *state = fs;
    return PH_OK;
}

static void fake_destroy(void **state)
{
    if (state == NULL || *state == NULL)
        return;
    fake_state *fs = *state;
    /* <env>/root goes with the environment's directory (environment.c
     * removes it through the directory's descriptor). */
    free(fs->workspace_dir);
    free(fs->root_dir);
    free(fs);
    *state = NULL;
}

/* ---- in the child: everything below runs between clone and exec ---- */

static void child_fail(int err_fd, const char *step)
{
    char msg[256];
    int n = snprintf(msg, sizeof msg, "%s: %s", step, strerror(errno));
    if (n > 0)
        (void)!write(err_fd, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(126);
}

static void reset_signals(void)
{
    /* Ignored dispositions survive exec: a service ignoring SIGPIPE must not
     * hand that to the command. */
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static int bind_top_level(const char *root)
{
    DIR *d = opendir("/");
    if (d == NULL)
        return -1;
    char dst[4096];
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "tmp") == 0 ||
            strcmp(n, "proc") == 0 || strcmp(n, "workspace") == 0)
            continue;
        char src[300];
        snprintf(src, sizeof src, "/%s", n);
        snprintf(dst, sizeof dst, "%s/%s", root, n);
        struct stat sb;
        if (lstat(src, &sb) != 0)
            continue;
        if (S_ISLNK(sb.st_mode)) {
            char target[4096];
            ssize_t tl = readlink(src, target, sizeof target - 1);
            if (tl < 0)
                continue;
            target[tl] = '\0';
            if (symlink(target, dst) != 0) {
                closedir(d);
                return -1;
            }
        } else if (S_ISDIR(sb.st_mode)) {
            if (mkdir(dst, 0755) != 0 || mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0) {
                closedir(d);
                return -1;
            }
        }
    }
    closedir(d);
    return 0;
}

static void assemble_root(const fake_state *fs, int err_fd)
{
    char p[4096];
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        child_fail(err_fd, "making mounts private");
    if (mount("tmpfs", fs->root_dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") != 0)
        child_fail(err_fd, "mounting the root tmpfs");
    if (bind_top_level(fs->root_dir) != 0)
        child_fail(err_fd, "binding the host directories");
    snprintf(p, sizeof p, "%s/tmp", fs->root_dir);
    if (mkdir(p, 01777) != 0 || mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        child_fail(err_fd, "mounting /tmp");
    snprintf(p, sizeof p, "%s/proc", fs->root_dir);
    if (mkdir(p, 0555) != 0)
        child_fail(err_fd, "creating /proc");
    if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 &&
        mount("/proc", p, NULL, MS_BIND | MS_REC, NULL) != 0)
        child_fail(err_fd, "mounting /proc");
    snprintf(p, sizeof p, "%s%s", fs->root_dir, PH_SANDBOX_WORKSPACE_PATH);
    if (mkdir(p, 0755) != 0 || mount(fs->workspace_dir, p, NULL, MS_BIND, NULL) != 0)
        child_fail(err_fd, "binding the workspace");
    if (chroot(fs->root_dir) != 0 || chdir("/") != 0)
        child_fail(err_fd, "entering the root");
}

static void run_command(const ph_mech_exec_args *a, int out_fd, int err_fd, bool in_namespace)
{
    if (dup2(a->stdin_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        _exit(126);
    if (in_namespace) {
        char cwd[PH_WS_PATH_MAX + 16];
        snprintf(cwd, sizeof cwd, "%s/%s", PH_SANDBOX_WORKSPACE_PATH, a->cwd);
        if (chdir(cwd) != 0) {
            dprintf(2, "pinhole: cannot enter the working directory: %s\n", strerror(errno));
            _exit(126);
        }
    } else if (fchdir(a->cwd_fd) != 0) {
        dprintf(2, "pinhole: cannot enter the working directory: %s\n", strerror(errno));
        _exit(126);
    }
    /* Nothing of the service's descriptors reaches the command. */
    close_range(3, ~0U, 0);
    reset_signals();
    ph_exec_in_path(a->argv[0], a->argv, a->envp);
    int err = errno;
    dprintf(2, "pinhole: %s: %s\n", a->argv[0],
            err == ENOENT ? "command not found" : strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

/* The init of the PID namespace: starts the command, reaps everything, hands
 * the command's wait status to the service, and exits (which kills any
 * process the command left behind). */
static void namespace_init(const fake_state *fs, const ph_mech_exec_args *a, int out_fd,
                           int err_fd, int setup_fd, int status_fd)
{
    assemble_root(fs, setup_fd);
    pid_t cmd = fork();
    if (cmd < 0)
        child_fail(setup_fd, "fork");
    if (cmd == 0)
        run_command(a, out_fd, err_fd, true);
    close(out_fd);
    close(err_fd);
    for (;;) {
        int status;
        pid_t w = waitpid(-1, &status, 0);
        if (w == cmd) {
            (void)!write(status_fd, &status, sizeof status);
            _exit(0);
        }
        if (w < 0 && errno != EINTR)
            _exit(1);
    }
}

/* ---- in the service ---- */

static void kill_tree(const fake_state *fs, pid_t pid)
{
    if (fs->namespaces) {
        kill(pid, SIGKILL); /* init: the kernel kills the namespace */
    } else {
        kill(-pid, SIGKILL);
        ph_kill_session(pid);
    }
}

static ph_status fake_execute(void *state, const ph_mech_exec_args *a, ph_mech_outcome *o,
                              ph_diag *diag)
{
    fake_state *fs = state;
    int out_p[2], err_p[2], setup_p[2] = {-1, -1}, status_p[2] = {-1, -1};
    if (pipe2(out_p, O_CLOEXEC) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "pipe: %s", strerror(errno));
    if (pipe2(err_p, O_CLOEXEC) != 0 || pipe2(setup_p, O_CLOEXEC) != 0 ||
        pipe2(status_p, O_CLOEXEC) != 0) {
        int saved = errno;
        int fds[] = {out_p[0], out_p[1], err_p[0], err_p[1], setup_p[0], setup_p[1]};
        for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        return ph_diag_set(diag, PH_E_IO, 0, "pipe: %s", strerror(saved));
    }
    int64_t start = ph_monotonic_ms();
    pid_t pid;
    if (fs->namespaces)
        pid = (pid_t)syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    else
        pid = fork();
    if (pid == 0) {
        close(out_p[0]);
        close(err_p[0]);
        close(setup_p[0]);
        close(status_p[0]);
        if (setsid() < 0)
            child_fail(setup_p[1], "setsid");
        if (fs->namespaces)
            namespace_init(fs, a, out_p[1], err_p[1], setup_p[1], status_p[1]);
        run_command(a, out_p[1], err_p[1], false);
    }
    int saved = errno;
    close(out_p[1]);
    close(err_p[1]);
    close(setup_p[1]);
    close(status_p[1]);
    if (pid < 0) {
        close(out_p[0]);
        close(err_p[0]);
        close(setup_p[0]);
        close(status_p[0]);
        return ph_diag_set(diag, PH_E_IO, 0, "starting the command: %s", strerror(saved));
    }
    fcntl(out_p[0], F_SETFL, O_NONBLOCK);
    fcntl(err_p[0], F_SETFL, O_NONBLOCK);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

    ph_capture caps[2] = {{.fd = out_p[0], .dst = &o->out, .cap = a->output_cap},
                          {.fd = err_p[0], .dst = &o->err, .cap = a->output_cap}};
    int64_t deadline = start + a->timeout_ms;
    bool exited = false;
    int wstatus = 0;
    while (!exited) {
        int64_t now = ph_monotonic_ms();
        if (now >= deadline && !o->timed_out) {
            o->timed_out = true;
            kill_tree(fs, pid);
        }
        struct pollfd pfd[3];
        nfds_t n = 0;
        for (int i = 0; i < 2; i++) {
            if (caps[i].fd >= 0) {
                pfd[n].fd = caps[i].fd;
                pfd[n++].events = POLLIN;
            }
        }
        if (pidfd >= 0) {
            pfd[n].fd = pidfd;
            pfd[n++].events = POLLIN;
        }
        int wait_ms = o->timed_out ? 50 : (int)(deadline - now > 50 ? 50 : deadline - now);
        if (pidfd >= 0 && !o->timed_out)
            wait_ms = (int)(deadline - now > 1000 ? 1000 : deadline - now);
        if (wait_ms < 0)
            wait_ms = 0;
        (void)poll(pfd, n, wait_ms);
        for (int i = 0; i < 2; i++) {
            if (caps[i].fd >= 0 && !ph_capture_read(&caps[i])) {
                close(caps[i].fd);
                caps[i].fd = -1;
            }
        }
        pid_t w = waitpid(pid, &wstatus, WNOHANG);
        if (w == pid)
            exited = true;
    }
    o->duration_ms = ph_monotonic_ms() - start;
    if (pidfd >= 0)
        close(pidfd);
    if (!fs->namespaces)
        kill_tree(fs, pid); /* leftovers of a command that exited */
    /* After the tree is gone the pipes reach end of file; the grace bounds a
     * fallback-mode escapee that still holds one. */
    ph_capture_drain(caps, 2, ph_monotonic_ms() + 2000);
    for (int i = 0; i < 2; i++)
        if (caps[i].fd >= 0)
            close(caps[i].fd);

    char setup_err[256];
    ssize_t sl = read(setup_p[0], setup_err, sizeof setup_err - 1);
    close(setup_p[0]);
    int cmd_status = 0;
    ssize_t got = fs->namespaces ? read(status_p[0], &cmd_status, sizeof cmd_status) : -1;
    close(status_p[0]);
    if (sl > 0) {
        setup_err[sl] = '\0';
        return ph_diag_set(diag, PH_E_IO, 0, "fake mechanism could not start the command: %s",
                           setup_err);
    }
    if (fs->namespaces)
        wstatus = got == (ssize_t)sizeof cmd_status ? cmd_status : (SIGKILL & 0x7f);
    if (WIFEXITED(wstatus)) {
        o->exited = true;
        o->exit_code = WEXITSTATUS(wstatus);
    } else if (WIFSIGNALED(wstatus)) {
        o->term_signal = WTERMSIG(wstatus);
    }
    return PH_OK;
}

static void fake_detach(void **state)
{
    if (state == NULL || *state == NULL)
        return;
    fake_state *fs = *state;
    free(fs->workspace_dir);
    free(fs->root_dir);
    free(fs);
    *state = NULL;
}

const ph_mechanism_ops ph_mechanism_fake = {
    .id = PH_MECHANISM_FAKE,
    .name = "fake",
    .available = fake_available,
    .create = fake_create,
    .execute = fake_execute,
    .destroy = fake_destroy,
    .detach = fake_detach,
};
