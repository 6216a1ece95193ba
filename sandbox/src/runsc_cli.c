/* runsc_cli.c - spawning and waiting for runsc invocations.
 *
 * fork + execve rather than posix_spawn because the child must close every
 * inherited descriptor above 2 (close_range) before exec: a service fd
 * leaking into runsc would leak into its long-lived sandbox processes.
 */
#include "runsc_cli-int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "sandbox-int.h"

/* The only environment runsc ever sees. */
static char *const runsc_env[] = {
    (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};

static bool is_executable(const char *path)
{
    return path[0] == '/' && access(path, X_OK) == 0;
}

ph_status ph_runsc_locate(ph_runsc *rt, ph_diag *diag)
{
    static const char *const candidates[] = {"/usr/bin/runsc", "/usr/sbin/runsc",
                                             "/usr/local/bin/runsc"};
    const char *env = getenv("PINHOLE_RUNSC");
    const char *found = NULL;
    if (env != NULL && env[0] != '\0') {
        if (!is_executable(env))
            return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                               "PINHOLE_RUNSC is not an absolute path to an executable");
        found = env;
    }
    for (size_t i = 0; found == NULL && i < sizeof candidates / sizeof candidates[0]; i++)
        if (is_executable(candidates[i]))
            found = candidates[i];
    if (found == NULL)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "runsc (gVisor) is not installed: install the runsc package "
                           "(scripts/deps.sh) or set PINHOLE_RUNSC");
    if (strlen(found) >= sizeof rt->binary)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "runsc path too long");
    memcpy(rt->binary, found, strlen(found) + 1);
    rt->create_ruid = 0;
    rt->create_rgid = 0;
    rt->create_path[0] = '\0';
    const char *dbg = getenv("PINHOLE_RUNSC_DEBUG_LOG");
    rt->debug_log[0] = '\0';
    if (dbg != NULL && dbg[0] == '/' && strlen(dbg) < PH_RUNSC_PATH_MAX)
        snprintf(rt->debug_log, sizeof rt->debug_log, "--debug-log=%s/", dbg);
    return PH_OK;
}

size_t ph_runsc_argv(const ph_runsc *rt, bool host_uds, const char *const *tail,
                     const char **argv, size_t cap)
{
    size_t n = 0;
    bool debug = rt->debug_log[0] != '\0';
    const char *head[] = {rt->binary,
                          "--root",
                          rt->root,
                          "--platform=ptrace",
                          "--network=none",
                          host_uds ? "--host-uds=open" : NULL,
                          debug ? "--debug" : NULL,
                          debug ? rt->debug_log : NULL};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) {
        if (head[i] == NULL)
            continue;
        if (n + 1 >= cap)
            return 0;
        argv[n++] = head[i];
    }
    for (size_t i = 0; tail[i] != NULL; i++) {
        if (n + 1 >= cap)
            return 0;
        argv[n++] = tail[i];
    }
    argv[n] = NULL;
    return n;
}

/* In the child: put fd (or /dev/null) on target. Async-signal-safe only. */
static int child_fd(int fd, int target, int null_flags)
{
    if (fd < 0) {
        fd = open("/dev/null", null_flags | O_CLOEXEC);
        if (fd < 0)
            return -1;
    }
    if (fd == target)
        return fcntl(fd, F_SETFD, 0);
    return dup2(fd, target) < 0 ? -1 : 0;
}

ph_status ph_runsc_spawn(const ph_runsc *rt, bool host_uds, const char *const *tail, int fd_in,
                         int fd_out, int fd_err, pid_t *pid, int *pidfd, ph_diag *diag)
{
    const char *argv[PH_RUNSC_ARGV_MAX];
    if (ph_runsc_argv(rt, host_uds, tail, argv, PH_RUNSC_ARGV_MAX) == 0)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "runsc argv too long");
    return ph_cli_spawn(argv, runsc_env, fd_in, fd_out, fd_err, pid, pidfd, diag);
}

/* ruid: 0, or the real uid and rgid the real gid the child runs with, with
 * no supplementary groups (effective and saved ids unchanged: the caller's
 * 0). */
