/* listener.c - TCP (v4/v6, SO_REUSEPORT per worker) and unix listeners, and
 * recovery from descriptor exhaustion. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/listener.h>

#include "diag-int.h"
#include "proxy-int.h"

/* How long accepting pauses after EMFILE/ENFILE: long enough for tunnels to
 * end and free descriptors, short enough not to be noticed otherwise. */
#define ACCEPT_BACKOFF_MS 100

ph_status px_sockaddr_parse(const char *text, px_sockaddr *out, ph_diag *diag)
{
    char host[PX_ADDR_MAX];
    const char *colon = strrchr(text, ':');
    memset(out, 0, sizeof *out);
    if (colon == NULL || colon == text || strlen(text) >= sizeof host)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': expected ADDR:PORT", text);
    size_t hl = (size_t)(colon - text);
    memcpy(host, text, hl);
    host[hl] = '\0';
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port < 0 || port > 65535)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': bad port", text);
    if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
            return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': bad IPv6 address", text);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        out->len = sizeof *s6;
        return PH_OK;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': expected a numeric IPv4 or [IPv6] address",
                           text);
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    out->len = sizeof *s4;
    return PH_OK;
}

void px_addr_format(const struct sockaddr *sa, char *buf, size_t cap)
{
    if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
                  (socklen_t)cap);
    else
        snprintf(buf, cap, "unix");
}

void px_sockaddr_format(const struct sockaddr *sa, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];
    px_addr_format(sa, a, sizeof a);
    if (sa->sa_family == AF_INET6)
        snprintf(buf, cap, "[%s]:%u", a,
                 ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port));
    else if (sa->sa_family == AF_INET)
        snprintf(buf, cap, "%s:%u", a,
                 ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port));
    else
        snprintf(buf, cap, "unix");
}

int px_listen_tcp(const px_sockaddr *addr, ph_diag *diag)
{
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ph_diag_set(diag, PH_E_IO, 0, "socket: %s", strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
        (addr->ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(fd, (const struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, 4096) != 0) {
        char a[PX_ADDR_MAX];
        px_sockaddr_format((const struct sockaddr *)&addr->ss, a, sizeof a);
        ph_diag_set(diag, PH_E_IO, 0, "listen on %s: %s", a, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int px_listen_unix(const char *path, unsigned mode, ph_diag *diag)
{
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof sun.sun_path) {
        ph_diag_set(diag, PH_E_INVAL, 0, "unix socket path too long: %s", path);
        return -1;
    }
    memcpy(sun.sun_path, path, strlen(path) + 1);
    /* Remove only a stale socket, never a regular file someone put there. */
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            ph_diag_set(diag, PH_E_IO, 0, "%s exists and is not a socket", path);
            return -1;
        }
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof sun) != 0 ||
        chmod(path, (mode_t)mode) != 0 || listen(fd, 4096) != 0) {
        ph_diag_set(diag, PH_E_IO, 0, "listen on %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *arg)
{
    (void)l;
    px_conn_accept(arg, fd, sa, len);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    px_worker *w = arg;
    /* Re-enable every listener of the worker (enabling an enabled one is a
     * no-op); after a drain started they are gone. */
    for (int i = 0; !w->draining && i < w->nlisteners; i++)
        evconnlistener_enable(w->listeners[i]);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
    int err = EVUTIL_SOCKET_ERROR();
    px_worker *w = arg;
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        /* Out of descriptors: accepting again at once would spin. Pause,
         * let connections end, then resume. */
        px_metrics_accept_backoff();
        evconnlistener_disable(l);
        struct timeval tv = { 0, ACCEPT_BACKOFF_MS * 1000 };
        event_base_once(w->base, -1, EV_TIMEOUT, resume_cb, w, &tv);
        return;
    }
    px_log_event("warning", "accept_error", "accept failed: %s", strerror(err));
}

struct evconnlistener *px_listener_attach(px_worker *w, int fd, bool close_on_free)
{
    unsigned flags = LEV_OPT_REUSEABLE | (close_on_free ? LEV_OPT_CLOSE_ON_FREE : 0);
    struct evconnlistener *l = evconnlistener_new(w->base, accept_cb, w, flags, -1, fd);
    if (l)
        evconnlistener_set_error_cb(l, accept_error_cb);
    return l;
}
