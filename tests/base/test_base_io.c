/* ph_write_all: everything or a clear failure. */
#include "test_support.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_everything),
        cmocka_unit_test(test_failures_say_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
