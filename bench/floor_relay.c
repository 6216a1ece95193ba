/* floor_relay.c - bench_proxy's latency floor (floor_relay.h): the least a
 * CONNECT relay can do, so the added latency of a real proxy can be read
 * against what any relay costs on this machine in the same run.
 *
 * It decides nothing, resolves nothing and logs nothing: the CONNECT
 * target's port is dialed on 127.0.0.1 (the bench's names all point
 * there). It is a pool of threads blocked in accept(2) on one listening
 * socket (the kernel wakes one of them per connection); the thread that
 * got a connection serves it to its end with blocking calls (read the
 * head, connect, write the 200, then poll(2) on both sockets), so a
 * transaction costs the relay no hand-over between threads, only the
 * wake-ups every relay needs: the client's head, the upstream's answer
 * and the client's bytes each wake it once. Like pinhole-proxy's, its
 * listener defers accept until the head arrived (TCP_DEFER_ACCEPT) and its
 * sockets have TCP_NODELAY.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor_relay.h"

/* Threads blocked in accept: more than the bench's one latency client ever
 * keeps busy at once (a tunnel still closing while the next one opens). */
#define FLOOR_THREADS 8

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

/* The upstream for a head "CONNECT host:port ...": 127.0.0.1:port,
 * connected with TCP_NODELAY; -1 when the head names no port. */
static int dial_target(const char *head)
{
    const char *sp = strchr(head, ' '), *end = sp ? strchr(sp + 1, ' ') : NULL;
    const char *colon = end ? memrchr(sp, ':', (size_t)(end - sp)) : NULL;
    int port = colon ? atoi(colon + 1) : 0;
    if (port <= 0 || port > 65535)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Both ways until both ended; an EOF is passed on as shutdown(SHUT_WR). */
static void relay(int fd[2])
{
    static _Thread_local char buf[65536];
    bool open[2] = { true, true };
    while (open[0] || open[1]) {
        struct pollfd p[2] = { { .fd = open[0] ? fd[0] : -1, .events = POLLIN },
                               { .fd = open[1] ? fd[1] : -1, .events = POLLIN } };
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return;
        for (int i = 0; i < 2; i++) {
            if (!open[i] || p[i].revents == 0)
                continue;
            ssize_t n = recv(fd[i], buf, sizeof buf, 0);
            if (n < 0)
                return;
            if (n == 0) {
                open[i] = false;
                shutdown(fd[!i], SHUT_WR);
            } else if (!write_all(fd[!i], buf, (size_t)n)) {
                return;
            }
        }
    }
}

static void serve(int client)
{
    char head[8192];
    size_t got = 0;
    char *end = NULL;
    while (end == NULL && got < sizeof head - 1) {
        ssize_t n = recv(client, head + got, sizeof head - 1 - got, 0);
        if (n <= 0)
            return;
        got += (size_t)n;
        head[got] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    int fd[2] = { client, end ? dial_target(head) : -1 };
    if (fd[1] < 0)
        return;
    size_t early = got - (size_t)(end + 4 - head);
    if (write_all(client, ok, sizeof ok - 1) && write_all(fd[1], end + 4, early))
        relay(fd);
    close(fd[1]);
}

static void *accept_thread(void *arg)
{
    int lfd = *(const int *)arg;
    for (;;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EMFILE || errno == ENFILE)
                usleep(100000);
            continue;
        }
        serve(c);
        close(c);
    }
    return NULL;
}

pid_t bench_floor_relay_start(int *port)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, defer = 1;
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &len) != 0 || listen(lfd, 4096) != 0) {
        if (lfd >= 0)
            close(lfd);
        return -1;
    }
    setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(lfd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid != 0) {
        close(lfd);
        return pid;
    }
    pthread_t th;
    for (int i = 1; i < FLOOR_THREADS; i++)
        pthread_create(&th, NULL, accept_thread, &lfd);
    accept_thread(&lfd);
    _exit(0);
}