static ph_status cli_spawn(const char *const *argv, char *const *envp, uid_t ruid, gid_t rgid,
                           int fd_in,
                           int fd_out, int fd_err, pid_t *pid, int *pidfd, ph_diag *diag);

ph_status ph_cli_spawn(const char *const *argv, char *const *envp, int fd_in, int fd_out,
                       int fd_err, pid_t *pid, int *pidfd, ph_diag *diag)
{
    return cli_spawn(argv, envp, 0, 0, fd_in, fd_out, fd_err, pid, pidfd, diag);
}

static ph_status cli_spawn(const char *const *argv, char *const *envp, uid_t ruid, gid_t rgid,
                           int fd_in, int fd_out, int fd_err, pid_t *pid, int *pidfd,
                           ph_diag *diag)
{
    size_t argc = 0;
    while (argv[argc] != NULL)
        argc++;
    if (argc == 0 || argc >= PH_CLI_ARGV_MAX)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "argv empty or too long");
    /* Descriptors 0-2 of the child are set in order; a source fd that is
     * itself 0-2 would be clobbered by an earlier dup2. Move them up first. */
    int fds[3] = {fd_in, fd_out, fd_err};
    int moved[3] = {-1, -1, -1};
    for (int i = 0; i < 3; i++) {
        if (fds[i] >= 0 && fds[i] <= 2) {
            moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
            if (moved[i] < 0) {
                for (int j = 0; j < i; j++)
                    if (moved[j] >= 0)
                        close(moved[j]);
                return ph_diag_set(diag, PH_E_IO, 0, "dup: %s", strerror(errno));
            }
            fds[i] = moved[i];
        }
    }
    /* execve wants char *const[]; the strings are never written. Copying the
     * pointers avoids a qualifier-dropping cast. */
    char *exec_argv[PH_CLI_ARGV_MAX];
    memcpy(exec_argv, argv, (argc + 1) * sizeof argv[0]);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        /* A tool dies with the service (SIGKILL included): what it was
         * making is then the next start's recovery to undo, and nothing
         * may still be making it while that runs. Its own children (a
         * sandbox runsc create starts) are not affected. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        /* The runsc client must not die with a signal meant for the service's
         * process group, and must start with default signal dispositions. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (setsid() < 0 || child_fd(fds[0], 0, O_RDONLY) != 0 || child_fd(fds[1], 1, O_WRONLY) != 0 ||
            child_fd(fds[2], 2, O_WRONLY) != 0)
            _exit(127);
        /* The raw calls: this thread only (the child has no other), no
         * glibc broadcast to threads that are not there. runsc maps the
         * sandbox's uid and gid to its real uid and gid: both, or the
         * sandbox would run in root's group. Groups first, while the
         * effective uid still holds CAP_SETGID (it keeps it: only the real
         * ids change). */
        if (ruid != 0 && (syscall(SYS_setgroups, 0, NULL) != 0 ||
                          syscall(SYS_setresgid, rgid, (gid_t)-1, (gid_t)-1) != 0 ||
                          syscall(SYS_setresuid, ruid, (uid_t)-1, (uid_t)-1) != 0))
            _exit(127);
        close_range(3, ~0U, 0);
        execve(exec_argv[0], exec_argv, envp);
        _exit(127);
    }
    int saved = errno;
    for (int i = 0; i < 3; i++)
        if (moved[i] >= 0)
            close(moved[i]);
    if (child < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "fork: %s", strerror(saved));
    int pfd = pidfd_open(child, 0);
    if (pfd < 0) {
        saved = errno;
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return ph_diag_set(diag, PH_E_IO, 0, "pidfd_open: %s", strerror(saved));
    }
    *pid = child;
    *pidfd = pfd;
    return PH_OK;
}

ph_status ph_runsc_wait(pid_t pid, int pidfd, int64_t deadline_ms, int *wstatus)
{
    for (;;) {
        int timeout = -1;
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - ph_monotonic_ms();
            if (left <= 0)
                left = 0;
            timeout = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int n = poll(&p, 1, timeout);
        if (n < 0 && errno != EINTR)
            return PH_E_IO;
        if (n > 0) {
            while (waitpid(pid, wstatus, 0) < 0) {
                if (errno != EINTR)
                    return PH_E_IO;
            }
            return PH_OK;
        }
        if (n == 0 && deadline_ms >= 0 && ph_monotonic_ms() >= deadline_ms)
            return PH_E_TIMEOUT;
    }
}

