/* listener.c - TCP (v4/v6, SO_REUSEPORT per worker) and unix listeners, the
 * refusal to share an address with another live process, the accepts, and
 * recovery from descriptor exhaustion. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "accept_proxied.h"
#include "config.h"
#include "conn.h"
#include "listener.h"
#include "log_json.h"
#include "metrics.h"
#include "pinhole/diag.h"
#include "sockaddr.h"
#include "worker.h"

/* How long accepting pauses after EMFILE/ENFILE: long enough for tunnels to
 * end and free descriptors, short enough not to be noticed otherwise. */
#define ACCEPT_BACKOFF_MS 100

/* How long the kernel holds a connection that sent nothing before handing
 * it to accept anyway (TCP_DEFER_ACCEPT; a SYN-ACK retransmission later):
 * the shortest, so a silent client meets the head timeout about a second
 * later than one that sent part of a head. */
#define DEFER_ACCEPT_S 1

/* How many connections a listener accepts in one loop pass at most. The
 * rest of a burst waits for the next epoll_wait (the socket stays
 * readable, level-triggered), which first serves the other descriptors
 * that are ready and the timers that are due: one peer's flood of connects
 * delays the others' bytes, timeouts and the drain by at most this many
 * accepts, not for as long as it keeps the queue full. */
#define ACCEPT_BURST_MAX 64

/* Whether something accepts connections at sa right now: a non-blocking
 * connect, then up to PROBE_MS for the handshake. Refused: nobody (1 is
 * returned only for a live listener or one whose accept queue is full, as a
 * SYN left unanswered on a local address means). */
#define PROBE_MS 1000
static bool someone_listens(const struct sockaddr *sa, socklen_t len, int *fd_out)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool live = false;
    if (connect(fd, sa, len) == 0) {
        live = true;
    } else if (errno == EINPROGRESS || errno == EAGAIN) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int err = 0;
        socklen_t el = sizeof err;
        if (poll(&p, 1, PROBE_MS) == 0)
            live = true; /* a full accept queue: somebody holds it */
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
            live = true;
    }
    if (live && fd_out)
        *fd_out = fd;
    else
        close(fd);
    return live;
}

/* One live pinhole-proxy per address: an abstract unix socket named after
 * it ("\0pinhole-proxy <what>"), bound and listening for the life of the
 * process (the kernel releases it when the process ends, however it ends).
 * Binding it is atomic, so of two instances started at the same moment one
 * gets the address and the other a clear error with the holder's pid (the
 * credentials of the lock's listener, read by connecting to it). Abstract
 * names belong to the network namespace, like TCP addresses; the probe
 * connect covers holders that are not pinhole-proxy. Returns false with
 * diag set when another process holds the lock. */
static bool instance_lock(const char *what, ph_diag *diag)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    char name[sizeof sun.sun_path - 1];
    int n = snprintf(name, sizeof name, "pinhole-proxy %s", what);
    if (n < 0 || (size_t)n >= sizeof name) {
        /* A long path: its FNV-1a hash names it. */
        uint64_t h = 1469598103934665603ULL;
        for (const char *c = what; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        n = snprintf(name, sizeof name, "pinhole-proxy hash %016llx", (unsigned long long)h);
    }
    memcpy(sun.sun_path + 1, name, (size_t)n);
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true; /* no lock without a socket; the probe still runs */
    if (bind(fd, (struct sockaddr *)&sun, len) == 0 && listen(fd, 1) == 0)
        return true; /* held until exit: the descriptor is never closed */
    close(fd);
    int probe = -1;
    struct ucred cred = { 0 };
    socklen_t cl = sizeof cred;
    bool known = someone_listens((struct sockaddr *)&sun, len, &probe) &&
                 getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid > 0;
    if (probe >= 0)
        close(probe);
    /* Any local user can bind an abstract name. A lock held by neither root
     * nor this user is not a pinhole-proxy that could share the address:
     * it is ignored (and said so), and the probe of the address decides. */
    if (known && cred.uid != 0 && cred.uid != geteuid()) {
        px_log_event("warning", "instance_lock_squatted",
                     "%s: the instance lock is held by uid %u (pid %d), not a pinhole-proxy of "
                     "this user: ignored; the address itself is probed",
                     what, (unsigned)cred.uid, (int)cred.pid);
        return true;
    }
    if (known)
        ph_diag_set(diag, PH_E_IO, 0, "%s is held by another pinhole-proxy (pid %d)", what,
                    (int)cred.pid);
    else
        ph_diag_set(diag, PH_E_IO, 0, "%s is held by another pinhole-proxy", what);
    return false;
}

