/* connect.c - non-blocking connect to the pinned addresses, in order, under
 * one overall deadline; never re-resolves. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/clock.h"
#include "pinhole/connect.h"

/* One attempt. Returns the connected socket, or -1 with *err set (ETIMEDOUT
 * when the attempt's time ran out). */
static int try_connect(const struct sockaddr_storage *ss, socklen_t len, int64_t until, int *err)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)ss, len) == 0)
        return fd;
    if (errno != EINPROGRESS) {
        *err = errno;
        close(fd);
        return -1;
    }
    for (;;) {
        int64_t left = until - ph_monotonic_ms();
        if (left <= 0) {
            *err = ETIMEDOUT;
            close(fd);
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int rc = poll(&p, 1, (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0) {
            *err = errno;
            close(fd);
            return -1;
        }
        if (rc == 0)
            continue; /* the loop's deadline check decides */
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
            soerr = errno;
        if (soerr == 0)
            return fd;
        *err = soerr;
        close(fd);
        return -1;
    }
}

ph_status ph_connect_pinned(const ph_pinned_addrs *addrs, unsigned timeout_ms, int *fd,
                            size_t *index, ph_reason *reason, ph_diag *diag)
{
    if (fd != NULL)
        *fd = -1;
    if (reason != NULL)
        *reason = PH_REASON_UPSTREAM_UNREACHABLE;
    if (addrs == NULL || fd == NULL || addrs->count == 0 || addrs->count > PH_PINNED_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "connect: no address to dial");
    unsigned total = timeout_ms != 0 ? timeout_ms : PH_CONNECT_TIMEOUT_MS_DEFAULT;
    int64_t deadline = ph_monotonic_ms() + total;
    int err = 0;
    bool last_timed_out = false;
    for (size_t i = 0; i < addrs->count; i++) {
        int64_t left = deadline - ph_monotonic_ms();
        if (left <= 0)
            break;
        int64_t share = left / (int64_t)(addrs->count - i);
        int s = try_connect(&addrs->addr[i], addrs->addr_len[i], ph_monotonic_ms() + share,
                            &err);
        if (s >= 0) {
            *fd = s;
            if (index != NULL)
                *index = i;
            if (reason != NULL)
                *reason = PH_REASON_ALLOWED;
            return PH_OK;
        }
        last_timed_out = err == ETIMEDOUT;
    }
    char text[INET6_ADDRSTRLEN];
    if (last_timed_out || ph_monotonic_ms() >= deadline) {
        if (reason != NULL)
            *reason = PH_REASON_UPSTREAM_TIMEOUT;
        return ph_diag_set(diag, PH_E_DENIED, 0, "no connection within %u ms to %zu address(es)",
                           total, addrs->count);
    }
    if (ph_pinned_addr_string(addrs, addrs->count - 1, text, sizeof text) != PH_OK)
        text[0] = '\0';
    return ph_diag_set(diag, PH_E_DENIED, 0, "no address accepted the connection (last, %s: %s)",
                       text, strerror(err));
}
