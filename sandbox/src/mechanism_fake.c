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

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
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
    /* Threads may race to probe: each gets the same answer. */
    static _Atomic int cached = -1;
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

/* ---- in the child: everything below runs between clone and exec ----
 *
 * The namespaced child is made with a raw clone, which (unlike glibc's
 * fork) takes none of the locks another thread of the service may hold at
 * that moment: malloc's arenas, stdio, gettext's. Whatever was locked stays
 * locked in the child forever, so from the clone to exec (or _exit) the
 * children call only async-signal-safe functions: system calls, string
 * copies into stack buffers, no malloc, no stdio, no strerror. Errors go to
 * the service as an errno number it formats itself. The child also inherits
 * every descriptor other threads had open at the clone, their pipes
 * included; the namespace init never execs, so O_CLOEXEC does not drop
 * them, and holding another command's pipe would keep that command's
 * result waiting for this one: closing them is the child's first step. */

/* What a child writes on the setup pipe when a step fails. */
typedef struct setup_failure {
    int err;        /* errno of the failed step */
    char step[60];  /* NUL-terminated */
} setup_failure;

static size_t str_copy(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return n;
}

/* dst = a + b + c (c may be NULL); false when it does not fit. */
static bool path_join(char *dst, size_t cap, const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = c ? strlen(c) : 0;
    if (la + lb + lc + 1 > cap)
        return false;
    memcpy(dst, a, la);
    memcpy(dst + la, b, lb);
    if (c != NULL)
        memcpy(dst + la + lb, c, lc);
    dst[la + lb + lc] = '\0';
    return true;
}

static void child_fail(int setup_fd, const char *step)
{
    setup_failure f = {.err = errno};
    str_copy(f.step, sizeof f.step, step);
    (void)!write(setup_fd, &f, sizeof f);
    _exit(126);
}

/* Writes "pinhole: <a><b>\n" to stderr (b's errno text when b is NULL). */
static void child_say(const char *a, const char *b, int err)
{
    char msg[512];
    const char *tail = b != NULL ? b : strerrordesc_np(err);
    if (tail == NULL)
        tail = "unknown error";
    if (path_join(msg, sizeof msg - 1, "pinhole: ", a, tail)) {
        size_t n = strlen(msg);
        msg[n++] = '\n';
        (void)!write(2, msg, n);
    }
}

/* Closes every descriptor but the n in keep (each >= 0). */
static void close_all_but(const int *keep, size_t n)
{
    unsigned next = 0; /* lowest descriptor not yet considered */
    for (;;) {
        unsigned low = ~0U;
        for (size_t i = 0; i < n; i++)
            if ((unsigned)keep[i] >= next && (unsigned)keep[i] < low)
                low = (unsigned)keep[i];
        if (low == ~0U) {
            close_range(next, ~0U, 0);
            return;
        }
        if (low > next)
            close_range(next, low - 1, 0);
        next = low + 1;
    }
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

/* One entry of getdents64 (the kernel's layout). */
struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int bind_one(const char *root, const char *n)
{
    if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, "tmp") == 0 ||
        strcmp(n, "proc") == 0 || strcmp(n, "workspace") == 0)
        return 0;
    char src[300], dst[4096];
    if (!path_join(src, sizeof src, "/", n, NULL) || !path_join(dst, sizeof dst, root, "/", n))
        return 0;
    struct stat sb;
    if (lstat(src, &sb) != 0)
        return 0;
    if (S_ISLNK(sb.st_mode)) {
        char target[4096];
        ssize_t tl = readlink(src, target, sizeof target - 1);
        if (tl < 0)
            return 0;
        target[tl] = '\0';
        return symlink(target, dst);
    }
    if (S_ISDIR(sb.st_mode) &&
        (mkdir(dst, 0755) != 0 || mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0))
        return -1;
    return 0;
}