static void read_back(int fd, char *buf, size_t cap)
{
    if (buf == NULL || cap == 0)
        return;
    ssize_t n = pread(fd, buf, cap - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
}

static ph_status cli_run(const char *const *argv, char *const *envp, uid_t ruid, gid_t rgid,
                         int64_t timeout_ms, char *stdout_buf, size_t stdout_cap,
                         char *stderr_buf, size_t stderr_cap, ph_diag *diag);

ph_status ph_runsc_run(const ph_runsc *rt, bool host_uds, const char *const *tail,
                       int64_t timeout_ms, char *stdout_buf, size_t stdout_cap, char *stderr_buf,
                       size_t stderr_cap, ph_diag *diag)
{
    const char *argv[PH_RUNSC_ARGV_MAX];
    if (ph_runsc_argv(rt, host_uds, tail, argv, PH_RUNSC_ARGV_MAX) == 0)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "runsc argv too long");
    char *const *envp = runsc_env;
    uid_t ruid = 0;
    gid_t rgid = 0;
    char path_entry[PH_RUNSC_PATH_MAX + 80];
    char *create_env[] = {path_entry, NULL};
    if (rt->create_ruid != 0 && strcmp(tail[0], "create") == 0) {
        /* runsc_env's PATH with the directory of newuidmap/newgidmap first. */
        if (snprintf(path_entry, sizeof path_entry, "PATH=%s:%s", rt->create_path,
                     runsc_env[0] + 5) >= (int)sizeof path_entry)
            return ph_diag_set(diag, PH_E_LIMIT, 0, "runsc create: PATH too long");
        envp = create_env;
        ruid = rt->create_ruid;
        rgid = rt->create_rgid;
    }
    ph_status st = cli_run(argv, envp, ruid, rgid, timeout_ms, stdout_buf, stdout_cap, stderr_buf,
                           stderr_cap, diag);
    if (st != PH_OK && diag != NULL) {
        /* Name the subcommand, not the binary's host path. */
        const char *sub = tail[0] != NULL ? tail[0] : "?";
        char msg[PH_DIAG_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "%s", diag->message);
        const char *rest = strchr(msg, ' ');
        ph_diag_set(diag, st, 0, "runsc %s%s", sub, rest ? rest : "");
    }
    return st;
}

ph_status ph_cli_run(const char *const *argv, char *const *envp, int64_t timeout_ms,
                     char *stdout_buf, size_t stdout_cap, char *stderr_buf, size_t stderr_cap,
                     ph_diag *diag)
{
    return cli_run(argv, envp, 0, 0, timeout_ms, stdout_buf, stdout_cap, stderr_buf, stderr_cap,
                   diag);
}

static ph_status cli_run(const char *const *argv, char *const *envp, uid_t ruid, gid_t rgid,
                         int64_t timeout_ms, char *stdout_buf, size_t stdout_cap,
                         char *stderr_buf, size_t stderr_cap, ph_diag *diag)
{
    /* Output goes to memfds, not pipes: `runsc create` leaves a sandbox
     * process behind that inherits them, and a pipe would never reach end
     * of file. What runsc wrote is read once it has exited. */
    int errfd = memfd_create("runsc-stderr", MFD_CLOEXEC);
    int outfd = stdout_buf != NULL ? memfd_create("runsc-stdout", MFD_CLOEXEC) : -1;
    if (errfd < 0 || (stdout_buf != NULL && outfd < 0)) {
        int saved = errno;
        if (errfd >= 0)
            close(errfd);
        return ph_diag_set(diag, PH_E_IO, 0, "memfd_create: %s", strerror(saved));
    }
    pid_t pid;
    int pidfd;
    ph_status st = cli_spawn(argv, envp, ruid, rgid, -1, outfd, errfd, &pid, &pidfd, diag);
    if (st != PH_OK) {
        close(errfd);
        if (outfd >= 0)
            close(outfd);
        return st;
    }
    int ws = 0;
    st = ph_runsc_wait(pid, pidfd, ph_monotonic_ms() + timeout_ms, &ws);
    if (st == PH_E_TIMEOUT) {
        kill(pid, SIGKILL);
        (void)ph_runsc_wait(pid, pidfd, -1, &ws);
    }
    close(pidfd);
    read_back(errfd, stderr_buf, stderr_cap);
    close(errfd);
    if (outfd >= 0) {
        read_back(outfd, stdout_buf, stdout_cap);
        close(outfd);
    }
    const char *sub = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (st == PH_E_TIMEOUT)
        return ph_diag_set(diag, PH_E_TIMEOUT, 0, "%s did not finish in %lld ms", sub,
                           (long long)timeout_ms);
    if (st != PH_OK)
        return ph_diag_set(diag, st, 0, "%s could not be waited for", sub);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "%s failed (%s %d)", sub,
                           WIFEXITED(ws) ? "exit" : "signal",
                           WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
    return PH_OK;
}

