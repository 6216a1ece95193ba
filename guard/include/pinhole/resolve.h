/*
 * pinhole/resolve.h - resolving an allowed name to the addresses that may be
 * dialed (DESIGN section 4, steps 4 and 5).
 *
 * One resolver driver (ph_resolver) serves both enforcement points: the
 * proxy drives it from its libevent loops, ph_resolve_blocking drives it
 * with poll(2) for workers. Its rules:
 *   - exactly the matched name: no search domains (an empty domain list
 *     overriding resolv.conf and LOCALDOMAIN, ndots 1), no HOSTALIASES, DNS
 *     only (no /etc/hosts);
 *   - never an IP literal: c-ares 1.18 would also send a literal to DNS and
 *     merge the answers, so literals are refused before c-ares sees them;
 *   - A and AAAA, answer order kept (no RFC 6724 sort, which would open a
 *     UDP socket per address);
 *   - every address goes through ph_addr_classify; any denied address refuses
 *     the whole answer (the rebinding case) with PH_REASON_DENIED_ADDRESS,
 *     naming the address and its block;
 *   - an empty answer, NXDOMAIN or any other DNS error is
 *     PH_REASON_DNS_FAILURE; no answer within the resolver's timeout is
 *     PH_REASON_DNS_TIMEOUT;
 *   - checked answers are cached by name (TTL capped at cache_max_ttl_s),
 *     NXDOMAIN, empty and denied answers for negative_ttl_s; timeouts and
 *     server failures are not cached.
 * Nothing here exposes c-ares: the handles are opaque and a program using
 * this header needs no c-ares headers.
 */
#ifndef PINHOLE_RESOLVE_H
#define PINHOLE_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many addresses are kept (the first ones, in answer order);
 * every address of the answer is still checked. */
#define PH_PINNED_MAX 16
/* Default overall resolution timeout. */
#define PH_RESOLVE_TIMEOUT_MS_DEFAULT 5000
/* Longest server list accepted in ph_resolver_config.servers. */
#define PH_RESOLVE_SERVERS_MAX 512

/* The checked addresses of one name, in answer order, with the port set. */
typedef struct ph_pinned_addrs {
    size_t count;
    struct sockaddr_storage addr[PH_PINNED_MAX];
    socklen_t addr_len[PH_PINNED_MAX];
} ph_pinned_addrs;

/* Settings of a resolver. Zero-initialized = system resolv.conf, default
 * timeout, no cache. */
typedef struct ph_resolver_config {
    /* NULL or "": resolv.conf; else "ip[:port][,ip[:port]...]" (IPv6 as
     * "[addr]:port", port 53 when omitted); names are refused (PH_E_INVAL). */
    const char *servers;
    unsigned timeout_ms;      /* per query, overall; 0 = PH_RESOLVE_TIMEOUT_MS_DEFAULT */
    unsigned cache_entries;   /* cache slots (bounded, never grows); 0 = no cache */
    unsigned cache_max_ttl_s; /* cap on a checked answer's TTL; 0 = positive answers not cached */
    unsigned negative_ttl_s;  /* NXDOMAIN / empty / denied answers; 0 = not cached */
} ph_resolver_config;

/* The outcome of one query, as handed to its callback. */
typedef struct ph_resolve_answer {
    ph_status st;          /* PH_OK (addrs filled) or PH_E_DENIED (reason says why) */
    ph_reason reason;      /* ALLOWED, DNS_FAILURE, DNS_TIMEOUT, DENIED_ADDRESS */
    ph_pinned_addrs addrs; /* count 0 unless st == PH_OK; ports set to the query's */
    char detail[PH_DIAG_MESSAGE_MAX]; /* for the log; "" when allowed */
    bool from_cache;       /* answered from the cache, DNS not asked */
    uint64_t elapsed_us;   /* from ph_resolver_start to the answer */
} ph_resolve_answer;

/* A resolver: one DNS channel, its cache and its queries. Single-threaded:
 * every call on one resolver (and every callback) happens on the thread
 * driving it. */
typedef struct ph_resolver ph_resolver;
/* One query, owned by its resolver (rule at ph_resolver_start). */
typedef struct ph_resolve_query ph_resolve_query;

/* Readiness bits for the watch callback, ph_resolver_fds and
 * ph_resolver_process. */
#define PH_RESOLVER_READ 1u
#define PH_RESOLVER_WRITE 2u

/* How an event loop drives a resolver (all optional; a poll loop may leave
 * them NULL and ask ph_resolver_fds / ph_resolver_timeout_ms instead):
 *   watch(arg, fd, events): watch fd for events (PH_RESOLVER_READ|WRITE)
 *     from now on, replacing what was asked before; events 0: stop watching
 *     (fd is about to be closed). Called from inside the resolver's calls.
 *   timer(arg, ms): call ph_resolver_process(r, -1, 0) in ms milliseconds
 *     (0: on the next loop iteration, never from inside the current call),
 *     replacing the previous request; ms < 0: no timer needed. Called at the
 *     end of ph_resolver_start, ph_resolver_process and ph_resolver_cancel. */
typedef struct ph_resolver_loop {
    void (*watch)(void *arg, int fd, unsigned events);
    void (*timer)(void *arg, long ms);
    void *arg;
} ph_resolver_loop;