static int bind_top_level(const char *root)
{
    int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    _Alignas(struct linux_dirent64) char buf[8192];
    for (;;) {
        long got = syscall(SYS_getdents64, dfd, buf, sizeof buf);
        if (got < 0) {
            close(dfd);
            return -1;
        }
        if (got == 0)
            break;
        for (long off = 0; off < got;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(void *)(buf + off);
            if (bind_one(root, de->d_name) != 0) {
                close(dfd);
                return -1;
            }
            off += de->d_reclen;
        }
    }
    close(dfd);
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
    errno = ENAMETOOLONG;
    if (!path_join(p, sizeof p, fs->root_dir, "/tmp", NULL) || mkdir(p, 01777) != 0 ||
        mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
        child_fail(err_fd, "mounting /tmp");
    errno = ENAMETOOLONG;
    if (!path_join(p, sizeof p, fs->root_dir, "/proc", NULL) || mkdir(p, 0555) != 0)
        child_fail(err_fd, "creating /proc");
    if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0 &&
        mount("/proc", p, NULL, MS_BIND | MS_REC, NULL) != 0)
        child_fail(err_fd, "mounting /proc");
    errno = ENAMETOOLONG;
    if (!path_join(p, sizeof p, fs->root_dir, PH_SANDBOX_WORKSPACE_PATH, NULL) ||
        mkdir(p, 0755) != 0 || mount(fs->workspace_dir, p, NULL, MS_BIND, NULL) != 0)
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
        if (!path_join(cwd, sizeof cwd, PH_SANDBOX_WORKSPACE_PATH, "/", a->cwd) ||
            chdir(cwd) != 0) {
            child_say("cannot enter the working directory: ", NULL, errno);
            _exit(126);
        }
    } else if (fchdir(a->cwd_fd) != 0) {
        child_say("cannot enter the working directory: ", NULL, errno);
        _exit(126);
    }
    /* Nothing of the service's descriptors reaches the command. */
    close_range(3, ~0U, 0);
    reset_signals();
    ph_exec_in_path(a->argv[0], a->argv, a->envp);
    int err = errno;
    char what[300];
    path_join(what, sizeof what, a->argv[0], ": ", NULL);
    child_say(what, err == ENOENT ? "command not found" : NULL, err);
    _exit(err == ENOENT ? 127 : 126);
}

/* The init is a fork of the service that never execs, so /proc/1/environ
 * (read from the kernel's record of where the environment block was at the
 * service's exec) would show the service's startup environment to the
 * command. Zero that block in this copy of the memory; the service's own is
 * untouched. Raw syscalls and a stack buffer: this runs after a raw clone. */
static void wipe_startup_environment(void)
{
    char buf[2048];
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (p == NULL)
        return;
    /* After ")": field 3 onwards; env_start and env_end are fields 50, 51. */
    unsigned long v[2] = {0, 0};
    int field = 2;
    for (p++; *p != '\0' && field < 51;) {
        while (*p == ' ')
            p++;
        field++;
        unsigned long x = 0;
        while (*p >= '0' && *p <= '9')
            x = x * 10 + (unsigned long)(*p++ - '0');
        while (*p != '\0' && *p != ' ')
            p++;
        if (field == 50)
            v[0] = x;
        else if (field == 51)
            v[1] = x;
    }
    if (field == 51 && v[0] != 0 && v[1] > v[0])
        memset((void *)(uintptr_t)v[0], 0, v[1] - v[0]);
}

/* The init of the PID namespace: starts the command, reaps everything, hands
 * the command's wait status to the service, and exits (which kills any
 * process the command left behind). */
static void namespace_init(const fake_state *fs, const ph_mech_exec_args *a, int out_fd,
                           int err_fd, int setup_fd, int status_fd)
{
    wipe_startup_environment();
    assemble_root(fs, setup_fd);
    /* A raw clone again: glibc's fork would wait for the locks above. */
    pid_t cmd = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
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
        if (fs->namespaces) {
            const int keep[] = {a->stdin_fd, out_p[1], err_p[1], setup_p[1], status_p[1]};
            close_all_but(keep, sizeof keep / sizeof keep[0]);
        } else {
            /* fork, then exec soon: O_CLOEXEC drops everything else. */
            close(out_p[0]);
            close(err_p[0]);
            close(setup_p[0]);
            close(status_p[0]);
        }
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
    ph_capture_stream(caps, a);
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

    setup_failure sf;
    ssize_t sl = read(setup_p[0], &sf, sizeof sf);
    close(setup_p[0]);
    int cmd_status = 0;
    ssize_t got = fs->namespaces ? read(status_p[0], &cmd_status, sizeof cmd_status) : -1;
    close(status_p[0]);
    if (sl > 0) {
        sf.step[sizeof sf.step - 1] = '\0';
        return ph_diag_set(diag, PH_E_IO, 0, "fake mechanism could not start the command: %s: %s",
                           sl == (ssize_t)sizeof sf ? sf.step : "setup",
                           sl == (ssize_t)sizeof sf ? strerror(sf.err) : "short report");
    }
    if (fs->namespaces) {
        /* The command's status, else the init's own: killed at the deadline
         * (or by anyone else) it wrote nothing and its signal is the
         * answer; an init that exited without reporting lost the command. */
        if (got == (ssize_t)sizeof cmd_status)
            wstatus = cmd_status;
        else if (!WIFSIGNALED(wstatus))
            return ph_diag_set(diag, PH_E_IO, 0,
                               "fake mechanism lost the command's status (init exit %d)",
                               WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
    }
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
