/* sandbox.c - bench_sandbox: what the ExecutionEnvironment port costs.
 *
 *  1. execute overhead: `true` through ph_environment_execute on the fake
 *     mechanism (namespaces, assembled root, snapshot before and after),
 *     median of N runs, against posix_spawn + waitpid of /bin/true measured
 *     in the same run;
 *  2. files_changed: snapshot before + snapshot after + diff over a
 *     workspace of 10,000 files in 100 directories, median of N runs
 *     (target <= 50 ms), with one modified file to find.
 * Prints figures; asserts nothing about time. */
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/sandbox.h"
#include "pinhole/workspace.h"
#include "sandbox-int.h"

#include "bench_util.h"

extern char **environ;

/* The floor: readdir + fstatat of every entry, nothing kept. */
static size_t bare_walk(int dir_fd)
{
    DIR *d = fdopendir(dir_fd);
    if (d == NULL)
        return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        n++;
        if (S_ISDIR(sb.st_mode))
            n += bare_walk(openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    }
    closedir(d);
    return n;
}

/* Median wall time of `runs` executes of cmd; t is scratch of runs doubles. */
static double median_execute(ph_environment *env, const ph_execution_command *cmd, double *t,
                             int runs)
{
    for (int i = 0; i < runs; i++) {
        ph_execution_result *r = NULL;
        double s = bench_now_ms();
        ph_environment_execute(env, cmd, &r, NULL);
        t[i] = bench_now_ms() - s;
        ph_execution_result_free(&r);
    }
    return bench_quantile(t, runs, 0.5);
}

static void quiet_log(void *ctx, const char *line)
{
    (void)ctx;
    (void)line;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 30;
    if (runs < 3)
        runs = 3;
    char state_dir[] = "/tmp/pinhole-bench-sandbox-XXXXXX";
    if (mkdtemp(state_dir) == NULL)
        return 1;
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT, .mechanism = PH_MECHANISM_FAKE,
                             .hard_cap_ms = 60000, .state_dir = state_dir, .log = quiet_log};
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    if (ph_execution_service_open(&cfg, &svc, &diag) != PH_OK) {
        fprintf(stderr, "bench_sandbox: %s\n", diag.message);
        return 1;
    }
    ph_environment_spec spec = {.tenant = "bench", .lease = "bench",
                                .mechanism = PH_MECHANISM_FAKE};
    ph_sandbox_limits_init(&spec.limits);
    ph_environment *env = NULL;
    if (ph_environment_create(svc, &spec, &env, &diag) != PH_OK) {
        fprintf(stderr, "bench_sandbox: %s\n", diag.message);
        return 1;
    }
    double *t = calloc((size_t)runs, sizeof *t);

    /* 1. baseline: bare spawn */
    char *true_argv[] = {"true", NULL};
    for (int i = 0; i < runs; i++) {
        double s = bench_now_ms();
        pid_t pid;
        if (posix_spawn(&pid, "/bin/true", NULL, NULL, true_argv, environ) == 0)
            waitpid(pid, NULL, 0);
        t[i] = bench_now_ms() - s;
    }
    double base = bench_quantile(t, runs, 0.5);
    const char *argv_true[] = {"true", NULL};
    ph_execution_command cmd = {.argv = argv_true, .timeout_seconds = PH_SANDBOX_UNSET,
                                .run_budget_ms = PH_SANDBOX_UNSET};
    double exec_med = median_execute(env, &cmd, t, runs);
    printf("execute `true` on fake (empty workspace): median %.2f ms over %d runs\n", exec_med,
           runs);
    printf("posix_spawn + waitpid of /bin/true:       median %.2f ms (ratio %.1fx)\n", base,
           base > 0 ? exec_med / base : 0.0);

    /* 2. files_changed over 10,000 files */
    ph_workspace *ws = NULL;
    ph_environment_workspace(env, &ws, NULL);
    int root = ph_workspace_root_fd(ws);
    for (int d = 0; d < 100; d++) {
        char name[64];
        snprintf(name, sizeof name, "d%03d", d);
        mkdirat(root, name, 0755);
        for (int f = 0; f < 100; f++) {
            snprintf(name, sizeof name, "d%03d/f%03d.txt", d, f);
            int fd = openat(root, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            if (fd >= 0) {
                (void)!write(fd, "x", 1);
                close(fd);
            }
        }
    }
    size_t found = 0;
    for (int i = 0; i < runs; i++) {
        ph_snapshot *a = NULL, *b = NULL;
        ph_execution_result res;
        memset(&res, 0, sizeof res);
        double s = bench_now_ms();
        ph_snapshot_take(root, PH_SNAPSHOT_MAX_ENTRIES, &a, NULL);
        /* the command's change, outside the timed region would be fairer
         * but it is one write: keep the loop simple */
        int fd = openat(root, "d050/f050.txt", O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0) {
            (void)!write(fd, "y", 1);
            close(fd);
        }
        ph_snapshot_take(root, PH_SNAPSHOT_MAX_ENTRIES, &b, NULL);
        ph_snapshot_diff(a, b, &res, NULL);
        t[i] = bench_now_ms() - s;
        found = res.files_changed_count;
        for (size_t k = 0; k < res.files_changed_count; k++)
            free(res.files_changed[k].path);
        free(res.files_changed);
        ph_snapshot_free(&a);
        ph_snapshot_free(&b);
    }
    double fc = bench_quantile(t, runs, 0.5);
    for (int i = 0; i < runs; i++) {
        double s = bench_now_ms();
        bare_walk(openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        bare_walk(openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        t[i] = bench_now_ms() - s;
    }
    double floor_ms = bench_quantile(t, runs, 0.5);
    printf("files_changed over 10,100 entries (2 snapshots + diff): median %.2f ms "
           "(target <= 50 ms: %s), %zu change found\n",
           fc, fc <= 50.0 ? "met" : "NOT met", found);
    printf("two bare readdir+fstatat walks (the floor):                median %.2f ms "
           "(files_changed / floor = %.2fx)\n",
           floor_ms, floor_ms > 0 ? fc / floor_ms : 0.0);
    printf("execute `true` on fake (10,000-file workspace): median %.2f ms\n",
           median_execute(env, &cmd, t, runs));
    ph_workspace_close(&ws);
    ph_environment_destroy(&env);
    ph_execution_service_close(&svc);
    rmdir(state_dir);
    free(t);
    return 0;
}
