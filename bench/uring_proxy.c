/* uring_proxy.c - a prototype of pinhole-proxy's CONNECT path on io_uring
 * (liburing 2.3), for bench_proxy to measure beside the libevent proxy in
 * one run (docs/pinhole-proxy.md, "io_uring prototype"). Not a product:
 * one thread, fixed limits, CONNECT only, no TLS, no reload, no admin.
 *
 * Per connection it does the work pinhole-proxy does for a CONNECT:
 *   multishot accept (TCP_DEFER_ACCEPT and TCP_NODELAY on the listener,
 *   inherited) -> recv of the head (with a linked timeout) -> the proxy's
 *   own head parser (ph_proxy_request_parse) -> libpinhole's one decision
 *   (ph_decide_connect: authority, grant, allowlist, on the table and key
 *   the proxy gets) -> the checked addresses of the name (ph_resolver on
 *   the same DNS server, its answer kept for its TTL like the proxy's
 *   cache) -> socket(2), then TCP_NODELAY (an io_uring socket command
 *   where the kernel has it), connect and its timeout as one linked chain
 *   -> the 200 -> relay both ways (recv and send SQEs, one buffer per
 *   direction, EOF becomes shutdown(2) SHUT_WR of the other side) -> close
 *   both and write one log line (SQEs too).
 * The loop submits everything queued and waits in one
 * io_uring_submit_and_wait per turn, then handles every completion.
 *
 * It takes pinhole-proxy's command line (the options bench_proxy passes;
 * those it has no use for are accepted and ignored) and is ready when its
 * listener accepts, the same launch protocol as the proxy's.
 *
 * Left out, on purpose (the prototype measures the per-transaction path):
 * idle and lifetime timeouts of a tunnel, per-peer and per-lease limits,
 * the peer's address in the log (a multishot accept shares one address
 * buffer between its completions), plain-HTTP forwarding, reloads. A name
 * not in the answer cache is resolved blocking (a real port would drive
 * the resolver from the ring).
 *
 * Ownership: a conn is malloc'ed at accept and freed only by op_done, when
 * its last operation in flight completed after it was closed (c->ops
 * counts the SQEs whose completion is still to come). Each SQE's user_data
 * is the conn's address with the operation's kind in the low 4 bits
 * (malloc aligns to 16); the listener's accept carries no conn.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <liburing.h>

#include "pinhole/guard.h"
#include "pinhole/resolve.h"
#include "proxy-int.h" /* px_drop_privileges (proxy/src/privdrop.c) */
#include "proxy_request.h"

#define RING_ENTRIES 4096
#define MAX_CONNS 8192
#define BUF_BYTES 16384
#define HEAD_MAX (PH_PREQ_HEAD_MAX + 4096)
#define CACHE_SLOTS 16
#define CACHE_TTL_S 60

/* The kinds of operation, in user_data's low 4 bits. */
enum op {
    OP_ACCEPT = 0,
    OP_HEAD,      /* recv of the request head */
    OP_TIMEOUT,   /* a linked timeout (head recv, connect) */
    OP_SOCKOPT,   /* TCP_NODELAY on the upstream socket */
    OP_CONNECT,
    OP_REPLY,     /* the 200 or a refusal */
    OP_RECV,      /* + direction: OP_RECV (client -> upstream), OP_RECV + 1 */
    OP_RECV_UP,
    OP_SEND,      /* OP_SEND + direction */
    OP_SEND_UP,
    OP_CLOSE,
    OP_LOG,
};

_Static_assert(OP_LOG < 16, "an operation's kind fits in user_data's low 4 bits");

typedef enum { ST_HEAD, ST_CONNECT, ST_RELAY, ST_REPLY, ST_CLOSING } conn_state;

/* One direction of the relay: bytes from fd[i] to fd[1 - i] (0: client ->
 * upstream, 1: upstream -> client), through buf. */
typedef struct dir {
    char buf[BUF_BYTES];
    size_t len, off; /* bytes in buf; of those, already sent */
    bool eof;        /* the source said EOF and the sink was shut for writing */
    uint64_t moved;
} dir;

/* One client connection and its tunnel (ownership: the rule at the top of
 * this file; freed only by op_done). */