/* The address a probe for a listener on addr connects to: the address
 * itself, or loopback for a wildcard address. */
static void probe_target(const px_sockaddr *addr, px_sockaddr *out)
{
    *out = *addr;
    if (out->ss.ss_family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
        if (s4->sin_addr.s_addr == htonl(INADDR_ANY))
            s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;
        if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
            s6->sin6_addr = in6addr_loopback;
    }
}

static uint16_t sockaddr_port(const px_sockaddr *a)
{
    return ntohs(a->ss.ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)&a->ss)->sin6_port
                                             : ((const struct sockaddr_in *)&a->ss)->sin_port);
}

int px_listen_tcp(px_sockaddr *addr, bool first, ph_diag *diag)
{
    char a[PX_ADDR_MAX];
    ph_sockaddr_text((const struct sockaddr *)&addr->ss, a, sizeof a);
    bool kernel_port = sockaddr_port(addr) == 0;
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ph_diag_set(diag, PH_E_IO, 0, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    socklen_t len = sizeof addr->ss;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        (addr->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr->ss, &len) != 0) {
        ph_diag_set(diag, PH_E_IO, 0, "listen on %s: %s", a, strerror(errno));
        close(fd);
        return -1;
    }
    addr->len = len; /* port 0: now the kernel's choice */
    ph_sockaddr_text((const struct sockaddr *)&addr->ss, a, sizeof a);
    /* SO_REUSEPORT lets a second process of the same user bind beside a
     * live one and take half its connections (STYLE.md). So the first
     * socket of an address takes the instance lock (another pinhole-proxy),
     * then, bound but not yet listening (connections cannot reach it),
     * probes the address: if anything accepts there, another process holds
     * it. Bound first, so an address that is not ours fails as such rather
     * than as an unanswered probe. */
    if (first) {
        char what[PX_ADDR_MAX + 16];
        snprintf(what, sizeof what, "listen on %s", a);
        if (!instance_lock(what, diag)) {
            close(fd);
            return -1;
        }
    }
    px_sockaddr target;
    probe_target(addr, &target);
    if (first && !kernel_port &&
        someone_listens((const struct sockaddr *)&target.ss, target.len, NULL)) {
        ph_diag_set(diag, PH_E_IO, 0,
                    "listen on %s: the address is held by a live listener (another "
                    "pinhole-proxy?); refusing to share it",
                    a);
        close(fd);
        return -1;
    }
    if (listen(fd, 4096) != 0) {
        ph_diag_set(diag, PH_E_IO, 0, "listen on %s: %s", a, strerror(errno));
        close(fd);
        return -1;
    }
    /* Accepted sockets inherit TCP_NODELAY (tunnels carry interactive
     * protocols: no Nagle delay on top of the peer's own), which saves a
     * setsockopt per connection. TCP_DEFER_ACCEPT: a connection is handed
     * to accept only once its first bytes arrived, so the request head is
     * read right after accept(2) without waiting for readiness; a client
     * that sends nothing is accepted after DEFER_ACCEPT_S and then meets
     * the head timeout. Both are optimisations: a kernel without them
     * still serves. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int defer = DEFER_ACCEPT_S;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer, sizeof defer);
    return fd;
}

int px_listen_unix(const char *path, unsigned mode, ph_unix_listener *out, ph_diag *diag)
{
    /* The instance lock first, so a second pinhole-proxy is named as such;
     * ph_unix_listen then replaces only a stale socket (nothing accepts on
     * it), never a live one (another process serves there) nor a file
     * someone put there. */
    char what[PX_PATH_MAX + 16];
    snprintf(what, sizeof what, "unix socket %s", path);
    out->fd = -1;
    if (!instance_lock(what, diag) || ph_unix_listen(path, mode, 4096, out, diag) != PH_OK)
        return -1;
    return out->fd;
}

