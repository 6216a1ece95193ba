/* proxy_http.c - bench_proxy's plain-HTTP round: keep-alive GETs of a
 * 64-byte body, through a forwarding proxy (absolute-form requests, the way
 * HTTP_PROXY makes clients send them) against the same GETs in origin-form
 * straight to the origin, alternating in one run. Prints figures; asserts
 * none.
 *
 * The origin is a child process: one libevent loop answering every request
 * head it reads with a 200 and 64 bytes (Content-Length), keeping the
 * connection open. A client keeps its connection open across requests and
 * opens a new one only when the other side closed it or said
 * "Connection: close", so the connection count shows whether a proxy kept
 * the client's connection alive; the origin counts the connections it
 * accepted (shared memory), which shows whether the proxy reused its
 * upstream connections. The proxy's CPU time per request comes from
 * /proc/PID/stat (all its threads), steadier than rates on a shared machine.
 */
#include "proxy_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "bench_util.h"

#define HTTP_BODY 64
#define HTTP_ROUNDS 3
#define HTTP_LATENCY_N 2000
#define HTTP_MAX_CLIENTS 16

static pid_t origin_pid;
static int origin_port;
static atomic_long *origin_accepts; /* shared with the origin's process */

/* ---- the origin (child process) ----------------------------------------- */

static const char origin_reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                                   "Content-Length: 64\r\n\r\n"
                                   "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* Every complete request head (GETs carry no body) gets one reply. */
static void origin_read(struct bufferevent *b, void *arg)
{
    (void)arg;
    struct evbuffer *in = bufferevent_get_input(b);
    for (;;) {
        struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
        if (end.pos < 0)
            break;
        evbuffer_drain(in, (size_t)end.pos + 4);
        bufferevent_write(b, origin_reply, sizeof origin_reply - 1);
    }
    if (evbuffer_get_length(in) > 65536) /* not HTTP: not ours to serve */
        bufferevent_free(b);
}

static void origin_event(struct bufferevent *b, short what, void *arg)
{
    (void)arg;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        bufferevent_free(b);
}

static void origin_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int n,
                          void *arg)
{
    (void)sa, (void)n, (void)arg;
    int one = 1;
    atomic_fetch_add(origin_accepts, 1);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct bufferevent *b = bufferevent_socket_new(evconnlistener_get_base(l), fd,
                                                   BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(b, origin_read, NULL, origin_event, NULL);
    bufferevent_enable(b, EV_READ | EV_WRITE);
}

/* Listens on 127.0.0.1, port 0 (the kernel's choice, read back), and
 * serves from a child; 0 started, -1 not. */
static int origin_start(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4096) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (origin_accepts == NULL) {
        void *m = mmap(NULL, sizeof *origin_accepts, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return -1;
        }
        origin_accepts = m;
        atomic_init(origin_accepts, 0);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return -1;
    }
    if (pid == 0) {
        struct event_base *base = event_base_new();
        evutil_make_socket_nonblocking(fd);
        if (base == NULL ||
            evconnlistener_new(base, origin_accept, NULL, LEV_OPT_CLOSE_ON_FREE, -1, fd) == NULL)
            _exit(1);
        event_base_dispatch(base);
        _exit(0);
    }
    close(fd);
    origin_pid = pid;
    origin_port = ntohs(a.sin_port);
    return 0;
}

void bench_http_stop(void)
{
    if (origin_pid > 0) {
        kill(origin_pid, SIGKILL);
        waitpid(origin_pid, NULL, 0);
    }
    origin_pid = 0;
}

/* ---- the client --------------------------------------------------------- */

/* Where requests go: the request bytes and the port to connect to. */
typedef struct http_target {
    int port;
    char req[1024];
    size_t req_len;
} http_target;

/* One client's connection. */
typedef struct http_conn {
    int fd;
    long opened; /* connections this client opened */
} http_conn;

static int http_dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (fd < 0)
        return -1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = { 5, 0 }; /* never hang the benchmark on a stuck peer */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The value of header `name` in the head `h` (NUL-terminated), or NULL. */
static const char *head_field(const char *h, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(h, "\r\n"); p != NULL; p = strstr(p + 2, "\r\n"))
        if (strncasecmp(p + 2, name, n) == 0 && p[2 + n] == ':') {
            const char *v = p + 3 + n;
            while (*v == ' ' || *v == '\t')
                v++;
            return v;
        }
    return NULL;
}

