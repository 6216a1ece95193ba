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

ph_execution_result *esc_sh(ph_environment *env, const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    return sbx_run(env, argv);
}

void esc_assert_not_leaked(const ph_execution_result *r, const char *needle)
{
    if (sbx_contains(r->out.data, r->out.len, needle) ||
        sbx_contains(r->err.data, r->err.len, needle))
        fail_msg("LEAK: '%s' reached the sandbox. stdout: %.400s stderr: %.400s", needle,
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

bool esc_cgroup_read(const char *env_id, const char *controller, const char *file, char *out,
                     size_t cap)
{
    /* The library's own detection (v1, v2 or hybrid) says where the file is. */
    ph_cgroup_probe probe;
    char group[128], path[512];
    snprintf(group, sizeof group, "pinhole-%s", env_id);
    if (ph_cgroup_probe_root(NULL, &probe, NULL) != PH_OK ||
        ph_cgroup_file_path(&probe, NULL, controller, group, file, path, sizeof path) != 0)
        return false;
    size_t len = 0;
    char *data = ph_test_read_file(path, &len);
    if (data == NULL)
        return false;
    snprintf(out, cap, "%.*s", (int)strcspn(data, "\n"), data);
    free(data);
    return true;
}

int esc_pick_mechanism(int argc, char **argv, ph_sandbox_mechanism *m)
{
    const char *name = argc > 1 ? argv[1] : "gvisor";
    ph_diag diag = {0};
    if (ph_sandbox_mechanism_from_name(name, m, &diag) != PH_OK) {
        fprintf(stderr, "%s\n", diag.message);
        return 2;
    }
    if (*m == PH_MECHANISM_FAKE) {
        printf("SKIP: the fake mechanism does not isolate; escape tests run on gvisor and docker\n");
        return 77;
    }
    if (ph_sandbox_mechanism_available(*m, &diag) != PH_OK) {
        printf("SKIP: mechanism %s is not available here: %s\n", name, diag.message);
        return 77;
    }
    return 0;
}

void esc_use_build_tmpdir(void)
{
    static const char dir[] = PH_BINARY_DIR "/escape-tmp";
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
        return;
    }
    chmod(dir, 0755);
    setenv("TMPDIR", dir, 1);
}
