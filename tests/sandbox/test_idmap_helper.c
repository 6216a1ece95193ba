/* test_idmap_helper.c - pinhole-idmap (sandbox/tools/pinhole_idmap.c), the
 * newuidmap/newgidmap `runsc create` runs: it writes exactly the map it is
 * given, refuses anything malformed (exit 2) and gets nothing from the
 * kernel without runsc's privileges (exit 1).
 *
 * Exit 77 ("SKIP: ...") without root or user namespaces.
 */
#include "test_support.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PH_IDMAP_TEST_PATH
#error "PH_IDMAP_TEST_PATH must name the built pinhole-idmap"
#endif

/* Runs the helper under the name argv0 with args (NULL-terminated), as
 * uid (0: as we are). Returns its exit code. */
static int run_helper(const char *argv0, const char *const *args, uid_t uid)
{
    const char *argv[16] = {argv0};
    size_t n = 1;
    while (args[n - 1] != NULL && n < 15) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        /* Opened before the uid changes and run by descriptor: the caller
         * under test need not be able to walk the build tree's path (a
         * checkout under a 0700 directory). */
        int exe = open(PH_IDMAP_TEST_PATH, O_RDONLY | O_CLOEXEC);
        if (uid != 0 && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
                         setresuid(uid, uid, uid) != 0))
            _exit(100);
        char *exec_argv[16];
        memcpy(exec_argv, argv, sizeof exec_argv);
        char *envp[] = {NULL};
        fexecve(exe, exec_argv, envp);
        _exit(101);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* A child in a new user namespace, waiting; *done_fd ends it (close). */
static pid_t userns_child(int *done_fd)
{
    int ready[2], done[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(done[1]);
        char c = unshare(CLONE_NEWUSER) == 0 ? 'y' : 'n';
        (void)!write(ready[1], &c, 1);
        (void)!read(done[0], &c, 1);
        _exit(0);
    }
    close(ready[1]);
    close(done[0]);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    assert_int_equal(c, 'y');
    *done_fd = done[1];
    return pid;
}

static void end_child(pid_t pid, int done_fd)
{
    close(done_fd);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
}

static char *read_map(pid_t pid, const char *file)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    size_t len = 0;
    char *text = ph_test_read_file(path, &len);
    assert_non_null(text);
    return text;
}

static void malformed_is_refused(void **state)
{
    (void)state;
    const char *none[] = {NULL};
    const char *pid_only[] = {"1", NULL};
    const char *short_triple[] = {"1", "0", "0", NULL};
    const char *signed_id[] = {"1", "-1", "0", "1", NULL};
    const char *spaced[] = {"1", " 0", "0", "1", NULL};
    const char *zero_count[] = {"1", "0", "0", "0", NULL};
    const char *too_big[] = {"1", "4294967296", "0", "1", NULL};
    const char *pid_zero[] = {"0", "0", "0", "1", NULL};
    const char *ok_args[] = {"1", "0", "0", "1", NULL};
    assert_int_equal(run_helper("pinhole-idmap", ok_args, 0), 2); /* only under its two names */
    const char *const *bad[] = {none, pid_only, short_triple, signed_id, spaced,
                                zero_count, too_big, pid_zero};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(run_helper("newuidmap", bad[i], 0), 2);
}

static void writes_exactly_the_map(void **state)
{
    (void)state;
    int done;
    pid_t child = userns_child(&done);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)child);
    const char *uids[] = {pid, "0", "0", "1", "2000000123", "2000000123", "1", NULL};
    const char *gids[] = {pid, "0", "0", "1", "2000000123", "2000000123", "1", NULL};
    assert_int_equal(run_helper("/some/dir/newuidmap", uids, 0), 0);
    assert_int_equal(run_helper("newgidmap", gids, 0), 0);
    char *u = read_map(child, "uid_map"), *g = read_map(child, "gid_map");
    printf("  uid_map:\n%s  gid_map:\n%s", u, g);
    unsigned a, b, c, d, e, f;
    assert_int_equal(sscanf(u, " %u %u %u %u %u %u", &a, &b, &c, &d, &e, &f), 6);
    assert_true(a == 0 && b == 0 && c == 1 && d == 2000000123u && e == 2000000123u && f == 1);
    assert_string_equal(u, g);
    free(u);
    free(g);
    /* A map is written once: a second write is the kernel's to refuse. */
    assert_int_equal(run_helper("newuidmap", uids, 0), 1);
    end_child(child, done);
}

static void unprivileged_caller_gets_nothing(void **state)
{
    (void)state;
    int done;
    pid_t child = userns_child(&done);
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)child);
    const char *uids[] = {pid, "0", "0", "1", NULL};
    assert_int_equal(run_helper("newuidmap", uids, 65534), 1);
    char *u = read_map(child, "uid_map");
    assert_string_equal(u, "");
    free(u);
    end_child(child, done);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("SKIP: writing another process's id maps needs root\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_is_refused),
        cmocka_unit_test(writes_exactly_the_map),
        cmocka_unit_test(unprivileged_caller_gets_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
