/* ph_unix_listen: a socket nothing accepts on is replaced, a live one, a
 * symlink or a regular file is refused with nothing changed, no temporary
 * file is left; ph_unix_listen_unlink removes the path only while it is
 * still the socket bound. */
#include "test_support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "pinhole/unix_listen.h"

static char g_path[256];

static int setup(void **state)
{
    (void)state;
    if (ph_test_dir_setup(state) != 0)
        return -1;
    snprintf(g_path, sizeof g_path, "%s/d.sock", ph_test_dir);
    return 0;
}

static struct sockaddr_un sun_of(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof sun.sun_path);
    memcpy(sun.sun_path, path, strlen(path) + 1);
    return sun;
}

/* A connect to path: 0 when accepted into a queue, else errno. */
static int connect_to(const char *path)
{
    struct sockaddr_un sun = sun_of(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0 ? 0 : errno;
    close(fd);
    return rc;
}

/* Whether l's listening socket has a connection waiting, taken off. */
static bool accepts(const ph_unix_listener *l)
{
    int c = accept(l->fd, NULL, NULL);
    if (c >= 0)
        close(c);
    return c >= 0;
}

/* How many entries the test directory holds (the socket's and others). */
static int entries(void)
{
    DIR *d = opendir(ph_test_dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void test_listens_and_removes_its_own(void **state)
{
    (void)state;
    ph_unix_listener l;
    ph_diag d = {0};
    assert_int_equal(ph_unix_listen(g_path, 0640, 8, &l, &d), PH_OK);
    struct stat st;
    assert_int_equal(lstat(g_path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(entries(), 1); /* no temporary name left */
    assert_int_equal(connect_to(g_path), 0);
    assert_true(accepts(&l));
    assert_true(ph_unix_listen_unlink(&l));
    assert_int_equal(lstat(g_path, &st), -1);
    close(l.fd);
}

/* The second is refused and the first keeps its path and its clients. */
static void test_a_live_socket_is_refused(void **state)
{
    (void)state;
    ph_unix_listener a, b;
    ph_diag d = {0};
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &a, &d), PH_OK);
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &b, &d), PH_E_DENIED);
    printf("second listener: %s\n", d.message);
    assert_int_equal(strncmp(d.message, "unix_socket_in_use: ", 20), 0);
    assert_non_null(strstr(d.message, "pid "));
    assert_int_equal(b.fd, -1);
    assert_int_equal(entries(), 1);
    assert_int_equal(connect_to(g_path), 0);
    assert_true(accepts(&a));
    assert_true(ph_unix_listen_unlink(&a));
    close(a.fd);
}

static void test_a_stale_socket_is_replaced(void **state)
{
    (void)state;
    struct sockaddr_un sun = sun_of(g_path);
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(dead, (struct sockaddr *)&sun, sizeof sun), 0);
    close(dead); /* the file stays; nothing accepts on it */
    assert_int_equal(connect_to(g_path), ECONNREFUSED);
    ph_unix_listener l;
    ph_diag d = {0};
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &l, &d), PH_OK);
    assert_int_equal(connect_to(g_path), 0);
    assert_true(accepts(&l));
    assert_true(ph_unix_listen_unlink(&l));
    close(l.fd);
}

static void test_a_symlink_or_a_file_is_refused(void **state)
{
    (void)state;
    /* A symlink to a stale socket: not followed, not replaced. */
    char target[300];
    snprintf(target, sizeof target, "%s/target.sock", ph_test_dir);
    struct sockaddr_un sun = sun_of(target);
    int dead = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(dead, (struct sockaddr *)&sun, sizeof sun), 0);
    close(dead);
    assert_int_equal(symlink(target, g_path), 0);
    ph_unix_listener l;
    ph_diag d = {0};
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &l, &d), PH_E_INVAL);
    printf("symlink: %s\n", d.message);
    assert_int_equal(strncmp(d.message, "unix_socket_not_a_socket: ", 26), 0);
    assert_non_null(strstr(d.message, "a symlink"));
    struct stat st;
    assert_int_equal(lstat(g_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(target, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(entries(), 2);
    unlink(g_path);
    unlink(target);
    /* A regular file: kept, contents and all. */
    int fd = open(g_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "keep", 4), 4);
    close(fd);
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &l, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "a regular file"));
    size_t len = 0;
    char *back = ph_test_read_file(g_path, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(back, "keep", 4);
    free(back);
    assert_int_equal(entries(), 1);
    unlink(g_path);
}

/* After this listener's path was taken by another (its file removed and a
 * new socket bound there), the stop leaves the other's. */
static void test_the_stop_leaves_a_path_rebound_since(void **state)
{
    (void)state;
    ph_unix_listener a, b;
    ph_diag d = {0};
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &a, &d), PH_OK);
    assert_int_equal(unlink(g_path), 0);
    assert_int_equal(ph_unix_listen(g_path, 0600, 8, &b, &d), PH_OK);
    assert_false(ph_unix_listen_unlink(&a));
    assert_int_equal(connect_to(g_path), 0);
    assert_true(accepts(&b));
    assert_true(ph_unix_listen_unlink(&b));
    close(a.fd);
    close(b.fd);
}

static void test_bad_paths(void **state)
{
    (void)state;
    ph_unix_listener l;
    ph_diag d = {0};
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal(ph_unix_listen(longp, 0600, 8, &l, &d), PH_E_LIMIT);
    assert_int_equal(strncmp(d.message, "unix_socket_path_too_long: ", 27), 0);
    assert_int_equal(ph_unix_listen("", 0600, 8, &l, &d), PH_E_INVAL);
    char dir_only[300];
    snprintf(dir_only, sizeof dir_only, "%s/", ph_test_dir);
    assert_int_equal(ph_unix_listen(dir_only, 0600, 8, &l, &d), PH_E_INVAL);
    assert_int_equal(l.fd, -1);
    assert_false(ph_unix_listen_unlink(&l));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_listens_and_removes_its_own, setup,
                                        ph_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_a_live_socket_is_refused, setup,
                                        ph_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_a_stale_socket_is_replaced, setup,
                                        ph_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_a_symlink_or_a_file_is_refused, setup,
                                        ph_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_the_stop_leaves_a_path_rebound_since, setup,
                                        ph_test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_bad_paths, setup, ph_test_dir_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
