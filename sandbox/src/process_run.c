/* process_run.c - pieces every mechanism needs to run a command: capped
 * output capture, a PATH search over the built environment (never the
 * service's), a monotonic clock, and a session sweep for the kill. */
#include "sandbox-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <time.h>
#include <unistd.h>

bool ph_capture_read(ph_capture *c)
{
    uint8_t buf[16384];
    for (;;) {
        ssize_t n = read(c->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return true;
        if (n <= 0)
            return false;
        ph_output *o = c->dst;
        size_t room = c->cap > o->len ? c->cap - o->len : 0;
        size_t keep = (size_t)n < room ? (size_t)n : room;
        if (keep > 0) {
            if (o->data == NULL) {
                /* Allocate the cap lazily but only up to it: every growable
                 * buffer has a cap, this one is the spec's output_bytes. */
                size_t want = c->cap < 65536 ? c->cap : 65536;
                if (want < keep)
                    want = keep;
                o->data = malloc(want + 1);
                if (o->data == NULL)
                    return false;
                c->alloc = want;
            }
            if (o->len + keep > c->alloc) {
                size_t want = c->alloc * 2;
                if (want < o->len + keep)
                    want = o->len + keep;
                if (want > c->cap)
                    want = c->cap;
                uint8_t *nd = realloc(o->data, want + 1);
                if (nd == NULL)
                    return false;
                o->data = nd;
                c->alloc = want;
            }
            memcpy(o->data + o->len, buf, keep);
            o->len += keep;
            if (c->on_output != NULL)
                c->on_output(c->on_output_ctx, c->stream, buf, keep);
        }
        if ((size_t)n > keep)
            o->truncated = true;
    }
}

void ph_capture_stream(ph_capture caps[static 2], const ph_mech_exec_args *a)
{
    for (int i = 0; i < 2; i++) {
        caps[i].on_output = a->on_output;
        caps[i].on_output_ctx = a->on_output_ctx;
        caps[i].stream = i == 0 ? PH_STREAM_STDOUT : PH_STREAM_STDERR;
    }
}

void ph_capture_drain(ph_capture *caps, size_t n, int64_t deadline_ms)
{
    for (;;) {
        struct pollfd pfd[4];
        size_t map[4], k = 0;
        for (size_t i = 0; i < n && k < 4; i++) {
            if (caps[i].fd >= 0) {
                pfd[k].fd = caps[i].fd;
                pfd[k].events = POLLIN;
                map[k++] = i;
            }
        }
        if (k == 0)
            return;
        int64_t left = deadline_ms - ph_monotonic_ms();
        if (left <= 0)
            return;
        int rc = poll(pfd, k, (int)(left > 1000 ? 1000 : left));
        if (rc < 0 && errno != EINTR)
            return;
        for (size_t m = 0; rc > 0 && m < k; m++) {
            if (pfd[m].revents == 0)
                continue;
            ph_capture *c = &caps[map[m]];
            if (!ph_capture_read(c)) {
                close(c->fd);
                c->fd = -1;
            }
        }
    }
}

ph_status ph_output_finish(ph_output *dst)
{
    if (dst->data == NULL) {
        dst->data = malloc(1);
        if (dst->data == NULL)
            return PH_E_NOMEM;
        dst->len = 0;
    }
    dst->data[dst->len] = '\0';
    return PH_OK;
}

#define LEFTOVER_POLL_FIRST_MS 100
#define LEFTOVER_POLL_LAST_MS 2000

ph_leftovers ph_wait_for_leftovers(ph_leftovers (*ask)(void *ctx), void *ctx,
                                   ph_capture caps[static 2], int64_t deadline_ms)
{
    for (int64_t interval = LEFTOVER_POLL_FIRST_MS;;) {
        ph_leftovers left = ask(ctx);
        int64_t now = ph_monotonic_ms();
        if (left != PH_LEFT_SOME || now >= deadline_ms)
            return left;
        int64_t next = now + interval < deadline_ms ? now + interval : deadline_ms;
        ph_capture_drain(caps, 2, next);
        int64_t wait = next - ph_monotonic_ms();
        if (wait > 0)
            (void)poll(NULL, 0, (int)wait); /* the pipes may have closed early */
        if (interval < LEFTOVER_POLL_LAST_MS)
            interval = interval * 2 < LEFTOVER_POLL_LAST_MS ? interval * 2 : LEFTOVER_POLL_LAST_MS;
    }
}

void ph_exec_in_path(const char *argv0, char *const argv[], char *const envp[])
{
    if (strchr(argv0, '/') != NULL) {
        execve(argv0, argv, envp);
        return;
    }
    const char *path = "/usr/bin:/bin";
    for (size_t i = 0; envp[i]; i++)
        if (strncmp(envp[i], "PATH=", 5) == 0)
            path = envp[i] + 5;
    int saw_eacces = 0;
    char full[4096];
    const char *p = path;
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        size_t al = strlen(argv0);
        if (dl == 0) {
            /* An empty PATH element means the current directory: not in a
             * PATH the platform synthesizes; skip it. */
        } else if (dl + al + 2 <= sizeof full) {
            memcpy(full, p, dl);
            full[dl] = '/';
            memcpy(full + dl + 1, argv0, al + 1);
            execve(full, argv, envp);
            if (errno == EACCES)
                saw_eacces = 1;
        }
        if (!colon)
            break;
        p = colon + 1;
    }
    errno = saw_eacces ? EACCES : ENOENT;
}