typedef struct conn {
    int fd[2]; /* client, upstream; -1 when none */
    conn_state state;
    int ops;   /* SQEs in flight */
    bool reply_done; /* the 200 left: upstream bytes may follow it */
    bool closes_queued;
    uint64_t id;
    size_t head_got;
    int status;
    const char *end;
    ph_reason reason;
    ph_pinned_addrs addrs;
    size_t next_addr;
    char host[PH_HOST_MAX + 1];
    uint16_t port;
    char tenant[PH_GRANT_FIELD_MAX + 1], lease[PH_GRANT_FIELD_MAX + 1];
    char reply[512];
    char log[768];
    uint8_t head[HEAD_MAX];
    dir d[2];
} conn;

static struct io_uring ring;
static ph_guard *guard;
static ph_resolver *resolver;
static int listen_fd, nconns;
static uint64_t next_id;
static bool sockopt_by_ring; /* the kernel takes setsockopt as an io_uring command */
static struct __kernel_timespec head_timeout, connect_timeout;
static const int one = 1;

/* A small cache of checked answers: name and port -> addresses, kept for
 * CACHE_TTL_S (the proxy's resolver keeps them for their DNS TTL). */
typedef struct cache_slot {
    char host[PH_HOST_MAX + 1];
    uint16_t port;
    time_t until;
    ph_pinned_addrs addrs;
} cache_slot;
static cache_slot cache[CACHE_SLOTS];

static void conn_close(conn *c, const char *end);

/* ---- submission ----------------------------------------------------------- */

/* The next SQE; a full queue is submitted first (never NULL after that:
 * the queue was just emptied). */
static struct io_uring_sqe *sqe_get(void)
{
    struct io_uring_sqe *s = io_uring_get_sqe(&ring);
    if (s == NULL) {
        io_uring_submit(&ring);
        s = io_uring_get_sqe(&ring);
    }
    return s;
}

/* An SQE for c's operation `op` (counted in flight). */
static struct io_uring_sqe *sqe_for(conn *c, enum op op)
{
    struct io_uring_sqe *s = sqe_get();
    io_uring_sqe_set_data64(s, (uint64_t)(uintptr_t)c | (uint64_t)op);
    c->ops++;
    return s;
}

static void arm_accept(void)
{
    struct io_uring_sqe *s = sqe_get();
    io_uring_prep_multishot_accept(s, listen_fd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, OP_ACCEPT);
}

/* setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, 1) as an io_uring socket
 * command (IORING_OP_URING_CMD, SOCKET_URING_OP_SETSOCKOPT, Linux 6.7):
 * liburing 2.3's SQE has no names for its fields, so they are set where
 * the kernel's layout puts them (level and optname in addr, optlen in
 * file_index, optval in addr3). */
static void prep_nodelay(struct io_uring_sqe *s, int fd)
{
    io_uring_prep_rw(IORING_OP_URING_CMD, s, fd, NULL, 0, 0);
    s->cmd_op = 3; /* SOCKET_URING_OP_SETSOCKOPT */
    s->addr = (uint64_t)IPPROTO_TCP | ((uint64_t)TCP_NODELAY << 32);
    s->file_index = sizeof one;
    s->addr3 = (uint64_t)(uintptr_t)&one;
}

/* Whether this kernel takes prep_nodelay (probed once at start). */
static bool probe_sockopt_by_ring(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct io_uring_sqe *s = sqe_get();
    prep_nodelay(s, fd);
    io_uring_sqe_set_data64(s, OP_ACCEPT);
    struct io_uring_cqe *cqe;
    bool ok = false;
    if (io_uring_submit_and_wait(&ring, 1) == 1 && io_uring_wait_cqe(&ring, &cqe) == 0) {
        ok = cqe->res == 0;
        io_uring_cqe_seen(&ring, cqe);
    }
    int v = 0;
    socklen_t len = sizeof v;
    ok = ok && getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 && v == 1;
    close(fd);
    return ok;
}

/* ---- connection ----------------------------------------------------------- */

static void head_recv(conn *c)
{
    struct io_uring_sqe *s = sqe_for(c, OP_HEAD);
    io_uring_prep_recv(s, c->fd[0], c->head + c->head_got, HEAD_MAX - c->head_got, 0);
    s->flags |= IOSQE_IO_LINK;
    io_uring_prep_link_timeout(sqe_for(c, OP_TIMEOUT), &head_timeout, 0);
}

