/* escape_support.c - see escape_support.h. */
#include "escape_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup_probe-int.h"
#include "sandbox-int.h"

void esc_canary(char *out, size_t cap, const char *tag)
{
    uint8_t rnd[16];
    assert_int_equal(getrandom(rnd, sizeof rnd, 0), (ssize_t)sizeof rnd);
    int n = snprintf(out, cap, "canary-%s-", tag);
    assert_true(n > 0 && (size_t)n + 33 <= cap);
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(out + n + 2 * i, 3, "%02x", rnd[i]);
}

void esc_find_near(ph_sandbox_mechanism m, const char *host_path, const char *test, char *out,
                   size_t cap)
{
    if (m != PH_MECHANISM_FAKE) {
        assert_true((size_t)snprintf(out, cap, "find / %s -print 2>/dev/null;", test) < cap);
        return;
    }
    size_t o = (size_t)snprintf(out, cap, "find /");
    for (const char *p = strchr(host_path + 1, '/'); p != NULL && o < cap; p = strchr(p + 1, '/'))
        o += (size_t)snprintf(out + o, cap - o, " '%.*s'", (int)(p - host_path), host_path);
    if (o < cap)
        o += (size_t)snprintf(out + o, cap - o, " -maxdepth 2 %s -print 2>/dev/null;", test);
    assert_true(o < cap);
}

ph_execution_result *esc_sh(ph_environment *env, const char *script)
{
    return esc_sh_timed(env, script, PH_SANDBOX_UNSET);
}

ph_execution_result *esc_sh_timed(ph_environment *env, const char *script, int64_t timeout_s)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    return sbx_run_timed(env, argv, timeout_s);
}

void esc_assert_not_leaked(const ph_execution_result *r, const char *needle)
{
    if (sbx_contains(r->out.data, r->out.len, needle) ||
        sbx_contains(r->err.data, r->err.len, needle))
        fail_msg("ESCAPED: '%s' reached the sandbox. stdout: %.400s stderr: %.400s", needle,
                 (const char *)r->out.data, (const char *)r->err.data);
}

int esc_tcp_listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(fd, 16), 0);
    socklen_t len = sizeof sin;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    *port = ntohs(sin.sin_port);
    return fd;
}

int esc_unix_listener(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof sun.sun_path);
    memcpy(sun.sun_path, path, strlen(path) + 1);
    unlink(path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
    assert_int_equal(chmod(path, 0777), 0); /* reachable by any uid: only isolation stops it */
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

int esc_accepted(int listener)
{
    int n = 0;
    for (;;) {
        int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            return n;
        close(c);
        n++;
    }
}

static bool file_contains(const char *path, const char *needle)
{
    size_t len = 0;
    char *data = ph_test_read_file(path, &len);
    if (data == NULL)
        return false;
    bool found = sbx_contains(data, len, needle);
    free(data);
    return found;
}

void esc_host_traces(const sbx_fixture *f, const char *env_id, esc_traces *out)
{
    memset(out, 0, sizeof *out);
    pid_t self = getpid();
    DIR *d = opendir("/proc");
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == (long)self)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        if (file_contains(path, env_id))
            out->processes++;
    }
    closedir(d);
    char *mounts = ph_test_read_file("/proc/self/mountinfo", NULL);
    if (mounts != NULL) {
        for (char *line = strtok(mounts, "\n"); line; line = strtok(NULL, "\n"))
            if (strstr(line, env_id) != NULL)
                out->mounts++;
        free(mounts);
    }
    static const char *const controllers[] = {"memory", "pids", "cpu", "cpuacct", "cpuset",
                                              "devices", "freezer", "blkio", "systemd",
                                              "unified", ""};
    for (size_t i = 0; i < sizeof controllers / sizeof controllers[0]; i++) {
        char path[512];
        struct stat sb;
        snprintf(path, sizeof path, "/sys/fs/cgroup/%s%spinhole-%s", controllers[i],
                 controllers[i][0] ? "/" : "", env_id);
        if (stat(path, &sb) == 0)
            out->cgroups++;
    }
    char state[1024];
    struct stat sb;
    snprintf(state, sizeof state, "%s/%s", f->state_dir, env_id);
    out->state_dir = stat(state, &sb) == 0;
}

