/* Tree removal: never through a symlink, a 10,000-deep tree on a small
 * stack, fifos, sockets and devices unlinked without being opened, what it
 * cannot remove reported, and the filesystem boundary kept. */
#include "test_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinhole/tree_remove.h"

static char g_top[600];

static int setup(void **state)
{
    (void)state;
    static int n;
    snprintf(g_top, sizeof g_top, "%s/t%d", ph_test_dir, n++);
    return mkdir(g_top, 0755);
}

static const char *at(const char *rel)
{
    static char p[2][800];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", g_top, rel);
    return p[k];
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static int open_top(void)
{
    int fd = open(g_top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static void test_symlinks_are_removed_not_followed(void **state)
{
    (void)state;
    assert_int_equal(mkdir(at("outside"), 0755), 0);
    assert_int_equal(ph_test_write_file(at("outside/keep"), "keep", 4), 0);
    assert_int_equal(mkdir(at("tree"), 0755), 0);
    assert_int_equal(mkdir(at("tree/a"), 0755), 0);
    assert_int_equal(symlink(at("outside"), at("tree/a/dirlink")), 0);
    assert_int_equal(symlink(at("outside/keep"), at("tree/filelink")), 0);
    assert_int_equal(symlink("../../outside", at("tree/a/rel")), 0);
    assert_int_equal(symlink("/nonexistent", at("tree/dangling")), 0);
    assert_int_equal(ph_test_write_file(at("tree/a/f"), "f", 1), 0);
    int top = open_top();
    ph_diag d = {0};
    assert_int_equal(ph_tree_remove_at(top, "tree", 0, &d), PH_OK);
    assert_false(exists(at("tree")));
    assert_true(exists(at("outside/keep")));
    char *k = ph_test_read_file(at("outside/keep"), NULL);
    assert_string_equal(k, "keep");
    free(k);
    /* A symlink as the top: the link goes, its target stays. */
    assert_int_equal(symlink(at("outside"), at("top-link")), 0);
    assert_int_equal(ph_tree_remove_at(top, "top-link", 0, &d), PH_OK);
    assert_false(exists(at("top-link")));
    assert_true(exists(at("outside/keep")));
    /* Nothing there is not an error. */
    assert_int_equal(ph_tree_remove_at(top, "never-was", 0, &d), PH_OK);
    assert_int_equal(ph_tree_remove_at(top, "a/b", 0, &d), PH_E_INVAL);
    assert_int_equal(ph_tree_remove_at(top, "..", 0, &d), PH_E_INVAL);
    close(top);
}

#define DEEP 10000

/* Builds g_top/deep/d/d/.../d (DEEP levels), a file in every 100th. */
static void build_deep(void)
{
    int fd = open_top();
    assert_int_equal(mkdirat(fd, "deep", 0755), 0);
    int cur = openat(fd, "deep", O_RDONLY | O_DIRECTORY);
    close(fd);
    for (int i = 0; i < DEEP; i++) {
        assert_int_equal(mkdirat(cur, "d", 0755), 0);
        if (i % 100 == 0) {
            int f = openat(cur, "file", O_WRONLY | O_CREAT | O_EXCL, 0644);
            assert_true(f >= 0);
            close(f);
        }
        int next = openat(cur, "d", O_RDONLY | O_DIRECTORY);
        assert_true(next >= 0);
        close(cur);
        cur = next;
    }
    close(cur);
}

typedef struct deep_job {
    int top;
    ph_status st;
    char msg[PH_DIAG_MESSAGE_MAX];
} deep_job;

static void *remove_deep(void *arg)
{
    deep_job *j = arg;
    ph_diag d = {0};
    j->st = ph_tree_remove_at(j->top, "deep", PH_TREE_ONE_FS, &d);
    memcpy(j->msg, d.message, sizeof j->msg);
    return NULL;
}

static void test_ten_thousand_deep_on_a_small_stack(void **state)
{
    (void)state;
    build_deep();
    int before = count_fds();
    deep_job j = {.top = open_top()};
    /* 256 KiB of stack: recursion 10,000 deep would need megabytes. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    assert_int_equal(pthread_attr_setstacksize(&attr, 256 * 1024), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, &attr, remove_deep, &j), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&attr);
    if (j.st != PH_OK)
        fail_msg("%s", j.msg);
    assert_false(exists(at("deep")));
    close(j.top);
    assert_int_equal(count_fds(), before); /* no descriptor left open */

    /* The same depth below a directory that stays (ph_tree_empty). */
    build_deep();
    int top = open_top();
    int deep = openat(top, "deep", O_RDONLY | O_DIRECTORY);
    assert_int_equal(ph_tree_empty(deep, 0, NULL), PH_OK);
    close(deep);
    assert_true(exists(at("deep")));
    assert_false(exists(at("deep/d")));
    assert_false(exists(at("deep/file")));
    assert_int_equal(ph_tree_remove_at(top, "deep", 0, NULL), PH_OK);
    close(top);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "tree removal blocked (opened a fifo?)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void test_fifos_sockets_devices(void **state)
{
    (void)state;
    assert_int_equal(mkdir(at("special"), 0755), 0);
    assert_int_equal(mkdir(at("special/sub"), 0755), 0);
    assert_int_equal(mkfifo(at("special/fifo"), 0644), 0);
    assert_int_equal(mkfifo(at("special/sub/fifo2"), 0644), 0);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", at("special/sock"));
    bool have_sock = strlen(at("special/sock")) < sizeof sa.sun_path &&
                     bind(s, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(s);
    /* A device needs CAP_MKNOD; where there is none, the rest still runs. */
    bool have_dev = mknod(at("special/sub/null"), S_IFCHR | 0600, makedev(1, 3)) == 0;
    printf("# fifo: yes, socket: %s, device: %s\n", have_sock ? "yes" : "no",
           have_dev ? "yes" : "no");
    signal(SIGALRM, on_alarm);
    alarm(30);
    int top = open_top();
    ph_diag d = {0};
    assert_int_equal(ph_tree_remove_at(top, "special", 0, &d), PH_OK);
    alarm(0);
    close(top);
    assert_false(exists(at("special")));
}

/* A directory the remover may not open, as a process without root's
 * override sees it: reported by name, everything else removed. */
static void test_unreadable_directory_is_reported(void **state)
{
    (void)state;
    assert_int_equal(mkdir(at("t"), 0755), 0);
    assert_int_equal(mkdir(at("t/ok"), 0755), 0);
    assert_int_equal(ph_test_write_file(at("t/ok/f"), "f", 1), 0);
    assert_int_equal(mkdir(at("t/locked"), 0755), 0);
    assert_int_equal(ph_test_write_file(at("t/locked/inside"), "i", 1), 0);
    assert_int_equal(ph_test_write_file(at("t/plain"), "p", 1), 0);
    bool root = geteuid() == 0;
    if (root) {
        const char *own[] = {"t", "t/ok", "t/ok/f", "t/locked", "t/locked/inside", "t/plain"};
        for (size_t i = 0; i < sizeof own / sizeof own[0]; i++)
            assert_int_equal(lchown(at(own[i]), 65534, 65534), 0);
    }
    assert_int_equal(chmod(at("t/locked"), 0), 0);
    int tfd = open(at("t"), O_RDONLY | O_DIRECTORY);
    assert_true(tfd >= 0);
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pipefd[0]);
        if (root && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(10);
        ph_diag d = {0};
        ph_status st = ph_tree_empty(tfd, 0, &d);
        (void)!write(pipefd[1], d.message, strlen(d.message));
        _exit(st == PH_E_IO ? 0 : 11);
    }
    close(pipefd[1]);
    char msg[PH_DIAG_MESSAGE_MAX + 1] = {0};
    (void)!read(pipefd[0], msg, sizeof msg - 1);
    close(pipefd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(tfd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_non_null(strstr(msg, "locked"));
    assert_non_null(strstr(msg, strerror(EACCES)));
    assert_false(exists(at("t/ok")));
    assert_false(exists(at("t/plain")));
    assert_true(exists(at("t/locked")));
    assert_int_equal(chmod(at("t/locked"), 0755), 0);
    assert_true(exists(at("t/locked/inside")));
}

/* PH_TREE_ONE_FS: a filesystem mounted inside the tree is neither entered
 * nor removed. Needs mount(2); without it this case says so and only the
 * flagless removal of a plain tree runs. */
static void test_stays_on_one_filesystem(void **state)
{
    (void)state;
    assert_int_equal(mkdir(at("m"), 0755), 0);
    assert_int_equal(mkdir(at("m/mnt"), 0755), 0);
    assert_int_equal(ph_test_write_file(at("m/f"), "f", 1), 0);
    if (mount("tmpfs", at("m/mnt"), "tmpfs", 0, "size=1m") != 0) {
        printf("# mount(2) refused (%s): the mount-point case does not run here\n",
               strerror(errno));
        int top = open_top();
        assert_int_equal(ph_tree_remove_at(top, "m", PH_TREE_ONE_FS, NULL), PH_OK);
        close(top);
        assert_false(exists(at("m")));
        return;
    }
    assert_int_equal(ph_test_write_file(at("m/mnt/other-fs"), "o", 1), 0);
    int top = open_top();
    ph_diag d = {0};
    ph_status st = ph_tree_remove_at(top, "m", PH_TREE_ONE_FS, &d);
    bool kept = exists(at("m/mnt/other-fs"));
    bool f_gone = !exists(at("m/f"));
    umount(at("m/mnt"));
    assert_int_equal(st, PH_E_IO);
    assert_non_null(strstr(d.message, "mnt"));
    assert_true(kept);
    assert_true(f_gone);
    assert_int_equal(ph_tree_remove_at(top, "m", PH_TREE_ONE_FS, &d), PH_OK);
    close(top);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_symlinks_are_removed_not_followed, setup),
        cmocka_unit_test_setup(test_ten_thousand_deep_on_a_small_stack, setup),
        cmocka_unit_test_setup(test_fifos_sockets_devices, setup),
        cmocka_unit_test_setup(test_unreadable_directory_is_reported, setup),
        cmocka_unit_test_setup(test_stays_on_one_filesystem, setup),
    };
    return cmocka_run_group_tests(tests, ph_test_dir_setup, ph_test_dir_teardown);
}