static void on_accept(int res, unsigned flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        arm_accept(); /* the multishot ended (an error, or a full CQ) */
    if (res < 0)
        return;
    conn *c = nconns < MAX_CONNS ? malloc(sizeof *c) : NULL;
    if (c == NULL) {
        close(res);
        return;
    }
    nconns++;
    c->fd[0] = res;
    c->fd[1] = -1;
    c->state = ST_HEAD;
    c->ops = 0;
    c->reply_done = c->closes_queued = false;
    c->id = ++next_id;
    c->head_got = 0;
    c->status = 0;
    c->end = NULL;
    c->reason = PH_REASON_PARSE_ERROR;
    c->next_addr = 0;
    c->host[0] = c->tenant[0] = c->lease[0] = '\0';
    c->port = 0;
    for (int i = 0; i < 2; i++)
        c->d[i].len = c->d[i].off = 0, c->d[i].eof = false, c->d[i].moved = 0;
    head_recv(c); /* TCP_DEFER_ACCEPT: the head is normally there already */
}

/* Answers `len` bytes of c->reply and closes after (ST_REPLY). */
static void send_reply(conn *c, size_t len)
{
    io_uring_prep_send(sqe_for(c, OP_REPLY), c->fd[0], c->reply, len, MSG_NOSIGNAL);
}

static void refuse(conn *c, int status, ph_reason reason)
{
    c->status = status;
    c->reason = reason;
    c->state = ST_REPLY;
    int n = snprintf(c->reply, sizeof c->reply,
                     "HTTP/1.1 %d Refused\r\nPinhole-Reason: %s\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n",
                     status, ph_reason_code(reason));
    send_reply(c, (size_t)n);
}