void esc_host_workspace(const sbx_fixture *f, ph_environment *env, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/workspace", f->state_dir, ph_environment_id(env));
    struct stat sb;
    if (stat(out, &sb) != 0 || !S_ISDIR(sb.st_mode))
        fail_msg("the fixture's workspace layout changed: %s is not a directory", out);
}

/* The cgroup (relative to the cgroup root) that holds docker container
 * `name`'s init for controller (v1 and hybrid) or in the unified tree (v2),
 * as the kernel reports it in /proc/<pid>/cgroup. */
static bool docker_cgroup(const ph_cgroup_probe *probe, const char *name, const char *controller,
                          char *group, size_t cap)
{
    char cmd[256], line[512];
    snprintf(cmd, sizeof cmd, "docker inspect --format '{{.State.Pid}}' '%s' 2>/dev/null", name);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return false;
    long pid = fgets(line, sizeof line, p) != NULL ? strtol(line, NULL, 10) : 0;
    if (pclose(p) != 0 || pid <= 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/cgroup", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        /* "<hierarchy id>:<controllers, comma separated>:<path>" */
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        const char *controllers = c1 + 1, *cg = c2 + 1;
        if (probe->layout == PH_CGROUP_V2) {
            found = strcmp(line, "0") == 0 && controllers[0] == '\0';
        } else {
            char list[256];
            snprintf(list, sizeof list, ",%s,", controllers);
            char want[64];
            snprintf(want, sizeof want, ",%s,", controller);
            found = strstr(list, want) != NULL;
        }
        if (found)
            snprintf(group, cap, "%s", cg[0] == '/' ? cg + 1 : cg);
    }
    fclose(f);
    return found;
}

bool esc_cgroup_read(ph_sandbox_mechanism m, const char *env_id, const char *controller,
                     const char *file, char *out, size_t cap)
{
    /* The library's own detection (v1, v2 or hybrid) says where the file is. */
    ph_cgroup_probe probe;
    char group[512], path[1024];
    if (ph_cgroup_probe_root(NULL, &probe, NULL) != PH_OK)
        return false;
    if (m == PH_MECHANISM_DOCKER) {
        char name[160];
        snprintf(name, sizeof name, "pinhole-%s", env_id);
        if (!docker_cgroup(&probe, name, controller, group, sizeof group))
            return false;
    } else {
        snprintf(group, sizeof group, "pinhole-%s", env_id);
    }
    if (ph_cgroup_file_path(&probe, NULL, controller, group, file, path, sizeof path) != 0)
        return false;
    size_t len = 0;
    char *data = ph_test_read_file(path, &len);
    if (data == NULL)
        return false;
    snprintf(out, cap, "%.*s", (int)strcspn(data, "\n"), data);
    free(data);
    return true;
}

int esc_pick_mechanism(int argc, char **argv, bool fake_allowed, ph_sandbox_mechanism *m)
{
    const char *name = argc > 1 ? argv[1] : "gvisor";
    ph_diag diag = {0};
    if (ph_sandbox_mechanism_from_name(name, m, &diag) != PH_OK) {
        fprintf(stderr, "%s\n", diag.message);
        return 2;
    }
    if (*m == PH_MECHANISM_FAKE) {
        if (fake_allowed)
            return 0;
        fprintf(stderr, "these attacks are never run without isolation (fake)\n");
        return 2;
    }
    if (ph_sandbox_mechanism_available(*m, &diag) != PH_OK) {
        printf("SKIP: mechanism %s is not available here: %s\n", name, diag.message);
        return 77;
    }
    return 0;
}

/* Runs tests[i] alone (with the group fixtures) in a child whose output
 * goes to log_fd; returns the child's wait status. */
