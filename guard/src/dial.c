/* dial.c - ph_dial_url / ph_dial_authority: the guard's decision, the
 * resolution of exactly that name, and an RFC 8305 connection race over the
 * checked addresses only, under one deadline. */
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "guard-int.h"
#include "pinhole/clock.h"
#include "pinhole/dial.h"

ph_status ph_verdict_refuse(ph_verdict *v, ph_reason reason, ph_status st, const char *detail,
                            ph_diag *diag)
{
    v->allowed = false;
    v->reason = reason;
    snprintf(v->detail, sizeof v->detail, "%s", detail);
    if (diag != NULL) {
        diag->status = st;
        diag->offset = 0;
        snprintf(diag->message, sizeof diag->message, "%s", detail);
    }
    return st;
}

/* A refusal after the decision allowed: the dial did not happen. */
static ph_status refuse(ph_dial_result *r, ph_reason reason, ph_status st, const char *detail,
                        ph_diag *diag)
{
    return ph_verdict_refuse(&r->verdict, reason, st, detail, diag);
}

/* The RFC 8305 section 4 order: IPv6 and IPv4 interleaved, IPv6 first when
 * the answer has both; within a family the answer's order. */
static size_t interleave(const ph_pinned_addrs *a, size_t order[static PH_PINNED_MAX])
{
    size_t v6[PH_PINNED_MAX], v4[PH_PINNED_MAX], n6 = 0, n4 = 0, n = 0;
    for (size_t i = 0; i < a->count && i < PH_PINNED_MAX; i++) {
        if (a->addr[i].ss_family == AF_INET6)
            v6[n6++] = i;
        else
            v4[n4++] = i;
    }
    for (size_t i = 0; i < n6 || i < n4; i++) {
        if (i < n6)
            order[n++] = v6[i];
        if (i < n4)
            order[n++] = v4[i];
    }
    return n;
}

/* Starts one non-blocking attempt. Returns its socket (*done true when it
 * connected at once), or -1 with *err set. */
static int attempt_start(const ph_pinned_addrs *a, size_t i, bool *done, int *err)
{
    *done = false;
    int fd = socket(a->addr[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)&a->addr[i], a->addr_len[i]) == 0) {
        *done = true;
        return fd;
    }
    if (errno == EINPROGRESS)
        return fd;
    *err = errno;
    close(fd);
    return -1;
}

/* The connection race. On PH_OK *fd is connected (still non-blocking) and
 * *won its index in a; otherwise *reason says timeout or unreachable. */