static void dial_next(conn *c)
{
    while (c->next_addr < c->addrs.count) {
        size_t i = c->next_addr++;
        const struct sockaddr *sa = (const struct sockaddr *)&c->addrs.addr[i];
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        c->fd[1] = fd;
        c->state = ST_CONNECT;
        /* One chain: TCP_NODELAY (hard link: the connect runs whatever it
         * answered), the connect, its timeout. */
        if (sockopt_by_ring) {
            struct io_uring_sqe *s = sqe_for(c, OP_SOCKOPT);
            prep_nodelay(s, fd);
            s->flags |= IOSQE_IO_HARDLINK;
        } else {
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        struct io_uring_sqe *s = sqe_for(c, OP_CONNECT);
        io_uring_prep_connect(s, fd, sa, c->addrs.addr_len[i]);
        s->flags |= IOSQE_IO_LINK;
        io_uring_prep_link_timeout(sqe_for(c, OP_TIMEOUT), &connect_timeout, 0);
        return;
    }
    refuse(c, 502, PH_REASON_UPSTREAM_UNREACHABLE);
}

/* The checked addresses of c->host:c->port, from the cache or DNS. */
static bool resolve(conn *c, ph_reason *reason)
{
    time_t now = time(NULL);
    cache_slot *slot = &cache[0];
    for (int i = 0; i < CACHE_SLOTS; i++) {
        if (cache[i].until > now && cache[i].port == c->port && strcmp(cache[i].host, c->host) == 0) {
            c->addrs = cache[i].addrs;
            return true;
        }
        if (cache[i].until < slot->until)
            slot = &cache[i];
    }
    ph_diag diag = { 0 };
    if (ph_resolver_resolve(resolver, c->host, c->port, &c->addrs, reason, &diag) != PH_OK)
        return false;
    snprintf(slot->host, sizeof slot->host, "%s", c->host);
    slot->port = c->port;
    slot->until = now + CACHE_TTL_S;
    slot->addrs = c->addrs;
    return true;
}

static void decide(conn *c, const ph_proxy_request *req)
{
    ph_connect_request r = {
        .authority = (const char *)c->head + req->target.off,
        .authority_len = req->target.len,
        .proxy_authorization =
            req->has_authorization ? (const char *)c->head + req->authorization.off : NULL,
        .proxy_authorization_len = req->has_authorization ? req->authorization.len : 0,
        .now = (int64_t)time(NULL),
    };
    ph_decision d;
    ph_decide_connect(guard, &r, &d);
    if (d.has_grant) {
        memcpy(c->tenant, d.grant.tenant, sizeof c->tenant);
        memcpy(c->lease, d.grant.lease, sizeof c->lease);
    }
    if (!d.allowed) {
        refuse(c, d.http_status, d.reason);
        return;
    }
    snprintf(c->host, sizeof c->host, "%s", d.verdict.host);
    c->port = d.verdict.port;
    ph_reason why = PH_REASON_DNS_FAILURE;
    if (!resolve(c, &why)) {
        refuse(c, ph_reason_http_status(why), why);
        return;
    }
    dial_next(c);
}

static void on_head(conn *c, int res)
{
    if (res <= 0) {
        if (res == -ECANCELED) /* the linked timeout fired */
            refuse(c, 408, PH_REASON_PARSE_ERROR);
        else
            conn_close(c, res == 0 ? "client_closed" : "client_error");
        return;
    }
    c->head_got += (size_t)res;
    ph_proxy_request req;
    switch (ph_proxy_request_parse(c->head, c->head_got, &req)) {
    case PH_PREQ_INCOMPLETE:
        if (c->head_got == HEAD_MAX)
            refuse(c, ph_reason_http_status(PH_REASON_HTTP_HEAD_TOO_LARGE),
                   PH_REASON_HTTP_HEAD_TOO_LARGE);
        else
            head_recv(c);
        return;
    case PH_PREQ_REFUSED:
        refuse(c, ph_reason_http_status(req.reason), req.reason);
        return;
    case PH_PREQ_DONE:
        break;
    }
    /* Bytes after the head go to the upstream first. */
    size_t early = c->head_got - req.head_len;
    memcpy(c->d[0].buf, c->head + req.head_len, early);
    c->d[0].len = early;
    decide(c, &req);
}

/* Direction i: sends what its buffer holds, or reads the next bytes. */
static void dir_step(conn *c, int i)
{
    dir *d = &c->d[i];
    if (d->off < d->len) {
        if (i == 1 && !c->reply_done)
            return; /* after the 200 (on_reply resumes it) */
        io_uring_prep_send(sqe_for(c, OP_SEND + i), c->fd[1 - i], d->buf + d->off,
                           d->len - d->off, MSG_NOSIGNAL);
        return;
    }
    d->len = d->off = 0;
    io_uring_prep_recv(sqe_for(c, OP_RECV + i), c->fd[i], d->buf, sizeof d->buf, 0);
}

static void on_connect(conn *c, int res)
{
    if (res < 0) {
        close(c->fd[1]);
        c->fd[1] = -1;
        dial_next(c);
        return;
    }
    static const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
    memcpy(c->reply, ok, sizeof ok - 1);
    c->status = 200;
    c->reason = PH_REASON_ALLOWED;
    c->state = ST_RELAY;
    send_reply(c, sizeof ok - 1);
    dir_step(c, 0);
    dir_step(c, 1);
}

static void on_reply(conn *c, int res)
{
    if (c->state != ST_RELAY) {
        conn_close(c, "refused");
        return;
    }
    if (res != (int)strlen("HTTP/1.1 200 Connection Established\r\n\r\n")) {
        conn_close(c, "client_error");
        return;
    }
    c->reply_done = true;
    if (c->d[1].off < c->d[1].len)
        dir_step(c, 1);
}

static void on_recv(conn *c, int i, int res)
{
    if (c->state != ST_RELAY)
        return; /* closing: the shutdown woke it */
    if (res < 0) {
        conn_close(c, i == 0 ? "client_error" : "upstream_error");
        return;
    }
    if (res == 0) {
        /* Everything read before the EOF has been sent (one step at a time):
         * the other side is shut for writing, unless it already ended too
         * (then the close sends the FIN). shutdown(2) itself, not an SQE:
         * io_uring runs IORING_OP_SHUTDOWN in an io-wq worker thread, never
         * inline (perf: a tenth of the prototype's CPU went to those
         * workers). */
        c->d[i].eof = true;
        if (c->d[1 - i].eof) {
            conn_close(c, i == 0 ? "client_closed" : "upstream_closed");
            return;
        }
        shutdown(c->fd[1 - i], SHUT_WR);
        return;
    }
    c->d[i].len = (size_t)res;
    c->d[i].moved += (uint64_t)res;
    dir_step(c, i);
}

static void on_send(conn *c, int i, int res)
{
    if (c->state != ST_RELAY)
        return;
    if (res <= 0) {
        conn_close(c, i == 0 ? "upstream_error" : "client_error");
        return;
    }
    c->d[i].off += (size_t)res;
    dir_step(c, i);
}

/* Ends c: operations still in flight are woken (shutdown of both sockets)
 * and complete; the closes and the log line are queued once none is left
 * (op_done). */
static void conn_close(conn *c, const char *end)
{
    if (c->state == ST_CLOSING)
        return;
    if (c->end == NULL)
        c->end = end;
    bool both_eof = c->d[0].eof && c->d[1].eof;
    c->state = ST_CLOSING;
    if (!both_eof)
        for (int i = 0; i < 2; i++)
            if (c->fd[i] >= 0)
                shutdown(c->fd[i], SHUT_RDWR);
}

/* After each completion of c: once closing and nothing else is in flight,
 * the closes and the log line go out; once they are done, c is freed. */
static void op_done(conn *c)
{
    if (c->state != ST_CLOSING || c->ops > 0)
        return;
    if (c->closes_queued) {
        nconns--;
        free(c);
        return;
    }
    c->closes_queued = true;
    for (int i = 0; i < 2; i++)
        if (c->fd[i] >= 0)
            io_uring_prep_close(sqe_for(c, OP_CLOSE), c->fd[i]);
    int n = snprintf(c->log, sizeof c->log,
                     "{\"event\":\"connection\",\"conn_id\":%llu,\"tenant\":\"%s\",\"lease\":\"%s\","
                     "\"host\":\"%s\",\"port\":%u,\"status\":%d,\"reason\":\"%s\","
                     "\"bytes_up\":%llu,\"bytes_down\":%llu,\"end\":\"%s\"}\n",
                     (unsigned long long)c->id, c->tenant, c->lease, c->host, c->port, c->status,
                     ph_reason_code(c->reason), (unsigned long long)c->d[0].moved,
                     (unsigned long long)c->d[1].moved, c->end);
    if (n > 0 && (size_t)n >= sizeof c->log)
        n = (int)sizeof c->log - 1;
    if (n > 0)
        io_uring_prep_write(sqe_for(c, OP_LOG), STDERR_FILENO, c->log, (unsigned)n, (uint64_t)-1);
    if (c->ops == 0) {
        nconns--;
        free(c);
    }
}

static void complete(const struct io_uring_cqe *cqe)
{
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    enum op op = (enum op)(ud & 15);
    if (op == OP_ACCEPT) {
        on_accept(cqe->res, cqe->flags);
        return;
    }
    conn *c = (conn *)(uintptr_t)(ud & ~(uint64_t)15);
    c->ops--;
    switch (op) {
    case OP_HEAD: on_head(c, cqe->res); break;
    case OP_CONNECT:
        if (c->state == ST_CONNECT)
            on_connect(c, cqe->res);
        break;
    case OP_REPLY: on_reply(c, cqe->res); break;
    case OP_RECV:
    case OP_RECV_UP: on_recv(c, (int)(op - OP_RECV), cqe->res); break;
    case OP_SEND:
    case OP_SEND_UP: on_send(c, (int)(op - OP_SEND), cqe->res); break;
    case OP_SOCKOPT:
        if (cqe->res < 0 && c->fd[1] >= 0)
            setsockopt(c->fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        break;
    case OP_TIMEOUT:
    case OP_CLOSE:
    case OP_LOG:
    case OP_ACCEPT: break;
    }
    op_done(c);
}

/* ---- set-up --------------------------------------------------------------- */

static int listen_on(const char *hostport)
{
    char host[128];
    const char *colon = strrchr(hostport, ':');
    if (colon == NULL || (size_t)(colon - hostport) >= sizeof host)
        return -1;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1)) };
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), defer = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4096) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
    return fd;
}