static bool in_session(long pid, void *ctx)
{
    return getsid((pid_t)pid) == *(const pid_t *)ctx;
}

void ph_kill_session(pid_t sid)
{
    /* Repeat: a process forking while we sweep can add a member. */
    for (int round = 0; round < 8; round++) {
        DIR *d = opendir("/proc");
        if (d == NULL)
            return;
        int killed = 0;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *end;
            long pid = strtol(de->d_name, &end, 10);
            if (*end != '\0' || pid <= 0)
                continue;
            if (getsid((pid_t)pid) == sid && /* cheap; checked again past the pidfd */
                ph_signal_if((pid_t)pid, SIGKILL, in_session, &sid) == PH_OK)
                killed++;
        }
        closedir(d);
        if (killed == 0)
            return;
    }
}

/* Whether the NUL-separated argv in buf[0..len) holds flag=value or the
 * pair flag, value. */
static bool argv_has(const char *buf, size_t len, const char *flag, const char *value)
{
    size_t fl = strlen(flag), vl = strlen(value);
    bool after_flag = false;
    for (size_t at = 0; at < len;) {
        const char *arg = buf + at;
        size_t n = strnlen(arg, len - at);
        if (after_flag && n == vl && memcmp(arg, value, vl) == 0)
            return true;
        if (n == fl + 1 + vl && memcmp(arg, flag, fl) == 0 && arg[fl] == '=' &&
            memcmp(arg + fl + 1, value, vl) == 0)
            return true;
        after_flag = n == fl && memcmp(arg, flag, fl) == 0;
        at += n + 1;
    }
    return false;
}

/* pid as a pidfd in *pfd when its /proc entry passes match(ctx): the pidfd
 * is opened first, so a signal sent through it reaches the process that was
 * checked, never one that took its pid since (the checks read /proc/<pid>,
 * which is that process for as long as it is alive: a signal that goes
 * through proves it was). PH_E_NOT_FOUND when it does not match or is gone,
 * PH_E_IO when no pidfd can be opened (descriptors exhausted). */
static ph_status pidfd_if(long pid, bool (*match)(long pid, void *ctx), void *ctx, int *pfd)
{
    *pfd = pidfd_open((pid_t)pid, 0);
    if (*pfd < 0)
        return errno == ESRCH ? PH_E_NOT_FOUND : PH_E_IO;
    if (!match(pid, ctx)) {
        close(*pfd);
        *pfd = -1;
        return PH_E_NOT_FOUND;
    }
    return PH_OK;
}