/*
 * Creates a resolver with cfg (NULL = defaults) driven by loop (NULL = poll
 * style, no callbacks). *out is the caller's; free it with ph_resolver_free.
 * PH_E_INVAL for a bad server list, PH_E_LIMIT for one over
 * PH_RESOLVE_SERVERS_MAX bytes or 8 servers, PH_E_NOMEM, PH_E_IO when the
 * DNS library cannot start. cfg->servers is copied.
 */
PH_API ph_status ph_resolver_new(const ph_resolver_config *cfg, const ph_resolver_loop *loop,
                                 ph_resolver **out, ph_diag *diag);

/*
 * Frees *r and sets it to NULL (NULL or *r NULL: nothing). Queries still
 * live are freed without their callbacks running (their owners are going
 * away with the loop). Must not be called from a query's callback.
 */
PH_API void ph_resolver_free(ph_resolver **r);

/*
 * Callback of one query. answer is valid only during the call. Ownership:
 * by the time cb runs the query is already freed (its handle is dead; forget
 * it before or in cb). cb may start and cancel other queries.
 */
typedef void (*ph_resolve_cb)(void *arg, const ph_resolve_answer *answer);

/*
 * Starts resolving name (a canonical host name, pinhole/host.h) for port.
 * An IP literal or a malformed name is refused with PH_E_INVAL; PH_E_NOMEM
 * when the query cannot be allocated; then cb never runs and *q is NULL.
 * On PH_OK *q is a handle owned by the resolver, valid until cb starts or
 * ph_resolver_cancel(*q), whichever comes first.
 *
 * The ownership rule: cb runs exactly once per started query that is not
 * cancelled, and only from ph_resolver_process (the loop's own later event):
 * never inside ph_resolver_start (even for a cache hit, a name c-ares refuses
 * at once such as .onion, or a lookup that fails at once, e.g. at EMFILE),
 * never inside the DNS library, never inside ph_resolver_cancel or
 * ph_resolver_free. An answer ready at once arms the timer for 0 ms.
 */
PH_API ph_status ph_resolver_start(ph_resolver *r, const char *name, uint16_t port,
                                   ph_resolve_cb cb, void *arg, ph_resolve_query **q,
                                   ph_diag *diag);

/* Frees the query; its callback will not run. q must be a live handle (or
 * NULL). Never calls any query's callback. */
PH_API void ph_resolver_cancel(ph_resolve_query *q);

/*
 * Hands the resolver readiness of fd (events: PH_RESOLVER_READ|WRITE; a
 * poll error or hang-up counts as READ), or fd -1 for "the timer fired".
 * Then passes deadlines and delivers every answer ready before this call
 * began (answers that become ready during delivery wait for the next call,
 * which the timer asks for).
 */
PH_API void ph_resolver_process(ph_resolver *r, int fd, unsigned events);

/* One descriptor to watch and what for. */
typedef struct ph_resolver_fd {
    int fd;
    unsigned events; /* PH_RESOLVER_READ|WRITE */
} ph_resolver_fd;

/* Poll-style driving: the descriptors to watch now (at most cap written;
 * returns how many), and the milliseconds until ph_resolver_process(r, -1,
 * 0) is due (0: now; -1: no query pending). */
PH_API size_t ph_resolver_fds(ph_resolver *r, ph_resolver_fd *fds, size_t cap);
PH_API long ph_resolver_timeout_ms(ph_resolver *r);

/*
 * Resolves name for port on r, driving r with poll(2) until the answer or
 * r's timeout; uses and fills r's cache. r must be driven by nobody else
 * (created with loop NULL). Returns PH_OK with *out filled; PH_E_DENIED with
 * *reason (PH_REASON_DNS_FAILURE, PH_REASON_DNS_TIMEOUT,
 * PH_REASON_DENIED_ADDRESS, PH_REASON_IP_LITERAL, PH_REASON_PARSE_ERROR for a
 * non-canonical name) and diag; PH_E_NOMEM.
 */
PH_API ph_status ph_resolver_resolve(ph_resolver *r, const char *name, uint16_t port,
                                     ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag);

/*
 * Blocking resolution for workers: ph_resolver_resolve on a private
 * resolver made from cfg (NULL = defaults), freed before returning.
 * Thread-safe (no shared state). Same results as ph_resolver_resolve, plus
 * PH_E_INVAL / PH_E_LIMIT for a bad server list and PH_E_IO when the DNS
 * library cannot start. cfg->cache_entries only lives for the call: a
 * worker that wants a cache uses the guard's (ph_decision_resolve,
 * ph_dial_url: pinhole/guard.h ph_guard_options).
 */
PH_API ph_status ph_resolve_blocking(const ph_resolver_config *cfg, const char *name,
                                     uint16_t port, ph_pinned_addrs *out, ph_reason *reason,
                                     ph_diag *diag);

/* Formats the address (not the port) of entry i of a, e.g. "93.184.215.14"
 * or "2606:2800::1" (IPv6 without brackets), into buf[0..cap);
 * INET6_ADDRSTRLEN suffices. PH_E_INVAL for i past the end. */
PH_API ph_status ph_pinned_addr_string(const ph_pinned_addrs *a, size_t i, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_RESOLVE_H */
