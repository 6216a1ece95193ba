/* resolve_blocking.c - the workers' blocking resolution: a private c-ares
 * channel driven with poll(2) until the answer or the overall deadline. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "diag-int.h"
#include "monotonic-int.h"
#include "pinhole/host.h"
#include "pinhole/resolve.h"

typedef struct blocking_result {
    bool done;
    ph_status st;
    ph_reason reason;
    ph_pinned_addrs *out;
    ph_diag diag;
} blocking_result;

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_init_rc = ARES_SUCCESS;

static void init_ares_library(void) { ares_init_rc = ares_library_init(ARES_LIB_INIT_ALL); }

static void on_resolved(void *arg, ph_status st, ph_reason reason, const ph_pinned_addrs *addrs,
                        const ph_diag *diag)
{
    blocking_result *r = arg;
    r->done = true;
    r->st = st;
    r->reason = reason;
    if (st == PH_OK)
        *r->out = *addrs;
    else if (diag != NULL)
        r->diag = *diag;
}

/* Drives channel until r->done or the deadline, then cancels (which calls
 * on_resolved with ARES_ECANCELLED, mapped to dns_timeout). */
static void drive(ares_channel channel, blocking_result *r, int64_t deadline)
{
    while (!r->done) {
        int64_t left = deadline - ph_monotonic_ms();
        if (left <= 0) {
            ares_cancel(channel);
            return;
        }
        ares_socket_t socks[ARES_GETSOCK_MAXNUM];
        /* Not ARES_GETSOCK_WRITABLE: for the 16th socket it computes 1 << 31
         * on an int (undefined behaviour); the same bits, unsigned. */
        unsigned bits = (unsigned)ares_getsock(channel, socks, ARES_GETSOCK_MAXNUM);
        struct pollfd pfd[ARES_GETSOCK_MAXNUM];
        nfds_t n = 0;
        for (unsigned i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
            short ev = 0;
            if (bits & (1u << i))
                ev |= POLLIN;
            if (bits & (1u << (i + ARES_GETSOCK_MAXNUM)))
                ev |= POLLOUT;
            if (ev == 0)
                continue;
            pfd[n].fd = socks[i];
            pfd[n].events = ev;
            pfd[n].revents = 0;
            n++;
        }
        struct timeval maxtv = {(time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000};
        struct timeval tv;
        struct timeval *t = ares_timeout(channel, &maxtv, &tv);
        int wait_ms = (int)(t->tv_sec * 1000 + (t->tv_usec + 999) / 1000);
        int rc = poll(pfd, n, wait_ms);
        if (rc < 0 && errno != EINTR) {
            ares_cancel(channel);
            return;
        }
        if (rc <= 0) {
            ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timers */
            continue;
        }
        for (nfds_t i = 0; i < n && !r->done; i++) {
            ares_socket_t rfd = pfd[i].revents & (POLLIN | POLLERR | POLLHUP) ? pfd[i].fd
                                                                               : ARES_SOCKET_BAD;
            ares_socket_t wfd = pfd[i].revents & POLLOUT ? pfd[i].fd : ARES_SOCKET_BAD;
            if (rfd != ARES_SOCKET_BAD || wfd != ARES_SOCKET_BAD)
                ares_process_fd(channel, rfd, wfd);
        }
    }
}

ph_status ph_resolve_blocking(const ph_resolver_config *cfg, const char *name, uint16_t port,
                              ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag)
{
    static const ph_resolver_config defaults = {NULL, 0};
    if (cfg == NULL)
        cfg = &defaults;
    if (reason != NULL)
        *reason = PH_REASON_PARSE_ERROR;
    if (name == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolve: missing argument");
    out->count = 0;
    size_t len = strnlen(name, PH_HOST_MAX + 1);
    if (ph_host_is_ip_literal(name, len)) {
        if (reason != NULL)
            *reason = PH_REASON_IP_LITERAL;
        return ph_diag_set(diag, PH_E_DENIED, 0, "refusing to resolve an IP literal");
    }
    size_t where = 0;
    ph_host_error he = ph_host_check(name, len, &where);
    if (he != PH_HOST_OK)
        return ph_diag_set(diag, PH_E_DENIED, where, "not a canonical host name: %s",
                           ph_host_error_string(he));

    pthread_once(&ares_once, init_ares_library);
    if (ares_init_rc != ARES_SUCCESS)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "c-ares: %s", ares_strerror(ares_init_rc));
    unsigned timeout = cfg->timeout_ms != 0 ? cfg->timeout_ms : PH_RESOLVE_TIMEOUT_MS_DEFAULT;
    struct ares_options opts;
    int mask = 0;
    ph_resolver_channel_options(&opts, &mask, timeout);
    ares_channel channel = NULL;
    int rc = ares_init_options(&channel, &opts, mask);
    if (rc != ARES_SUCCESS)
        return ph_diag_set(diag, rc == ARES_ENOMEM ? PH_E_NOMEM : PH_E_IO, 0,
                           "c-ares cannot start: %s", ares_strerror(rc));
    ph_status st = ph_resolver_set_servers(channel, cfg->servers, diag);
    if (st != PH_OK) {
        ares_destroy(channel);
        return st;
    }
    blocking_result r;
    memset(&r, 0, sizeof r);
    r.out = out;
    int64_t deadline = ph_monotonic_ms() + timeout;
    st = ph_resolve_start(channel, name, port, on_resolved, &r, diag);
    if (st == PH_OK)
        drive(channel, &r, deadline);
    ares_destroy(channel); /* completes a still-pending query: r.done */
    if (st != PH_OK)
        return st;
    if (!r.done)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "c-ares never completed the query");
    if (r.st == PH_OK) {
        if (reason != NULL)
            *reason = PH_REASON_ALLOWED;
        return PH_OK;
    }
    out->count = 0;
    if (reason != NULL)
        *reason = r.reason;
    if (r.reason == PH_REASON_DNS_TIMEOUT)
        return ph_diag_set(diag, PH_E_DENIED, 0, "no DNS answer for %s within %u ms", name,
                           timeout);
    if (diag != NULL)
        *diag = r.diag;
    return r.st;
}