ph_status ph_signal_if(pid_t pid, int sig, bool (*match)(long pid, void *ctx), void *ctx)
{
    int pfd;
    ph_status st = pidfd_if(pid, match, ctx, &pfd);
    if (st != PH_OK)
        return st;
    if (pidfd_send_signal(pfd, sig, NULL, 0) != 0)
        st = errno == ESRCH ? PH_E_NOT_FOUND : PH_E_IO;
    close(pfd);
    return st;
}

typedef struct child_of {
    pid_t tid;
    bool *leader;
} child_of;

/* pid listed in /proc/self/task/<tid>/children (what that thread of this
 * process forked and has not reaped). */
static bool is_child_of(long pid, void *ctx)
{
    const child_of *c = ctx;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)c->tid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    long child;
    bool found = false;
    while (!found && fscanf(f, "%ld", &child) == 1)
        found = child == pid;
    fclose(f);
    if (found && c->leader)
        *c->leader = getsid((pid_t)pid) == (pid_t)pid;
    return found;
}

ph_status ph_signal_child(pid_t tid, pid_t pid, int sig, bool *leader)
{
    if (leader)
        *leader = false;
    child_of c = {tid, leader};
    return ph_signal_if(pid, sig, is_child_of, &c);
}

/* Kills every process (but 1 and this one) that match(ctx) accepts, in
 * rounds while it finds some; returns how many it killed. */
static size_t kill_matching(bool (*match)(long pid, void *ctx), void *ctx)
{
    size_t total = 0;
    for (int round = 0; round < 16; round++) {
        DIR *d = opendir("/proc");
        if (d == NULL)
            return total;
        size_t killed = 0;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *end;
            long pid = strtol(de->d_name, &end, 10);
            if (*end != '\0' || pid <= 1 || pid == (long)getpid())
                continue;
            int pfd;
            if (pidfd_if(pid, match, ctx, &pfd) != PH_OK)
                continue;
            if (pidfd_send_signal(pfd, SIGKILL, NULL, 0) == 0) {
                killed++;
                /* Readable once it has exited: the next round does not
                 * find it dying. */
                struct pollfd p = {.fd = pfd, .events = POLLIN};
                (void)poll(&p, 1, 1000);
            }
            close(pfd);
        }
        closedir(d);
        total += killed;
        if (killed == 0)
            break;
    }
    return total;
}

typedef struct by_argument {
    const char *exe, *flag, *value;
} by_argument;

static bool has_argument(long pid, void *ctx)
{
    const by_argument *b = ctx;
    char path[64], target[4096];
    snprintf(path, sizeof path, "/proc/%ld/exe", pid);
    ssize_t tl = readlink(path, target, sizeof target - 1);
    if (tl <= 0)
        return false;
    target[tl] = '\0';
    if (strcmp(target, b->exe) != 0)
        return false;
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    static _Thread_local char args[65536];
    ssize_t n = read(fd, args, sizeof args);
    close(fd);
    return n > 0 && argv_has(args, (size_t)n, b->flag, b->value);
}

size_t ph_kill_by_argument(const char *exe, const char *flag, const char *value)
{
    by_argument b = {exe, flag, value};
    return kill_matching(has_argument, &b);
}

/* A live process (not a zombie: it holds nothing) with uid as any of its
 * real, effective, saved or filesystem uid. */
static bool runs_as(long pid, void *ctx)
{
    uid_t uid = *(const uid_t *)ctx;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    bool live = true, match = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned u[4];
        if (strncmp(line, "State:", 6) == 0)
            live = strchr(line, 'Z') == NULL && strchr(line, 'X') == NULL;
        else if (sscanf(line, "Uid: %u %u %u %u", &u[0], &u[1], &u[2], &u[3]) == 4)
            match = u[0] == uid || u[1] == uid || u[2] == uid || u[3] == uid;
    }
    fclose(f);
    return live && match;
}

bool ph_kill_uid(uid_t uid)
{
    (void)kill_matching(runs_as, &uid);
    DIR *d = opendir("/proc");
    if (d == NULL)
        return false;
    bool none = true;
    struct dirent *de;
    while (none && (de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end == '\0' && pid > 1 && runs_as(pid, &uid))
            none = false;
    }
    closedir(d);
    return none;
}
