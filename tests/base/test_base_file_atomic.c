/* Atomic file writes: the new bytes or the old ones, never a mix; no
 * temporary file left on any path; the mode asked for; never through a
 * planted symlink (at the final name or at a temporary one). */
#include "test_support.h"

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinhole/file_atomic.h"

/* The writer names its temporary files from getrandom(). This definition
 * takes its place in this binary so a test can predict the names: mode 0 is
 * the kernel's randomness, 1 always the same bytes, 2 a counter. */
static int g_random_mode;
static unsigned char g_counter;

ssize_t getrandom(void *buf, size_t len, unsigned int flags);
ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    if (g_random_mode == 0)
        return syscall(SYS_getrandom, buf, len, flags);
    memset(buf, 0, len);
    if (g_random_mode == 2 && len > 0)
        ((unsigned char *)buf)[0] = g_counter++;
    return (ssize_t)len;
}

static char g_dir[600];

static int setup(void **state)
{
    (void)state;
    static int n;
    snprintf(g_dir, sizeof g_dir, "%s/w%d", ph_test_dir, n++);
    g_random_mode = 0;
    return mkdir(g_dir, 0755);
}

static const char *in_dir(const char *name)
{
    static char p[700];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    if (d)
        closedir(d);
    return n;
}

static void assert_content(const char *path, const char *want)
{
    char *got = ph_test_read_file(path, NULL);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_writes_replaces_and_sets_the_mode(void **state)
{
    (void)state;
    mode_t old = umask(077);
    ph_diag d = {0};
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "one", 3, 0644, PH_WRITE_REPLACE, &d), PH_OK);
    umask(old);
    assert_content(in_dir("f"), "one");
    struct stat st;
    assert_int_equal(stat(in_dir("f"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644); /* exactly, whatever the umask */
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "two!", 4, 0600, PH_WRITE_REPLACE, &d), PH_OK);
    assert_content(in_dir("f"), "two!");
    assert_int_equal(stat(in_dir("f"), &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(ph_file_write_atomic(in_dir("empty"), NULL, 0, 0640, 0, &d), PH_OK);
    assert_int_equal(stat(in_dir("empty"), &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(count_entries(g_dir), 2); /* no temporary file left */
}

static void test_failed_write_keeps_the_old_file(void **state)
{
    (void)state;
    ph_diag d = {0};
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "old", 3, 0644, 0, &d), PH_OK);
    /* A buffer the kernel cannot read: write() fails with EFAULT after the
     * temporary file exists, the failure a full disk gives at that step. */
    long page = sysconf(_SC_PAGESIZE);
    void *bad = mmap(NULL, (size_t)page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(bad != MAP_FAILED);
    memset(&d, 0, sizeof d);
    assert_int_equal(ph_file_write_atomic(in_dir("f"), bad, (size_t)page, 0644, 0, &d), PH_E_IO);
    assert_non_null(strstr(d.message, "cannot write f"));
    munmap(bad, (size_t)page);
    assert_content(in_dir("f"), "old");
    assert_int_equal(count_entries(g_dir), 1);

    /* The rename fails (a non-empty directory holds the name). */
    assert_int_equal(mkdir(in_dir("sub"), 0755), 0);
    assert_int_equal(ph_test_write_file(in_dir("sub/x"), "x", 1), 0);
    assert_int_equal(ph_file_write_atomic(in_dir("sub"), "new", 3, 0644, 0, &d), PH_E_IO);
    assert_non_null(strstr(d.message, "rename"));
    assert_content(in_dir("sub/x"), "x");
    assert_int_equal(count_entries(g_dir), 2);

    /* No replace: the existing file wins, errno says why. */
    errno = 0;
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "new", 3, 0644, PH_WRITE_NO_REPLACE, &d),
                     PH_E_IO);
    assert_int_equal(errno, EEXIST);
    assert_content(in_dir("f"), "old");
    assert_int_equal(count_entries(g_dir), 2);
}

/* A directory the writer may not write to: as root, only a process without
 * root's override shows that, so a child drops to nobody first. */