/* One request on c (opening it first when closed): 0 a 200 with the 64
 * bytes, -1 anything else. The connection stays open unless the answer or
 * the peer ended it. */
static int http_request(const http_target *t, http_conn *c)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        bool fresh = c->fd < 0;
        if (fresh) {
            if ((c->fd = http_dial(t->port)) < 0)
                return -1;
            c->opened++;
        }
        char buf[4096 + HTTP_BODY];
        size_t got = 0;
        char *end = NULL;
        if (write(c->fd, t->req, t->req_len) == (ssize_t)t->req_len) {
            while (got < sizeof buf - 1) {
                ssize_t r = read(c->fd, buf + got, sizeof buf - 1 - got);
                if (r <= 0)
                    break;
                got += (size_t)r;
                buf[got] = '\0';
                if ((end = strstr(buf, "\r\n\r\n")) == NULL)
                    continue;
                const char *cl = head_field(buf, "Content-Length");
                size_t body = cl ? (size_t)strtoul(cl, NULL, 10) : 0;
                size_t head = (size_t)(end + 4 - buf);
                if (got >= head + body)
                    break;
            }
        }
        if (end == NULL) { /* closed (or failed) before an answer */
            close(c->fd);
            c->fd = -1;
            if (fresh || got > 0)
                return -1;
            continue; /* a kept-alive connection the peer had closed: once more */
        }
        *end = '\0';
        const char *cl = head_field(buf, "Content-Length");
        const char *conn = head_field(buf, "Connection");
        size_t head = (size_t)(end + 4 - buf);
        bool ok = memcmp(buf, "HTTP/1.", 7) == 0 && memcmp(buf + 8, " 200", 4) == 0 && cl &&
                  strtoul(cl, NULL, 10) == HTTP_BODY && got == head + HTTP_BODY;
        if (!ok || (conn && strncasecmp(conn, "close", 5) == 0)) {
            close(c->fd);
            c->fd = -1;
        }
        return ok ? 0 : -1;
    }
    return -1;
}

typedef struct http_load {
    const http_target *t;
    double until;
    long done, failed, opened;
} http_load;

static void *http_thread(void *p)
{
    http_load *a = p;
    http_conn c = { -1, 0 };
    while (bench_now_s() < a->until) {
        if (http_request(a->t, &c) == 0)
            a->done++;
        else
            a->failed++;
    }
    if (c.fd >= 0)
        close(c.fd);
    a->opened = c.opened;
    return NULL;
}

/* Requests/s of n threads for `seconds`; the requests answered, the
 * failures and the connections opened in *done_out, *failed and *opened. */
static double http_rate(const http_target *t, int n, double seconds, long *done_out,
                        long *failed, long *opened)
{
    pthread_t th[HTTP_MAX_CLIENTS];
    http_load a[HTTP_MAX_CLIENTS];
    double t0 = bench_now_s();
    int started = 0;
    for (int i = 0; i < n; i++) {
        a[i] = (http_load){ t, t0 + seconds, 0, 0, 0 };
        if (pthread_create(&th[i], NULL, http_thread, &a[i]) == 0)
            started++;
        else
            break;
    }
    long done = 0;
    *failed = *opened = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        done += a[i].done, *failed += a[i].failed, *opened += a[i].opened;
    }
    double dt = bench_now_s() - t0;
    *done_out = done;
    return dt > 0 ? (double)done / dt : 0;
}

/* The request to `host` (NULL: origin-form, straight to the origin). */
static void http_target_init(http_target *t, int port, const char *host, const char *token)
{
    int n;
    t->port = port;
    if (host == NULL)
        n = snprintf(t->req, sizeof t->req, "GET /bench HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
                     origin_port);
    else
        n = snprintf(t->req, sizeof t->req,
                     "GET http://%s:%d/bench HTTP/1.1\r\nHost: %s:%d\r\n%s%s%s\r\n", host,
                     origin_port, host, origin_port, token ? "Proxy-Authorization: Bearer " : "",
                     token ? token : "", token ? "\r\n" : "");
    t->req_len = n > 0 && (size_t)n < sizeof t->req ? (size_t)n : 0;
}

