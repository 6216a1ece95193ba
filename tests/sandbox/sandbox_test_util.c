/* sandbox_test_util.c - see sandbox_test_util.h. */
#include "sandbox_test_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

static void collect_warning(void *ctx, const char *line)
{
    sbx_fixture *f = ctx;
    size_t used = strlen(f->warnings);
    snprintf(f->warnings + used, sizeof f->warnings - used, "%s\n", line);
}

bool sbx_open(sbx_fixture *f, ph_sandbox_mechanism m, int64_t cap_ms)
{
    memset(f, 0, sizeof *f);
    f->mechanism = m;
    ph_diag diag = {0};
    if (ph_sandbox_mechanism_available(m, &diag) != PH_OK) {
        printf("SKIP: mechanism %s is not available here: %s\n", ph_sandbox_mechanism_name(m),
               diag.message);
        return false;
    }
#ifdef PINHOLE_EXECD_AS_PORT_H
    const char *daemon_state = getenv("PINHOLE_EXECD_STATE_DIR");
    f->state_dir = daemon_state ? strdup(daemon_state) : NULL;
#else
    f->state_dir = ph_test_mkdtemp();
    assert_non_null(f->state_dir);
#endif
    ph_service_config cfg = {
        .mode = PH_SERVICE_MODE_DEVELOPMENT,
        .mechanism = m,
        .hard_cap_ms = cap_ms,
        .state_dir = f->state_dir,
        .log = collect_warning,
        .log_ctx = f,
    };
    ph_status st = ph_execution_service_open(&cfg, &f->svc, &diag);
    if (st != PH_OK)
        fail_msg("service open: %s", diag.message);
    return true;
}

void sbx_close(sbx_fixture *f)
{
    ph_execution_service_close(&f->svc);
    if (f->state_dir) {
#ifndef PINHOLE_EXECD_AS_PORT_H
        ph_test_rmtree(f->state_dir);
#endif
        free(f->state_dir);
        f->state_dir = NULL;
    }
}

ph_environment_spec sbx_spec(const sbx_fixture *f)
{
    ph_environment_spec s;
    memset(&s, 0, sizeof s);
    s.tenant = "t1";
    s.lease = "lease-1";
    s.mechanism = f->mechanism;
    ph_sandbox_limits_init(&s.limits);
    return s;
}

ph_environment *sbx_create(sbx_fixture *f, const ph_environment_spec *spec)
{
    ph_environment *env = NULL;
    ph_diag diag = {0};
    if (ph_environment_create(f->svc, spec, &env, &diag) != PH_OK)
        fail_msg("create: %s", diag.message);
    return env;
}

ph_execution_result *sbx_run(ph_environment *env, const char *const *argv)
{
    return sbx_run_timed(env, argv, PH_SANDBOX_UNSET);
}

ph_execution_result *sbx_run_timed(ph_environment *env, const char *const *argv,
                                   int64_t timeout_s)
{
    ph_execution_command cmd = {
        .argv = argv,
        .timeout_seconds = timeout_s,
        .run_budget_ms = PH_SANDBOX_UNSET,
    };
    ph_execution_result *r = NULL;
    ph_diag diag = {0};
    if (ph_environment_execute(env, &cmd, &r, &diag) != PH_OK)
        fail_msg("execute %s: %s", argv[0], diag.message);
    return r;
}

bool sbx_contains(const void *haystack, size_t len, const char *needle)
{
    return memmem(haystack, len, needle, strlen(needle)) != NULL;
}

const ph_file_change *sbx_change(const ph_execution_result *r, const char *path)
{
    for (size_t i = 0; i < r->files_changed_count; i++)
        if (strcmp(r->files_changed[i].path, path) == 0)
            return &r->files_changed[i];
    return NULL;
}

bool sbx_process_with_arg_exists(const char *needle)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    bool found = false;
    while (d && !found && (de = readdir(d)) != NULL) {
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            continue;
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        found = sbx_contains(buf, n, needle);
    }
    if (d)
        closedir(d);
    return found;
}

int sbx_loop_devices_of(const char *needle)
{
    int n = 0;
    DIR *d = opendir("/sys/block");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "loop", 4) != 0)
            continue;
        char path[300];
        snprintf(path, sizeof path, "/sys/block/%s/loop/backing_file", de->d_name);
        char *backing = ph_test_read_file(path, NULL);
        if (backing != NULL && strstr(backing, needle) != NULL)
            n++;
        free(backing);
    }
    if (d != NULL)
        closedir(d);
    return n;
}

int sbx_umount(const char *mnt)
{
    for (int i = 0;; i++) {
        if (umount2(mnt, 0) == 0)
            return 0;
        if (errno != EBUSY || i == 1000)
            return -1;
        if (i == 0)
            printf("# %s busy: asking again\n", mnt);
        usleep(10000);
    }
}

int sbx_shell(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