ph_status ph_cli_collect(pid_t pid, int pidfd, ph_capture *caps, size_t ncaps, int64_t deadline_ms,
                         int *wstatus)
{
    for (;;) {
        int64_t left = deadline_ms - ph_monotonic_ms();
        if (left <= 0)
            return PH_E_TIMEOUT;
        struct pollfd pfd[5];
        nfds_t n = 0;
        for (size_t i = 0; i < ncaps && n < 4; i++)
            if (caps[i].fd >= 0)
                pfd[n++] = (struct pollfd){.fd = caps[i].fd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
        (void)poll(pfd, n, (int)(left > 1000 ? 1000 : left));
        for (size_t i = 0; i < ncaps; i++) {
            if (caps[i].fd >= 0 && !ph_capture_read(&caps[i])) {
                close(caps[i].fd);
                caps[i].fd = -1;
            }
        }
        if (waitpid(pid, wstatus, WNOHANG) == pid)
            return PH_OK;
    }
}

ph_status ph_cli_spawn_captured(const char *const *argv, char *const *envp, int stdin_fd,
                                ph_output *out, ph_output *err, size_t cap, pid_t *pid,
                                int *pidfd, ph_capture caps[static 2], ph_diag *diag)
{
    int out_p[2], err_p[2];
    if (pipe2(out_p, O_CLOEXEC) != 0)
        return ph_diag_set(diag, PH_E_IO, 0, "pipe: %s", strerror(errno));
    if (pipe2(err_p, O_CLOEXEC) != 0) {
        int saved = errno;
        close(out_p[0]);
        close(out_p[1]);
        return ph_diag_set(diag, PH_E_IO, 0, "pipe: %s", strerror(saved));
    }
    ph_status st = ph_cli_spawn(argv, envp, stdin_fd, out_p[1], err_p[1], pid, pidfd, diag);
    close(out_p[1]);
    close(err_p[1]);
    if (st != PH_OK) {
        close(out_p[0]);
        close(err_p[0]);
        return st;
    }
    fcntl(out_p[0], F_SETFL, O_NONBLOCK);
    fcntl(err_p[0], F_SETFL, O_NONBLOCK);
    caps[0] = (ph_capture){.fd = out_p[0], .dst = out, .cap = cap};
    caps[1] = (ph_capture){.fd = err_p[0], .dst = err, .cap = cap};
    return PH_OK;
}

ph_status ph_runsc_spawn_captured(const ph_runsc *rt, bool host_uds, const char *const *tail,
                                  int stdin_fd, ph_output *out, ph_output *err, size_t cap,
                                  pid_t *pid, int *pidfd, ph_capture caps[static 2],
                                  ph_diag *diag)
{
    const char *argv[PH_RUNSC_ARGV_MAX];
    if (ph_runsc_argv(rt, host_uds, tail, argv, PH_RUNSC_ARGV_MAX) == 0)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "runsc argv too long");
    return ph_cli_spawn_captured(argv, runsc_env, stdin_fd, out, err, cap, pid, pidfd, caps, diag);
}
