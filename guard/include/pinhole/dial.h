/*
 * pinhole/dial.h - one call from a tenant-supplied URL to a connected socket
 * (DESIGN section 4, steps 1 to 6, for a worker).
 *
 * ph_dial_url decides, resolves, checks and connects in one call, so a
 * worker has no way to dial an address that was not checked:
 *   1. the guard's one decision (ph_decide_url, or ph_decide_connect for an
 *      authority) with the caller naming the list (a trusted caller, no
 *      grant): parse_error, ip_literal, unknown_list, not_allowlisted,
 *      port_not_allowed, wildcard_dns;
 *   2. exactly the canonical host resolved with the guard's resolver
 *      settings (servers, timeout) and its DNS cache (ph_guard_options): a
 *      cached outcome was checked when it was stored, and is used as is
 *      (an allowed answer until its TTL, capped; a refused one for the
 *      negative TTL); otherwise a private resolver for the call asks DNS
 *      and fills the cache; dns_failure, dns_timeout;
 *   3. every address of the answer checked (pinhole/addr.h); one denied
 *      address refuses the whole answer: denied_address;
 *   4. a TCP connection to the checked addresses only, RFC 8305 "happy
 *      eyeballs": the addresses interleaved by family, IPv6 first when the
 *      answer has both, a new attempt every stagger_ms (or as soon as the
 *      previous one failed), the first to connect wins and the others are
 *      closed; upstream_unreachable (every attempt failed),
 *      upstream_timeout (the deadline passed with an attempt pending).
 * One overall deadline covers steps 2 to 4.
 *
 * Threads: every function may be called concurrently on one guard (the
 * decision pins one policy version; the DNS cache is the only state calls
 * share, behind its own lock). Each call blocks for at most the deadline.
 */
#ifndef PINHOLE_DIAL_H
#define PINHOLE_DIAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "pinhole/guard.h"
#include "pinhole/resolve.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default overall deadline (resolution and connection). */
#define PH_DIAL_TIMEOUT_MS_DEFAULT 10000
/* Default RFC 8305 connection-attempt delay. */
#define PH_DIAL_STAGGER_MS_DEFAULT 250
/* Size of ph_dial_result.addr_text (INET6_ADDRSTRLEN). */
#define PH_DIAL_ADDR_TEXT_MAX 46

/* Options of one dial; caller-owned, read during the call only. NULL or
 * zero-initialized: the defaults. */
typedef struct ph_dial_options {
    unsigned timeout_ms; /* overall deadline: resolve + connect; 0 = PH_DIAL_TIMEOUT_MS_DEFAULT */
    unsigned stagger_ms; /* RFC 8305 connection-attempt delay; 0 = PH_DIAL_STAGGER_MS_DEFAULT */
} ph_dial_options;

/*
 * What one dial decided and did. Self-contained (copies), caller-owned,
 * usually on the stack; always filled, on success and on refusal.
 */
typedef struct ph_dial_result {
    /* The decision: allowed, reason (any refusal reason of this header),
     * rule provenance, canonical host and port, policy id, detail. */
    ph_verdict verdict;
    /* The address connected to (with the port); addr_len 0 when none. */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    /* Its text form without port, e.g. "93.184.215.14" or "2001:db8::1"
     * ("" when none). */
    char addr_text[PH_DIAL_ADDR_TEXT_MAX];
    /* Every address that was checked and allowed, in answer order (count 0
     * when the decision or the resolution refused). */
    ph_pinned_addrs checked;
    /* Milliseconds spent resolving, and in all (monotonic clock). */
    unsigned resolve_ms;
    unsigned elapsed_ms;
} ph_dial_result;

/*
 * Dials url[0..len) (an http or https URL; need not be NUL-terminated) as
 * allowed by list in g's policy (the steps at the top of this header).
 *
 * On PH_OK *fd is a connected TCP socket in BLOCKING mode with close-on-exec
 * set; the caller owns it and closes it. r->verdict.allowed is true and
 * r->addr / r->addr_text say which checked address it is connected to.
 * The caller still speaks TLS itself for https (verifying the certificate
 * against r->verdict.host, never the address).
 *
 * On refusal: PH_E_DENIED, *fd -1, r->verdict.reason the stable reason
 * (parse_error, ip_literal, unknown_list, not_allowlisted,
 * port_not_allowed, wildcard_dns, dns_failure, dns_timeout, denied_address,
 * upstream_unreachable, upstream_timeout) and r->verdict.detail / diag the
 * line for the log. PH_E_INVAL (fd -1) for NULL g, list, url, fd or r;
 * PH_E_NOMEM / PH_E_IO when the resolver cannot start (r->verdict.reason
 * dns_failure). opts and diag may be NULL.
 */
PH_API ph_status ph_dial_url(ph_guard *g, const char *list, const char *url, size_t len,
                             const ph_dial_options *opts, int *fd, ph_dial_result *r,
                             ph_diag *diag);

/*
 * ph_dial_url for a CONNECT authority "host:port" (ph_authority_parse
 * rules; the port is required); r->verdict.scheme is PH_SCHEME_NONE. Same
 * returns and ownership.
 */
PH_API ph_status ph_dial_authority(ph_guard *g, const char *list, const char *authority,
                                   size_t len, const ph_dial_options *opts, int *fd,
                                   ph_dial_result *r, ph_diag *diag);

/*
 * Whether addr (len bytes; AF_INET or AF_INET6, with the port) is one of
 * a's entries, family, address and port equal. For a socket hook that must
 * refuse any address that was not checked (libpinhole-curl's open-socket
 * check). false for NULL arguments or another family.
 */
PH_API bool ph_pinned_addrs_contains(const ph_pinned_addrs *a, const struct sockaddr *addr,
                                     socklen_t len);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_DIAL_H */