void bench_http_compare(const char *name, int proxy_port, pid_t proxy_pid, const char *host,
                        const char *token, int clients, bench_http_fig *out)
{
    bench_http_fig fig_none = { 0, 0, -1 };
    if (out == NULL)
        out = &fig_none;
    *out = fig_none;
    if (origin_pid == 0 && origin_start() != 0) {
        printf("plain HTTP          no origin (cannot listen or fork): no figures\n");
        return;
    }
    if (clients > HTTP_MAX_CLIENTS)
        clients = HTTP_MAX_CLIENTS;
    http_target direct, px;
    http_target_init(&direct, origin_port, NULL, NULL);
    http_target_init(&px, proxy_port, host, token);
    http_conn probe = { -1, 0 };
    int warm = http_request(&px, &probe); /* also warms the proxy's DNS cache */
    if (probe.fd >= 0)
        close(probe.fd);
    if (warm != 0) {
        printf("plain HTTP          %s refused or failed a GET: no figures\n", name);
        fflush(stdout);
        return;
    }
    double best[2] = { 0, 0 }, px_cpu = 0;
    long fails[2] = { 0, 0 }, conns[2] = { 0, 0 }, px_done = 0, up_conns = 0;
    for (int r = 0; r < HTTP_ROUNDS; r++) {
        for (int k = 0; k < 2; k++) {
            long d, f, o, a0 = atomic_load(origin_accepts);
            double c0 = k == 1 ? bench_proc_cpu_s(proxy_pid) : 0;
            double rate = http_rate(k == 0 ? &direct : &px, clients, 1.0, &d, &f, &o);
            if (k == 1) {
                px_cpu += bench_proc_cpu_s(proxy_pid) - c0;
                px_done += d;
                up_conns += atomic_load(origin_accepts) - a0;
            }
            fails[k] += f;
            if (rate > best[k])
                best[k] = rate, conns[k] = o;
        }
    }
    printf("plain HTTP GET 64 B keep-alive, %d client threads: direct %8.0f req/s  %s %8.0f "
           "req/s  ratio %.2fx (best of %d alternating 1 s rounds); connections in the best "
           "round: direct %ld, proxied %ld; failed: direct %ld, proxied %ld\n",
           clients, best[0], name, best[1], best[0] > 0 ? best[1] / best[0] : 0, HTTP_ROUNDS,
           conns[0], conns[1], fails[0], fails[1]);
    out->direct = best[0], out->proxied = best[1];
    if (px_done > 0) {
        out->cpu_us = px_cpu / (double)px_done * 1e6;
        printf("  %s over its %d rounds: %ld requests, %ld upstream connections opened, CPU "
               "%.1f us per request (its threads, /proc/PID/stat)\n",
               name, HTTP_ROUNDS, px_done, up_conns, out->cpu_us);
    }
    fflush(stdout);

    /* Median request: one client, one request each way in turn. */
    static double lat[2][HTTP_LATENCY_N];
    int nl[2] = { 0, 0 };
    http_conn c[2] = { { -1, 0 }, { -1, 0 } };
    for (int i = 0; i < HTTP_LATENCY_N; i++)
        for (int k = 0; k < 2; k++) {
            double t0 = bench_now_s();
            if (http_request(k == 0 ? &direct : &px, &c[k]) == 0)
                lat[k][nl[k]++] = bench_now_s() - t0;
        }
    for (int k = 0; k < 2; k++)
        if (c[k].fd >= 0)
            close(c[k].fd);
    if (nl[0] == 0 || nl[1] == 0) {
        printf("plain HTTP median   none: every request failed\n");
    } else {
        double md = bench_quantile(lat[0], nl[0], 0.5), mp = bench_quantile(lat[1], nl[1], 0.5);
        printf("plain HTTP median   direct %7.1f us  %s %7.1f us  added %.1f us; connections: "
               "direct %ld, proxied %ld; failed: direct %d, proxied %d of %d\n",
               md * 1e6, name, mp * 1e6, (mp - md) * 1e6, c[0].opened, c[1].opened,
               HTTP_LATENCY_N - nl[0], HTTP_LATENCY_N - nl[1], HTTP_LATENCY_N);
    }
    fflush(stdout);
}
