/*
 * pinhole/resolve.h - resolving an allowed name to the addresses that may be
 * dialed (DESIGN section 4, steps 4 and 5), with c-ares.
 *
 * The rules, the same for the worker's blocking call and the proxy's event
 * loop (both go through ph_resolver_channel_options and
 * ph_resolve_check_answer, so they cannot drift):
 *   - exactly the matched name: no search domains (ARES_FLAG_NOSEARCH, an
 *     empty domain list overriding resolv.conf and LOCALDOMAIN, ndots 1), no
 *     HOSTALIASES (ARES_FLAG_NOALIASES), DNS only (no /etc/hosts);
 *   - never an IP literal: c-ares 1.18 would also send a literal to DNS and
 *     merge the answers, so literals are refused before c-ares sees them;
 *   - A and AAAA (AF_UNSPEC), answer order kept (ARES_AI_NOSORT: no RFC 6724
 *     sort, which would open a UDP socket per address);
 *   - every address goes through ph_addr_classify; any denied address refuses
 *     the whole answer (the rebinding case) with PH_REASON_DENIED_ADDRESS,
 *     naming the address and its block;
 *   - an empty answer or NXDOMAIN is PH_REASON_DNS_FAILURE, a timeout
 *     PH_REASON_DNS_TIMEOUT.
 */
#ifndef PINHOLE_RESOLVE_H
#define PINHOLE_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ares.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many addresses are kept (the first ones, in answer order);
 * every address of the answer is still checked. */
#define PH_PINNED_MAX 16
/* Default overall resolution timeout. */
#define PH_RESOLVE_TIMEOUT_MS_DEFAULT 5000
/* Longest server list accepted by ph_resolver_set_servers. */
#define PH_RESOLVE_SERVERS_MAX 512

/* The checked addresses of one name, in answer order, with the port set. */
typedef struct ph_pinned_addrs {
    size_t count;
    struct sockaddr_storage addr[PH_PINNED_MAX];
    socklen_t addr_len[PH_PINNED_MAX];
} ph_pinned_addrs;

/*
 * Fills *opts and *optmask with the options every Pinhole channel uses
 * (above), with a per-try timeout derived from timeout_ms (0 = default).
 * The caller may add its own options (e.g. ARES_OPT_SOCK_STATE_CB) before
 * ares_init_options; it must not remove these. opts points to static data
 * (the empty domain list and the "b" lookup string); nothing to free.
 */
PH_API void ph_resolver_channel_options(struct ares_options *opts, int *optmask,
                                        unsigned timeout_ms);

/*
 * Sets the channel's servers from "ip:port[,ip:port...]" (IPv6 as
 * "[addr]:port"; the port may be omitted for 53). Every entry must be an IP
 * address (never a name): PH_E_INVAL otherwise. servers NULL or "" keeps what
 * ares_init_options read from resolv.conf.
 */
PH_API ph_status ph_resolver_set_servers(ares_channel channel, const char *servers, ph_diag *diag);

/*
 * Checks a c-ares answer for port: every address is classified; the first
 * PH_PINNED_MAX go into *out in order. Returns PH_OK, or PH_E_DENIED with
 * *reason PH_REASON_DENIED_ADDRESS (diag names the address, block and RFC)
 * or PH_REASON_DNS_FAILURE (no address at all); *out is then empty. ai may
 * be NULL (an empty answer). Does not free ai.
 */
PH_API ph_status ph_resolve_check_answer(const struct ares_addrinfo *ai, uint16_t port,
                                         ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag);

/*
 * Completion of ph_resolve_start. st is PH_OK (addrs holds the checked
 * addresses) or PH_E_DENIED (reason says why, diag the detail). addrs and
 * diag are valid only during the call. Called exactly once, possibly from
 * inside ares_process_fd / ares_cancel / ares_destroy (ARES_EDESTRUCTION and
 * ARES_ECANCELLED map to PH_REASON_DNS_TIMEOUT: the caller gave up).
 */
typedef void (*ph_resolve_cb)(void *arg, ph_status st, ph_reason reason,
                              const ph_pinned_addrs *addrs, const ph_diag *diag);

/*
 * Starts resolving name for port on channel (which must have been created
 * with ph_resolver_channel_options). name must be a canonical host name
 * (pinhole/host.h); an IP literal or a malformed name is refused here with
 * PH_E_INVAL and cb is NOT called. Otherwise returns PH_OK and cb runs
 * exactly once, when the query completes (the caller drives the channel:
 * poll, libevent + ARES_OPT_SOCK_STATE_CB + ares_process_fd). c-ares may
 * complete a query at once, so cb can run BEFORE ph_resolve_start returns:
 * have arg ready first. The small request this allocates is freed before
 * cb is called; PH_E_NOMEM (cb not called) when it cannot be allocated.
 */
PH_API ph_status ph_resolve_start(ares_channel channel, const char *name, uint16_t port,
                                  ph_resolve_cb cb, void *arg, ph_diag *diag);

/* Settings of the blocking resolver. Zero-initialized = system resolv.conf,
 * default timeout. */
typedef struct ph_resolver_config {
    const char *servers;  /* NULL: resolv.conf; else ph_resolver_set_servers syntax */
    unsigned timeout_ms;  /* overall; 0 = PH_RESOLVE_TIMEOUT_MS_DEFAULT */
} ph_resolver_config;

/*
 * Blocking resolution for workers: resolves name with the rules above, on a
 * private channel, within cfg->timeout_ms overall (cfg NULL = defaults).
 * Thread-safe (no shared state). Returns PH_OK with *out filled; PH_E_DENIED
 * with *reason (PH_REASON_DNS_FAILURE, PH_REASON_DNS_TIMEOUT,
 * PH_REASON_DENIED_ADDRESS, PH_REASON_IP_LITERAL, PH_REASON_PARSE_ERROR for a
 * non-canonical name); PH_E_INVAL for a bad server list; PH_E_NOMEM /
 * PH_E_IO when c-ares cannot start.
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
