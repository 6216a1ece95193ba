/* test_connect.c - dialing pinned addresses in order under one deadline, on
 * loopback listeners only: first address refused then second accepted,
 * every address refused, a listener that never completes the handshake. */
#include "test_support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/connect.h"

/* A TCP listener on 127.0.0.1 (backlog as given); *port gets its port. */
static int listener(int backlog, uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(fd, backlog), 0);
    socklen_t len = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &len);
    *port = ntohs(sin.sin_port);
    return fd;
}

/* A port with nothing listening (bound then closed). */
static uint16_t closed_port(void)
{
    uint16_t port;
    int fd = listener(1, &port);
    close(fd);
    return port;
}

static void add(ph_pinned_addrs *a, uint16_t port)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&a->addr[a->count];
    memset(&a->addr[a->count], 0, sizeof a->addr[a->count]);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a->addr_len[a->count++] = sizeof *sin;
}

static void test_dials_in_order_until_one_accepts(void **state)
{
    (void)state;
    uint16_t port;
    int l = listener(8, &port);
    ph_pinned_addrs a = {0};
    add(&a, closed_port());
    add(&a, port);
    int fd = -2;
    size_t idx = 99;
    ph_reason r;
    assert_int_equal(ph_connect_pinned(&a, 2000, &fd, &idx, &r, NULL), PH_OK);
    assert_true(fd >= 0);
    assert_int_equal(idx, 1);
    assert_int_equal(r, PH_REASON_ALLOWED);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    int c = accept(l, NULL, NULL);
    assert_true(c >= 0);
    assert_int_equal(write(fd, "x", 1), 1);
    char b;
    assert_int_equal(read(c, &b, 1), 1);
    close(c);
    close(fd);
    close(l);
}

static void test_all_refused_is_unreachable(void **state)
{
    (void)state;
    ph_pinned_addrs a = {0};
    add(&a, closed_port());
    add(&a, closed_port());
    int fd = -2;
    ph_reason r;
    ph_diag d;
    memset(&d, 0, sizeof d);
    assert_int_equal(ph_connect_pinned(&a, 2000, &fd, NULL, &r, &d), PH_E_DENIED);
    assert_int_equal(fd, -1);
    assert_int_equal(r, PH_REASON_UPSTREAM_UNREACHABLE);
    assert_non_null(strstr(d.message, "refused"));
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_deadline_is_upstream_timeout(void **state)
{
    (void)state;
    /* A listener whose accept queue is full drops further SYNs: the
     * handshake never completes, like a black-holed address. */
    uint16_t port;
    int l = listener(0, &port);
    ph_pinned_addrs a = {0};
    add(&a, port);
    int fillers[8];
    size_t nfill = 0;
    for (; nfill < 8; nfill++) {
        fillers[nfill] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        connect(fillers[nfill], (struct sockaddr *)&a.addr[0], a.addr_len[0]);
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int fd = -2;
    ph_reason r;
    int64_t t0 = now_ms();
    assert_int_equal(ph_connect_pinned(&a, 400, &fd, NULL, &r, NULL), PH_E_DENIED);
    int64_t took = now_ms() - t0;
    assert_int_equal(fd, -1);
    assert_int_equal(r, PH_REASON_UPSTREAM_TIMEOUT);
    assert_true(took >= 350 && took < 1500);
    for (size_t i = 0; i < nfill; i++)
        close(fillers[i]);
    close(l);
}

static void test_empty_list_is_invalid(void **state)
{
    (void)state;
    ph_pinned_addrs a = {0};
    int fd = -2;
    assert_int_equal(ph_connect_pinned(&a, 100, &fd, NULL, NULL, NULL), PH_E_INVAL);
    assert_int_equal(fd, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dials_in_order_until_one_accepts),
        cmocka_unit_test(test_all_refused_is_unreachable),
        cmocka_unit_test(test_deadline_is_upstream_timeout),
        cmocka_unit_test(test_empty_list_is_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