static ph_status race(const ph_pinned_addrs *a, int64_t deadline, unsigned stagger, int *fd,
                      size_t *won, ph_reason *reason, ph_diag *diag)
{
    size_t order[PH_PINNED_MAX];
    size_t n = interleave(a, order), next = 0, live = 0;
    struct pollfd pfd[PH_PINNED_MAX];
    size_t idx[PH_PINNED_MAX];
    int err = 0;
    size_t err_index = 0;
    int64_t next_start = ph_monotonic_ms();
    int winner = -1;
    for (;;) {
        int64_t now = ph_monotonic_ms();
        if (now >= deadline)
            break;
        /* A new attempt when the stagger has passed or nothing is pending. */
        if (next < n && (live == 0 || now >= next_start)) {
            size_t i = order[next++];
            bool done = false;
            int s = attempt_start(a, i, &done, &err);
            if (s >= 0 && done) {
                winner = s;
                *won = i;
                break;
            }
            if (s >= 0) {
                pfd[live] = (struct pollfd){.fd = s, .events = POLLOUT};
                idx[live++] = i;
                next_start = now + stagger;
            } else {
                err_index = i;
                next_start = now; /* failed at once: the next one now */
            }
            continue;
        }
        if (live == 0)
            break; /* every address failed */
        int64_t until = deadline;
        if (next < n && next_start < until)
            until = next_start;
        int64_t wait = until - now; /* the loop re-checks: a long deadline waits in steps */
        int rc = poll(pfd, (nfds_t)live, wait < 0 ? 0 : wait > 60000 ? 60000 : (int)wait);
        if (rc < 0 && errno != EINTR) {
            err = errno;
            break;
        }
        if (rc <= 0)
            continue;
        for (size_t k = 0; k < live && winner < 0;) {
            if (pfd[k].revents == 0) {
                k++;
                continue;
            }
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (getsockopt(pfd[k].fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
                soerr = errno;
            if (soerr == 0) {
                winner = pfd[k].fd;
                *won = idx[k];
                pfd[k] = pfd[--live];
                idx[k] = idx[live];
                break;
            }
            err = soerr;
            err_index = idx[k];
            close(pfd[k].fd);
            pfd[k] = pfd[--live];
            idx[k] = idx[live];
            next_start = ph_monotonic_ms(); /* a failure starts the next one now */
        }
        if (winner >= 0)
            break;
    }
    bool timed_out = winner < 0 && (live > 0 || ph_monotonic_ms() >= deadline);
    for (size_t k = 0; k < live; k++)
        close(pfd[k].fd); /* the losers, and everything on failure */
    if (winner >= 0) {
        *fd = winner;
        return PH_OK;
    }
    char text[INET6_ADDRSTRLEN];
    if (timed_out) {
        *reason = PH_REASON_UPSTREAM_TIMEOUT;
        return ph_diag_set(diag, PH_E_DENIED, 0,
                           "no connection before the deadline (%zu of %zu address(es) tried)",
                           next, n);
    }
    *reason = PH_REASON_UPSTREAM_UNREACHABLE;
    if (ph_pinned_addr_string(a, err_index, text, sizeof text) != PH_OK)
        text[0] = '\0';
    return ph_diag_set(diag, PH_E_DENIED, 0,
                       "no address accepted the connection (%zu tried; last, %s: %s)", n, text,
                       strerror(err));
}

typedef enum dial_kind { DIAL_URL, DIAL_AUTHORITY } dial_kind;

static unsigned elapsed_since(int64_t start)
{
    int64_t d = ph_monotonic_ms() - start;
    return d < 0 ? 0 : (unsigned)d;
}

static ph_status dial(ph_guard *g, const char *list, const char *target, size_t len,
                      dial_kind kind, const ph_dial_options *opts, int *fd, ph_dial_result *r,
                      ph_diag *diag)
{
    if (fd != NULL)
        *fd = -1;
    if (r == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "dial: missing result");
    memset(r, 0, sizeof *r);
    r->verdict.reason = PH_REASON_PARSE_ERROR;
    if (g == NULL || list == NULL || target == NULL || fd == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "dial: missing argument");
    int64_t start = ph_monotonic_ms();
    unsigned total = opts != NULL && opts->timeout_ms != 0 ? opts->timeout_ms
                                                           : PH_DIAL_TIMEOUT_MS_DEFAULT;
    unsigned stagger = opts != NULL && opts->stagger_ms != 0 ? opts->stagger_ms
                                                             : PH_DIAL_STAGGER_MS_DEFAULT;
    int64_t deadline = start + total;

    /* 1. The guard's one decision, the caller naming the list. */
    ph_decision d;
    ph_status st;
    if (kind == DIAL_URL) {
        ph_url_request req = {.url = target, .url_len = len, .list = list, .now = time(NULL)};
        st = ph_decide_url(g, &req, &d);
    } else {
        ph_connect_request req = {
            .authority = target, .authority_len = len, .list = list, .now = time(NULL)};
        st = ph_decide_connect(g, &req, &d);
    }
    r->verdict = d.verdict;
    if (st != PH_OK) {
        r->elapsed_ms = elapsed_since(start);
        return refuse(r, d.reason, st == PH_E_INVAL ? PH_E_INVAL : PH_E_DENIED, d.log_detail,
                      diag);
    }

    /* 2 and 3. Exactly that name, every address checked, within the time
     * the deadline leaves (never longer than the guard's DNS timeout). */
    st = ph_decision_resolve_within(g, &d, total, &r->checked);
    r->verdict = d.verdict;
    r->resolve_ms = elapsed_since(start);
    if (st != PH_OK) {
        r->elapsed_ms = r->resolve_ms;
        return refuse(r, d.reason, st, d.log_detail, diag);
    }

    /* 4. The race over the checked addresses. */
    int s = -1;
    size_t won = 0;
    ph_reason why = PH_REASON_UPSTREAM_UNREACHABLE;
    ph_diag cd;
    cd.message[0] = '\0';
    st = race(&r->checked, deadline, stagger, &s, &won, &why, &cd);
    r->elapsed_ms = elapsed_since(start);
    if (st != PH_OK)
        return refuse(r, why, st, cd.message, diag);
    /* The caller gets a blocking socket (close-on-exec from socket()). */
    int fl = fcntl(s, F_GETFL);
    if (fl < 0 || fcntl(s, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(s);
        char line[PH_DIAG_MESSAGE_MAX];
        snprintf(line, sizeof line, "fcntl: %s", strerror(e));
        return refuse(r, PH_REASON_UPSTREAM_UNREACHABLE, PH_E_IO, line, diag);
    }
    r->addr = r->checked.addr[won];
    r->addr_len = r->checked.addr_len[won];
    if (ph_pinned_addr_string(&r->checked, won, r->addr_text, sizeof r->addr_text) != PH_OK)
        r->addr_text[0] = '\0';
    *fd = s;
    return PH_OK;
}

ph_status ph_dial_url(ph_guard *g, const char *list, const char *url, size_t len,
                      const ph_dial_options *opts, int *fd, ph_dial_result *r, ph_diag *diag)
{
    return dial(g, list, url, len, DIAL_URL, opts, fd, r, diag);
}

ph_status ph_dial_authority(ph_guard *g, const char *list, const char *authority, size_t len,
                            const ph_dial_options *opts, int *fd, ph_dial_result *r,
                            ph_diag *diag)
{
    return dial(g, list, authority, len, DIAL_AUTHORITY, opts, fd, r, diag);
}

bool ph_pinned_addrs_contains(const ph_pinned_addrs *a, const struct sockaddr *addr,
                              socklen_t len)
{
    if (a == NULL || addr == NULL)
        return false;
    for (size_t i = 0; i < a->count && i < PH_PINNED_MAX; i++) {
        const struct sockaddr_storage *p = &a->addr[i];
        if (p->ss_family != addr->sa_family)
            continue;
        if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
            struct sockaddr_in x, y;
            memcpy(&x, addr, sizeof x);
            memcpy(&y, p, sizeof y);
            if (x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr)
                return true;
        } else if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
            struct sockaddr_in6 x, y;
            memcpy(&x, addr, sizeof x);
            memcpy(&y, p, sizeof y);
            if (x.sin6_port == y.sin6_port && x.sin6_scope_id == y.sin6_scope_id &&
                memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0)
                return true;
        }
    }
    return false;
}