/* A listening socket of a worker, its read event and its backoff timer,
 * whose callback argument is the listener. Owned by the worker
 * (w->listeners), freed by px_listener_free on the worker's thread: the
 * events first (no callback runs after), then the socket when
 * close_on_free. */
struct px_listener {
    px_worker *w;
    struct event *ev;
    struct event *resume; /* the backoff after EMFILE & co., made with the listener */
    int fd;
    int burst; /* connections accepted in this loop pass (ACCEPT_BURST_MAX) */
    bool close_on_free;
    bool proxy_protocol;
};

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_listener *l = arg;
    /* A drain frees the listener with its timer; this is a guard only. */
    if (!l->w->draining)
        event_add(l->ev, NULL);
}

static void accept_failed(px_listener *l, int err)
{
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        /* Out of descriptors: accepting again at once would spin. Pause,
         * let connections end, then resume. */
        px_metrics_accept_backoff();
        event_del(l->ev);
        /* The timer exists since the listener does: the pause cannot fail
         * for want of memory and leave the listener off for good. */
        struct timeval tv = { 0, ACCEPT_BACKOFF_MS * 1000 };
        evtimer_add(l->resume, &tv);
        return;
    }
    px_log_event("warning", "accept_error", "accept failed: %s", strerror(err));
}

/* The socket is readable: a connection is waiting. A worker serving
 * other connections accepts until the queue is empty (EAGAIN), as
 * evconnlistener does, but one connection per callback: after handing one
 * over, the listener queues itself again behind the events that
 * connection's start queued (a DNS cache hit is answered from the loop:
 * dns_async.c), so the connect and the 200 go out before the next accept,
 * and a burst is still accepted within the one loop pass, with no
 * epoll_wait between its connections. A worker whose only connection is
 * the one just accepted does not try again: another waiting connection is
 * reported by the next epoll_wait (level-triggered), which an idle worker
 * makes anyway, and the lone connection of a quiet proxy costs no failing
 * accept(2) on its way. After ACCEPT_BURST_MAX connections in a row it
 * waits for the next epoll_wait too, so a flood does not keep the loop
 * from everything else. A lost race (the unix socket is shared by the
 * workers) or a connection reset before it was accepted is EAGAIN or
 * ECONNABORTED: nothing to do. */
static void accept_ready_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    px_listener *l = arg;
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int c = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
        l->burst = 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
            accept_failed(l, errno);
        return;
    }
    if (len == 0) {
        close(c); /* no peer address (seen on old kernels after a reset) */
    } else if (l->proxy_protocol) {
        px_proxied_accept(l->w, c, (struct sockaddr *)&ss);
    } else {
        px_conn_accept(l->w, c, (struct sockaddr *)&ss, 0);
    }
    /* Neither hand-over can free l (only the worker's drain does, from an
     * event of its own). nconns counts the worker's connections, the one
     * just accepted included unless it was refused at once. */
    if (l->w->nconns > 1 && ++l->burst < ACCEPT_BURST_MAX)
        event_active(l->ev, EV_READ, 1);
    else
        l->burst = 0;
}

px_listener *px_listener_attach(px_worker *w, int fd, bool close_on_free, bool proxy_protocol)
{
    px_listener *l = calloc(1, sizeof *l);
    if (l == NULL)
        return NULL;
    *l = (px_listener){ .w = w, .fd = fd, .close_on_free = close_on_free,
                        .proxy_protocol = proxy_protocol };
    l->ev = event_new(w->base, fd, EV_READ | EV_PERSIST, accept_ready_cb, l);
    l->resume = evtimer_new(w->base, resume_cb, l);
    if (l->ev == NULL || l->resume == NULL || event_add(l->ev, NULL) != 0) {
        if (l->ev != NULL)
            event_free(l->ev);
        if (l->resume != NULL)
            event_free(l->resume);
        free(l);
        return NULL;
    }
    return l;
}

void px_listener_free(px_listener **lp)
{
    px_listener *l = *lp;
    if (l == NULL)
        return;
    event_free(l->ev);
    event_free(l->resume);
    if (l->close_on_free)
        close(l->fd);
    free(l);
    *lp = NULL;
}