static void test_read_only_directory(void **state)
{
    (void)state;
    ph_diag d = {0};
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "old", 3, 0644, 0, &d), PH_OK);
    assert_int_equal(chmod(g_dir, 0555), 0);
    int dfd = open(g_dir, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(10);
        ph_diag cd = {0};
        ph_status st = ph_file_write_atomic_at(dfd, "f", "new", 3, 0644, 0, &cd);
        _exit(st == PH_E_IO && errno == EACCES && strstr(cd.message, "temporary") ? 0 : 11);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(dfd);
    assert_int_equal(chmod(g_dir, 0755), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_content(in_dir("f"), "old");
    assert_int_equal(count_entries(g_dir), 1);
}

static void test_never_writes_through_a_symlink(void **state)
{
    (void)state;
    char outside[700];
    snprintf(outside, sizeof outside, "%s.outside", g_dir);
    assert_int_equal(ph_test_write_file(outside, "outside", 7), 0);
    ph_diag d = {0};
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "old", 3, 0644, 0, &d), PH_OK);

    /* Every temporary name the writer can pick is a planted symlink: it
     * refuses rather than open one, and removes nothing it did not make. */
    g_random_mode = 1;
    const char *tmp = ".f.tmp-0000000000000000";
    assert_int_equal(symlink(outside, in_dir(tmp)), 0);
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "new", 3, 0644, 0, &d), PH_E_IO);
    assert_non_null(strstr(d.message, "temporary"));
    assert_content(outside, "outside");
    assert_content(in_dir("f"), "old");
    struct stat st;
    assert_int_equal(lstat(in_dir(tmp), &st), 0);
    assert_true(S_ISLNK(st.st_mode));

    /* The first name is planted, the next is free: the write goes there. */
    g_random_mode = 2;
    g_counter = 0;
    assert_int_equal(ph_file_write_atomic(in_dir("f"), "new", 3, 0644, 0, &d), PH_OK);
    assert_content(in_dir("f"), "new");
    assert_content(outside, "outside");
    assert_int_equal(count_entries(g_dir), 2); /* f and the planted link */
    g_random_mode = 0;

    /* A symlink at the final name is replaced, not written through. */
    assert_int_equal(symlink(outside, in_dir("g")), 0);
    assert_int_equal(ph_file_write_atomic(in_dir("g"), "mine", 4, 0600, 0, &d), PH_OK);
    assert_int_equal(lstat(in_dir("g"), &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_content(in_dir("g"), "mine");
    assert_content(outside, "outside");
    unlink(outside);
}

static void test_streaming_from_a_directory_descriptor(void **state)
{
    (void)state;
    int dfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    ph_diag d = {0};
    ph_atomic_file af;
    assert_int_equal(ph_atomic_file_begin_at(&af, dfd, "s", 0640, &d), PH_OK);
    assert_true(af.fd >= 0);
    assert_int_equal(ph_atomic_file_write(&af, "ab", 2, &d), PH_OK);
    assert_int_equal(count_entries(g_dir), 1); /* the temporary file only */
    assert_false(access(in_dir("s"), F_OK) == 0);
    assert_int_equal(ph_atomic_file_write(&af, "cd", 2, &d), PH_OK);
    assert_int_equal(ph_atomic_file_commit(&af, 0, &d), PH_OK);
    assert_int_equal(af.fd, -1);
    assert_content(in_dir("s"), "abcd");

    assert_int_equal(ph_atomic_file_begin_at(&af, dfd, "s", 0640, &d), PH_OK);
    assert_int_equal(ph_atomic_file_write(&af, "zz", 2, &d), PH_OK);
    ph_atomic_file_abort(&af);
    ph_atomic_file_abort(&af); /* twice is harmless */
    assert_content(in_dir("s"), "abcd");
    assert_int_equal(count_entries(g_dir), 1);
    assert_int_equal(ph_atomic_file_commit(&af, 0, &d), PH_E_INVAL); /* ended */
    close(dfd);
}

static void test_bad_names(void **state)
{
    (void)state;
    int dfd = open(g_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    char longname[300];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const char *bad[] = {"", ".", "..", "a/b", "/abs", longname};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(ph_file_write_atomic_at(dfd, bad[i], "x", 1, 0644, 0, NULL), PH_E_INVAL);
    assert_int_equal(ph_file_write_atomic(g_dir, "x", 1, 0644, 0, NULL), PH_E_IO); /* a dir */
    assert_int_equal(ph_file_write_atomic("", "x", 1, 0644, 0, NULL), PH_E_INVAL);
    assert_int_equal(ph_file_write_atomic(in_dir("nodir/f"), "x", 1, 0644, 0, NULL), PH_E_IO);
    longname[PH_ATOMIC_NAME_MAX] = '\0'; /* the longest name works */
    assert_int_equal(ph_file_write_atomic_at(dfd, longname, "x", 1, 0644, 0, NULL), PH_OK);
    close(dfd);
    assert_int_equal(count_entries(g_dir), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_writes_replaces_and_sets_the_mode, setup),
        cmocka_unit_test_setup(test_failed_write_keeps_the_old_file, setup),
        cmocka_unit_test_setup(test_read_only_directory, setup),
        cmocka_unit_test_setup(test_never_writes_through_a_symlink, setup),
        cmocka_unit_test_setup(test_streaming_from_a_directory_descriptor, setup),
        cmocka_unit_test_setup(test_bad_names, setup),
    };
    return cmocka_run_group_tests(tests, ph_test_dir_setup, ph_test_dir_teardown);
}