static int setup_ring(void)
{
    struct io_uring_params p = { 0 };
    p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
              IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
    p.cq_entries = RING_ENTRIES * 4;
    if (io_uring_queue_init_params(RING_ENTRIES, &ring, &p) == 0)
        return 0;
    /* An older kernel: the plain ring. */
    memset(&p, 0, sizeof p);
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = RING_ENTRIES * 4;
    return io_uring_queue_init_params(RING_ENTRIES, &ring, &p);
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: uring_proxy --listen IP:PORT --table FILE --grant-key FILE "
               "[--dns-servers LIST] [--header-timeout-ms N] [--connect-timeout-ms N] "
               "[--user NAME]\n"
               "An io_uring prototype of pinhole-proxy's CONNECT path, for bench_proxy;\n"
               "pinhole-proxy's other options are accepted and ignored.\n");
}

int main(int argc, char **argv)
{
    enum { O_LISTEN = 1, O_TABLE, O_KEY, O_DNS, O_HEAD_MS, O_CONNECT_MS, O_USER, O_IGNORED, O_HELP };
    static const struct option opts[] = {
        { "listen", required_argument, NULL, O_LISTEN },
        { "table", required_argument, NULL, O_TABLE },
        { "grant-key", required_argument, NULL, O_KEY },
        { "dns-servers", required_argument, NULL, O_DNS },
        { "header-timeout-ms", required_argument, NULL, O_HEAD_MS },
        { "connect-timeout-ms", required_argument, NULL, O_CONNECT_MS },
        { "user", required_argument, NULL, O_USER },
        { "admin-listen", required_argument, NULL, O_IGNORED },
        { "max-connections", required_argument, NULL, O_IGNORED },
        { "max-connections-per-lease", required_argument, NULL, O_IGNORED },
        { "workers", required_argument, NULL, O_IGNORED },
        { "help", no_argument, NULL, O_HELP },
        { NULL, 0, NULL, 0 },
    };
    const char *listen_at = NULL, *table = NULL, *key = NULL, *dns = NULL, *user = NULL;
    long head_ms = 10000, connect_ms = 10000;
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case O_LISTEN: listen_at = optarg; break;
        case O_TABLE: table = optarg; break;
        case O_KEY: key = optarg; break;
        case O_DNS: dns = optarg; break;
        case O_HEAD_MS: head_ms = atol(optarg); break;
        case O_CONNECT_MS: connect_ms = atol(optarg); break;
        case O_USER: user = optarg; break;
        case O_IGNORED: break;
        case O_HELP: usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (listen_at == NULL || table == NULL || key == NULL || optind != argc || head_ms <= 0 ||
        connect_ms <= 0) {
        usage(stderr);
        return 2;
    }
    head_timeout = (struct __kernel_timespec){ head_ms / 1000, (head_ms % 1000) * 1000000 };
    connect_timeout = (struct __kernel_timespec){ connect_ms / 1000, (connect_ms % 1000) * 1000000 };
    signal(SIGPIPE, SIG_IGN);
    ph_diag diag = { 0 };
    ph_guard_options gopts = { .grant_keys_path = key, .dns_cache_off = true };
    ph_resolver_config rcfg = { .servers = dns };
    if (ph_guard_open(table, &gopts, &guard, &diag) != PH_OK ||
        ph_resolver_new(&rcfg, NULL, &resolver, &diag) != PH_OK) {
        fprintf(stderr, "uring_proxy: %s\n", diag.message);
        return 1;
    }
    if ((listen_fd = listen_on(listen_at)) < 0) {
        fprintf(stderr, "uring_proxy: cannot listen on %s: %s\n", listen_at, strerror(errno));
        return 1;
    }
    int rc = setup_ring();
    if (rc != 0) {
        fprintf(stderr, "uring_proxy: io_uring: %s\n", strerror(-rc));
        return 1;
    }
    if (px_drop_privileges(user, &diag) != PH_OK) {
        fprintf(stderr, "uring_proxy: %s\n", diag.message);
        return 1;
    }
    sockopt_by_ring = probe_sockopt_by_ring();
    fprintf(stderr, "uring_proxy: listening on %s, TCP_NODELAY by %s\n", listen_at,
            sockopt_by_ring ? "io_uring command" : "setsockopt(2)");
    arm_accept();
    for (;;) {
        rc = io_uring_submit_and_wait(&ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            fprintf(stderr, "uring_proxy: io_uring_submit_and_wait: %s\n", strerror(-rc));
            return 1;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe)
        {
            complete(cqe);
            seen++;
        }
        io_uring_cq_advance(&ring, seen);
    }
}
