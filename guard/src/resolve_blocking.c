/* resolve_blocking.c - the workers' blocking resolution: the one resolver
 * driver (resolver.c) driven with poll(2) until the query's answer, which
 * its own deadline guarantees. */
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "pinhole/diag.h"
#include "pinhole/host.h"
#include "pinhole/resolve.h"
#include "resolve-int.h"

typedef struct blocking_result {
    bool done;
    ph_resolve_answer answer;
} blocking_result;

static void on_resolved(void *arg, const ph_resolve_answer *a)
{
    blocking_result *r = arg;
    r->done = true;
    r->answer = *a;
}

/* Refuses what must never reach DNS, with the reason a caller logs. */
static ph_status check_name(const char *name, ph_reason *reason, ph_diag *diag)
{
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
    return PH_OK;
}

ph_status ph_resolver_resolve(ph_resolver *res, const char *name, uint16_t port,
                              ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag)
{
    if (reason != NULL)
        *reason = PH_REASON_PARSE_ERROR;
    if (res == NULL || name == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolve: missing argument");
    out->count = 0;
    ph_status st = check_name(name, reason, diag);
    if (st != PH_OK)
        return st;
    blocking_result r;
    memset(&r, 0, sizeof r);
    ph_resolve_query *q = NULL;
    st = ph_resolver_start(res, name, port, on_resolved, &r, &q, diag);
    if (st != PH_OK)
        return st;
    while (!r.done) {
        long wait_ms = ph_resolver_timeout_ms(res);
        if (wait_ms < 0) { /* cannot happen: the query has a deadline */
            ph_resolver_cancel(q);
            return ph_diag_set(diag, PH_E_INTERNAL, 0, "resolver: query without deadline");
        }
        ph_resolver_fd fds[16];
        size_t n = ph_resolver_fds(res, fds, sizeof fds / sizeof *fds);
        struct pollfd pfd[16];
        for (size_t i = 0; i < n; i++) {
            pfd[i].fd = fds[i].fd;
            pfd[i].events = (short)(((fds[i].events & PH_RESOLVER_READ) ? POLLIN : 0) |
                                    ((fds[i].events & PH_RESOLVER_WRITE) ? POLLOUT : 0));
            pfd[i].revents = 0;
        }
        int rc = poll(pfd, (nfds_t)n, wait_ms > 60000 ? 60000 : (int)wait_ms);
        if (rc < 0 && errno != EINTR) {
            ph_resolver_cancel(q);
            return ph_diag_set(diag, PH_E_IO, 0, "poll: %s", strerror(errno));
        }
        if (rc <= 0) {
            ph_resolver_process(res, -1, 0); /* timers and deadlines */
            continue;
        }
        for (size_t i = 0; i < n && !r.done; i++) {
            unsigned ev = ((pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) ? PH_RESOLVER_READ
                                                                           : 0u) |
                          ((pfd[i].revents & POLLOUT) ? PH_RESOLVER_WRITE : 0u);
            if (ev != 0)
                ph_resolver_process(res, pfd[i].fd, ev);
        }
    }
    if (reason != NULL)
        *reason = r.answer.reason;
    if (r.answer.st == PH_OK) {
        *out = r.answer.addrs;
        return PH_OK;
    }
    return ph_diag_set(diag, r.answer.st, 0, "%s", r.answer.detail);
}

ph_status ph_resolve_blocking_shared(const ph_resolver_config *cfg, ph_dns_cache *cache,
                                     const char *name, uint16_t port, ph_pinned_addrs *out,
                                     ph_reason *reason, bool *from_cache, ph_diag *diag)
{
    if (from_cache != NULL)
        *from_cache = false;
    if (reason != NULL)
        *reason = PH_REASON_PARSE_ERROR;
    if (name == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolve: missing argument");
    out->count = 0;
    /* Refused before any channel exists: a literal never reaches DNS. */
    ph_status st = check_name(name, reason, diag);
    if (st != PH_OK)
        return st;
    /* A cached outcome is a checked one (only checked outcomes are stored). */
    ph_resolve_answer a;
    if (ph_dns_cache_find(cache, name, port, &a)) {
        if (from_cache != NULL)
            *from_cache = true;
        if (reason != NULL)
            *reason = a.reason;
        if (a.st == PH_OK) {
            *out = a.addrs;
            return PH_OK;
        }
        return ph_diag_set(diag, a.st, 0, "%s", a.detail);
    }
    ph_resolver *res = NULL;
    st = ph_resolver_new_shared(cfg, NULL, cache, &res, diag);
    if (st != PH_OK)
        return st;
    st = ph_resolver_resolve(res, name, port, out, reason, diag);
    ph_resolver_free(&res);
    return st;
}

ph_status ph_resolve_blocking(const ph_resolver_config *cfg, const char *name, uint16_t port,
                              ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag)
{
    return ph_resolve_blocking_shared(cfg, NULL, name, port, out, reason, NULL, diag);
}
