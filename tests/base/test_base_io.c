/* ph_write_all: everything or a clear failure. ph_open_regular: a regular
 * file opened, anything else refused at once, naming its type. */
#include "test_support.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "pinhole/io.h"

static void test_writes_everything(void **state)
{
    (void)state;
    size_t len = 3u << 20;
    char *buf = malloc(len);
    assert_non_null(buf);
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)(i * 7);
    char *dir = ph_test_mkdtemp();
    char path[4200];
    snprintf(path, sizeof path, "%s/f", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ph_write_all(fd, buf, len), 0);
    assert_int_equal(ph_write_all(fd, NULL, 0), 0);
    close(fd);
    size_t got = 0;
    char *back = ph_test_read_file(path, &got);
    assert_int_equal(got, len);
    assert_memory_equal(back, buf, len);
    free(back);
    free(buf);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_failures_say_why(void **state)
{
    (void)state;
    errno = 0;
    assert_int_equal(ph_write_all(-1, "x", 1), -1);
    assert_int_equal(errno, EBADF);
    int p[2];
    assert_int_equal(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    assert_int_equal(ph_write_all(p[1], "x", 1), -1);
    assert_int_equal(errno, EPIPE);
    close(p[1]);
}

/* Refused, its type named, and at once: a FIFO without a writer would
 * block an open(2) without O_NONBLOCK (SIGALRM ends a test that waits). */
static void refused(const char *path, ph_status want, const char *says)
{
    ph_diag d = { 0 };
    int fd = 7;
    alarm(10);
    assert_int_equal(ph_open_regular(path, &fd, NULL, &d), want);
    alarm(0);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(d.message, path));
    assert_non_null(strstr(d.message, says));
}

static void test_open_regular_only(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[4200], fifo[4200], link[4200], sock[4200];
    snprintf(path, sizeof path, "%s/f", dir);
    assert_int_equal(ph_test_write_file(path, "abc", 3), 0);
    int fd = -1;
    struct stat sb;
    assert_int_equal(ph_open_regular(path, &fd, &sb, NULL), PH_OK);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(sb.st_size, 3);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    char b[4];
    assert_int_equal(read(fd, b, sizeof b), 3);
    close(fd);

    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    refused(fifo, PH_E_INVAL, "a FIFO");
    snprintf(link, sizeof link, "%s/link", dir);
    assert_int_equal(symlink(fifo, link), 0);
    refused(link, PH_E_INVAL, "a FIFO");
    refused("/dev/null", PH_E_INVAL, "a character device");
    refused(dir, PH_E_INVAL, "a directory");
    snprintf(sock, sizeof sock, "%s/s", dir);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    assert_true(strlen(sock) < sizeof sa.sun_path);
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    refused(sock, PH_E_INVAL, "a socket");
    close(s);
    snprintf(path, sizeof path, "%s/missing", dir);
    refused(path, PH_E_NOT_FOUND, "No such file");
    ph_test_rmtree(dir);
    free(dir);
}

struct swapper {
    const char *a, *b;
    atomic_bool stop;
};

static void *swap_loop(void *arg)
{
    struct swapper *sw = arg;
    while (!atomic_load(&sw->stop))
        (void)renameat2(AT_FDCWD, sw->a, AT_FDCWD, sw->b, RENAME_EXCHANGE);
    return NULL;
}

/* The path turns from a regular file into a FIFO and back, as fast as
 * rename(2) goes, while it is opened: between the check and the open, and
 * between the open and its fstat. Every answer is a regular file or a
 * refusal, and none waits (SIGALRM ends a test that does). */
static void test_open_regular_under_a_swap(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[4200], other[4200];
    snprintf(path, sizeof path, "%s/table", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    assert_int_equal(ph_test_write_file(path, "abc", 3), 0);
    assert_int_equal(mkfifo(other, 0600), 0);
    struct swapper sw = { .a = path, .b = other };
    atomic_init(&sw.stop, false);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, swap_loop, &sw), 0);
    unsigned opened = 0, fifo = 0, replaced = 0;
    alarm(60);
    for (int i = 0; i < 20000; i++) {
        int fd = -1;
        struct stat sb;
        ph_diag d = { 0 };
        ph_status st = ph_open_regular(path, &fd, &sb, &d);
        if (st == PH_OK) {
            struct stat now;
            assert_int_equal(fstat(fd, &now), 0);
            assert_true(S_ISREG(now.st_mode) && S_ISREG(sb.st_mode));
            close(fd);
            opened++;
            continue;
        }
        assert_int_equal(fd, -1);
        if (st == PH_E_INVAL && strstr(d.message, "(a FIFO)") != NULL)
            fifo++;
        else if (st == PH_E_INVAL && strstr(d.message, "replaced while being opened") != NULL)
            replaced++;
        else if (st != PH_E_NOT_FOUND) /* between the two names of a swap */
            fail_msg("unexpected: %s", d.message);
    }
    alarm(0);
    atomic_store(&sw.stop, true);
    assert_int_equal(pthread_join(t, NULL), 0);
    print_message("20000 opens under a swap: %u regular, %u FIFO refused, %u replaced\n", opened,
                  fifo, replaced);
    ph_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_everything),
        cmocka_unit_test(test_failures_say_why),
        cmocka_unit_test(test_open_regular_only),
        cmocka_unit_test(test_open_regular_under_a_swap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
