/* test_gvisor_forwarder.c - pinhole-forwarder, run on the host: it relays
 * TCP connections on a loopback port to a unix socket byte for byte,
 * propagates half-close, refuses to listen anywhere but loopback, and
 * refuses --run outside a sandbox. */
#include "test_support.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "escape_support.h"

#define FORWARDER PH_BINARY_DIR "/bin/pinhole-forwarder"
#define PAYLOAD (1024 * 1024 + 7)
/* Bytes the "proxy" sends back after its reply line: a download large
 * enough to need many read+send rounds and to fill the socket buffers. */
#define DOWNLOAD (8 * 1024 * 1024 + 13)

static char download_byte(size_t i)
{
    return (char)(i * 13 + (i >> 11));
}

static int run_forwarder(const char *const *args)
{
    /* execv wants char *const[]; copy the pointers rather than cast. */
    char *argv[16] = {0};
    for (size_t i = 0; args[i] != NULL && i < 15; i++)
        memcpy(&argv[i], &args[i], sizeof argv[i]);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execv(FORWARDER, argv);
        _exit(126);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static uint16_t free_port(void)
{
    uint16_t port;
    int fd = esc_tcp_listener(&port);
    close(fd);
    return port;
}

/* The "proxy": reads until the client half-closes, then answers with the
 * byte count and a checksum on one line, then DOWNLOAD bytes, then closes. */
typedef struct echo_server {
    int listener;
    pthread_t thread;
} echo_server;

static void *echo_main(void *arg)
{
    echo_server *s = arg;
    struct pollfd p = {.fd = s->listener, .events = POLLIN};
    if (poll(&p, 1, 10000) <= 0)
        return NULL;
    int c = accept(s->listener, NULL, NULL);
    if (c < 0)
        return NULL;
    int flags = fcntl(c, F_GETFL);
    fcntl(c, F_SETFL, flags & ~O_NONBLOCK);
    size_t total = 0;
    uint32_t sum = 0;
    char buf[65536];
    ssize_t n;
    while ((n = read(c, buf, sizeof buf)) > 0) {
        for (ssize_t i = 0; i < n; i++)
            sum = sum * 31 + (uint8_t)buf[i];
        total += (size_t)n;
    }
    char reply[64];
    int len = snprintf(reply, sizeof reply, "got:%zu:%08x\n", total, sum);
    (void)!write(c, reply, (size_t)len);
    for (size_t off = 0; off < DOWNLOAD;) {
        size_t k = 0;
        for (; k < sizeof buf && off + k < DOWNLOAD; k++)
            buf[k] = download_byte(off + k);
        ssize_t w = write(c, buf, k);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(c);
    return NULL;
}

static void forwarder_relays_and_propagates_half_close(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char sock[512], listen_arg[64];
    snprintf(sock, sizeof sock, "%s/proxy.sock", dir);
    echo_server srv = {.listener = esc_unix_listener(sock)};
    assert_int_equal(pthread_create(&srv.thread, NULL, echo_main, &srv), 0);
    uint16_t port = free_port();
    snprintf(listen_arg, sizeof listen_arg, "127.0.0.1:%u", port);
    pid_t fwd = fork();
    if (fwd == 0) {
        execl(FORWARDER, FORWARDER, "--listen", listen_arg, "--connect", sock, (char *)NULL);
        _exit(126);
    }
    int c = -1;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int i = 0; i < 100 && c < 0; i++) {
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(c, (struct sockaddr *)&sin, sizeof sin) != 0) {
            close(c);
            c = -1;
            usleep(20 * 1000);
        }
    }
    assert_true(c >= 0);
    char *payload = malloc(PAYLOAD);
    uint32_t sum = 0;
    for (size_t i = 0; i < PAYLOAD; i++) {
        payload[i] = (char)(i * 7 + (i >> 9));
        sum = sum * 31 + (uint8_t)payload[i];
    }
    size_t sent = 0;
    while (sent < PAYLOAD) {
        ssize_t n = write(c, payload + sent, PAYLOAD - sent);
        assert_true(n > 0);
        sent += (size_t)n;
    }
    /* The server answers only after end of stream: the reply proves the
     * forwarder passed our half-close on and kept the other direction open. */
    assert_int_equal(shutdown(c, SHUT_WR), 0);
    size_t cap = 64 + DOWNLOAD, got = 0;
    char *in = malloc(cap + 1), want[64];
    ssize_t n;
    while (got < cap && (n = read(c, in + got, cap - got)) > 0)
        got += (size_t)n;
    in[got] = '\0';
    int line = snprintf(want, sizeof want, "got:%d:%08x\n", PAYLOAD, sum);
    assert_true(got >= (size_t)line);
    assert_memory_equal(in, want, (size_t)line);
    /* The download arrived whole and in order, then end of stream. */
    assert_int_equal(got - (size_t)line, DOWNLOAD);
    for (size_t i = 0; i < DOWNLOAD; i++)
        if (in[line + i] != download_byte(i))
            fail_msg("download byte %zu differs", i);
    free(in);
    close(c);
    free(payload);
    pthread_join(srv.thread, NULL);
    close(srv.listener);
    kill(fwd, SIGTERM);
    int status;
    waitpid(fwd, &status, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    ph_test_rmtree(dir);
    free(dir);
}

static void forwarder_refuses_non_loopback_and_bad_usage(void **state)
{
    (void)state;
    const char *any[] = {FORWARDER, "--listen", "0.0.0.0:3128", "--connect", "/x.sock", NULL};
    assert_int_equal(run_forwarder(any), 2);
    const char *name[] = {FORWARDER, "--listen", "localhost:3128", "--connect", "/x.sock", NULL};
    assert_int_equal(run_forwarder(name), 2);
    const char *port0[] = {FORWARDER, "--listen", "127.0.0.1:0", "--connect", "/x.sock", NULL};
    assert_int_equal(run_forwarder(port0), 2);
    const char *half[] = {FORWARDER, "--listen", "127.0.0.1:3128", NULL};
    assert_int_equal(run_forwarder(half), 2);
    const char *nothing[] = {FORWARDER, NULL};
    assert_int_equal(run_forwarder(nothing), 2);
    const char *help[] = {FORWARDER, "--help", NULL};
    assert_int_equal(run_forwarder(help), 0);
}

/* --run sweeps with kill(-1): it must refuse to run anywhere but inside a
 * sandbox whose init is the forwarder (here: the host, as root). The
 * contract suite covers --run inside gVisor (exit codes, 127, signals). */
static void forwarder_run_refuses_outside_a_sandbox(void **state)
{
    (void)state;
    const char *run[] = {FORWARDER, "--run", "--", "sh", "-c", "exit 3", NULL};
    assert_int_equal(run_forwarder(run), 2);
    const char *mixed[] = {FORWARDER, "--run", "--init", "--", "true", NULL};
    assert_int_equal(run_forwarder(mixed), 2);
}

int main(void)
{
    if (access(FORWARDER, X_OK) != 0) {
        printf("SKIP: %s was not built\n", FORWARDER);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(forwarder_relays_and_propagates_half_close),
        cmocka_unit_test(forwarder_refuses_non_loopback_and_bad_usage),
        cmocka_unit_test(forwarder_run_refuses_outside_a_sandbox),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