static int run_one_in_child(const struct CMUnitTest *test, CMFixtureFunction setup,
                            CMFixtureFunction teardown, int log_fd)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        int failed = _cmocka_run_group_tests(test->name, test, 1, setup, teardown);
        fflush(stdout);
        _exit(failed > 0 ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

/* The length of line up to its end or to " stdout:": what a sandbox printed
 * (against fake: host files, /etc/shadow included) stays out of the logs. */
static int without_output(const char *line)
{
    int n = (int)strcspn(line, "\n");
    const char *out = strstr(line, " stdout:");
    return out != NULL && out - line < n ? (int)(out - line) : n;
}

/* The line of log that starts at "ESCAPED:", or "". */
static void escaped_line(const char *log, char *out, size_t cap)
{
    const char *e = strstr(log, "ESCAPED: ");
    if (e == NULL) {
        out[0] = '\0';
        return;
    }
    snprintf(out, cap, "%.*s", without_output(e), e);
}

/* cmocka's own lines of log ("[ RUN      ] ...", "[  ERROR   ] ..."). */
static void print_cmocka_lines(const char *log)
{
    for (const char *l = log; *l != '\0'; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0'))
        if (l[0] == '[')
            printf("#     %.*s\n", without_output(l), l);
}

int esc_negative_control(const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                         CMFixtureFunction teardown, const esc_fake_expectation *expected)
{
    int bad = 0, escaped_count = 0;
    for (size_t i = 0; i < n; i++) {
        char path[] = "/tmp/pinhole-negative-control-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        unlink(path);
        int status = run_one_in_child(&tests[i], setup, teardown, fd);
        off_t end = lseek(fd, 0, SEEK_END);
        char *log = calloc(1, (size_t)(end > 0 ? end : 0) + 1);
        assert_non_null(log);
        if (end > 0)
            assert_int_equal(pread(fd, log, (size_t)end, 0), (ssize_t)end);
        close(fd);
        char run_line[160], failed_line[160], escape[300];
        snprintf(run_line, sizeof run_line, "[ RUN      ] %s\n", tests[i].name);
        snprintf(failed_line, sizeof failed_line, "[  FAILED  ] %s\n", tests[i].name);
        escaped_line(log, escape, sizeof escape);
        const esc_fake_expectation *want = NULL;
        for (const esc_fake_expectation *e = expected; e->test != NULL; e++)
            if (strcmp(e->test, tests[i].name) == 0)
                want = e;
        /* Ran to its end (no crash, no set-up failure), then passed or failed. */
        bool ran = WIFEXITED(status) && strstr(log, run_line) != NULL &&
                   strstr(log, "exception") == NULL;
        bool passed = ran && WEXITSTATUS(status) == 0;
        bool failed = ran && WEXITSTATUS(status) == 1 && strstr(log, failed_line) != NULL;
        bool escaped = failed && escape[0] != '\0';
        escaped_count += escaped;
        bool ok;
        const char *what;
        if (want == NULL) {
            ok = false;
            what = "not in the list of expected outcomes";
        } else if (want->outcome == ESC_FAKE_HELD) {
            ok = passed;
            what = "held without isolation";
        } else if (want->outcome == ESC_FAKE_ESCAPES) {
            ok = escaped;
            what = "the attack succeeds without isolation";
        } else {
            ok = failed && !escaped;
            what = "its positive control cannot be shown on fake";
        }
        printf("# negative control: %s: %s%s%s%s\n", tests[i].name,
               ok ? "" : "NOT AS EXPECTED, wanted: ", what, escaped ? ": " : "", escape);
        if (want != NULL && want->why != NULL && ok)
            printf("#   (%s)\n", want->why);
        if (!ok) {
            bad++;
            const char *how = passed    ? "passed"
                              : escaped ? "failed on an escape"
                              : failed  ? "failed"
                                        : "broke";
            printf("#   the test %s (wait status %#x); cmocka said:\n", how, (unsigned)status);
            print_cmocka_lines(log);
        }
        free(log);
    }
    printf("# negative control: %d of %zu attacks succeed against fake; %s\n", escaped_count, n,
           bad == 0 ? "every outcome as expected" : "NOT as expected");
    return bad == 0 ? 0 : 1;
}

void esc_use_build_tmpdir(void)
{
    /* fake mounts a private /tmp: a build tree under /tmp (a clone there) would
     * hide the host files by layout rather than by isolation, so such a tree
     * uses /var/tmp instead. */
    static const char build[] = PH_BINARY_DIR "/escape-tmp";
    const char *dir = strncmp(build, "/tmp/", 5) == 0 ? "/var/tmp/pinhole-escape-tmp" : build;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
        return;
    }
    chmod(dir, 0755);
    setenv("TMPDIR", dir, 1);
}
