/* resolve.c - the resolution rules of the one resolver driver (resolver.c):
 * channel options, server lists, the answer check and the one mapping of a
 * c-ares completion to a reason. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/diag.h"
#include "pinhole/addr.h"
#include "pinhole/host.h"
#include "pinhole/resolve.h"
#include "pinhole/sockaddr.h"
#include "resolve-int.h"

#define SERVERS_COUNT_MAX 8

/* c-ares copies both at ares_init_options; static so the options struct the
 * caller holds never points at freed memory. */
static char *NO_DOMAINS[1] = {NULL};
static char LOOKUPS_DNS_ONLY[] = "b";

void ph_resolver_channel_options(struct ares_options *opts, int *optmask, unsigned timeout_ms)
{
    unsigned total = timeout_ms != 0 ? timeout_ms : PH_RESOLVE_TIMEOUT_MS_DEFAULT;
    unsigned per_try = total / 3;
    if (per_try < 100)
        per_try = 100;
    if (per_try > 2000)
        per_try = 2000;
    memset(opts, 0, sizeof *opts);
    /* NOSEARCH: never append a search domain. NOALIASES: ignore the
     * HOSTALIASES file an environment variable could name. */
    opts->flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
    opts->timeout = (int)per_try;
    opts->tries = 3;
    /* ndots 1: every name we resolve has >= 2 labels, so it is tried as is
     * first even if something re-enabled searching. */
    opts->ndots = 1;
    /* An explicit empty domain list wins over resolv.conf's search line and
     * the LOCALDOMAIN variable (c-ares only reads those when unset). */
    opts->domains = NO_DOMAINS;
    opts->ndomains = 0;
    /* DNS only: /etc/hosts is the worker host's business, not a tenant's. */
    opts->lookups = LOOKUPS_DNS_ONLY;
    *optmask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_NDOTS |
               ARES_OPT_DOMAINS | ARES_OPT_LOOKUPS;
}

/* One "ip[:port]" / "[ip6][:port]" entry into node: port 1..65535, 53
 * when absent. */
static bool parse_server(const char *s, size_t n, struct ares_addr_port_node *node)
{
    ph_sockaddr sa;
    memset(node, 0, sizeof *node);
    if (ph_sockaddr_parse(s, n, 53, &sa, NULL) != PH_OK)
        return false;
    if (sa.ss.ss_family == AF_INET6) {
        struct sockaddr_in6 s6;
        memcpy(&s6, &sa.ss, sizeof s6);
        node->family = AF_INET6;
        memcpy(&node->addr.addr6, &s6.sin6_addr, sizeof s6.sin6_addr);
        node->udp_port = node->tcp_port = ntohs(s6.sin6_port);
    } else {
        struct sockaddr_in s4;
        memcpy(&s4, &sa.ss, sizeof s4);
        node->family = AF_INET;
        memcpy(&node->addr.addr4, &s4.sin_addr, sizeof s4.sin_addr);
        node->udp_port = node->tcp_port = ntohs(s4.sin_port);
    }
    return node->udp_port != 0;
}

ph_status ph_resolver_set_servers(ares_channel channel, const char *servers, ph_diag *diag)
{
    if (channel == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolver: missing channel");
    if (servers == NULL || servers[0] == '\0')
        return PH_OK;
    size_t len = strnlen(servers, PH_RESOLVE_SERVERS_MAX + 1);
    if (len > PH_RESOLVE_SERVERS_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "DNS server list is over %d bytes",
                           PH_RESOLVE_SERVERS_MAX);
    struct ares_addr_port_node nodes[SERVERS_COUNT_MAX];
    size_t count = 0, pos = 0;
    while (pos <= len) {
        const char *comma = memchr(servers + pos, ',', len - pos);
        size_t n = comma != NULL ? (size_t)(comma - servers) - pos : len - pos;
        if (count == SERVERS_COUNT_MAX)
            return ph_diag_set(diag, PH_E_LIMIT, pos, "at most %d DNS servers",
                               SERVERS_COUNT_MAX);
        if (!parse_server(servers + pos, n, &nodes[count]))
            return ph_diag_set(diag, PH_E_INVAL, pos,
                               "DNS server %.*s is not IP[:PORT] or [IPv6][:PORT]", (int)n,
                               servers + pos);
        nodes[count].next = NULL;
        if (count > 0)
            nodes[count - 1].next = &nodes[count];
        count++;
        pos += n + 1;
    }
    int rc = ares_set_servers_ports(channel, &nodes[0]);
    if (rc != ARES_SUCCESS)
        return ph_diag_set(diag, rc == ARES_ENOMEM ? PH_E_NOMEM : PH_E_INVAL, 0,
                           "c-ares refused the DNS servers: %s", ares_strerror(rc));
    return PH_OK;
}

ph_status ph_resolve_check_answer(const struct ares_addrinfo *ai, uint16_t port,
                                  ph_pinned_addrs *out, ph_reason *reason, ph_diag *diag)
{
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "resolve: missing argument");
    out->count = 0;
    size_t total = 0;
    for (const struct ares_addrinfo_node *n = ai != NULL ? ai->nodes : NULL; n != NULL;
         n = n->ai_next) {
        total++;
        ph_addr_verdict v;
        char text[INET6_ADDRSTRLEN];
        bool known = n->ai_addr != NULL &&
                     ((n->ai_family == AF_INET && n->ai_addrlen >= sizeof(struct sockaddr_in)) ||
                      (n->ai_family == AF_INET6 && n->ai_addrlen >= sizeof(struct sockaddr_in6)));
        if (!known || ph_addr_classify(n->ai_addr, n->ai_addrlen, &v) != PH_OK) {
            out->count = 0;
            if (reason != NULL)
                *reason = PH_REASON_DENIED_ADDRESS;
            if (!known || v.block == NULL)
                return ph_diag_set(diag, PH_E_DENIED, 0,
                                   "the answer holds an address that cannot be classified");
            ph_sockaddr_addr_text(n->ai_addr, text, sizeof text);
            return ph_diag_set(diag, PH_E_DENIED, 0, "address %s is in %s (%s, %s)", text,
                               v.block->prefix, v.block->name, v.block->rfc);
        }
        if (out->count == PH_PINNED_MAX)
            continue; /* keep checking: a denied address later still refuses */
        size_t i = out->count++;
        memset(&out->addr[i], 0, sizeof out->addr[i]);
        if (n->ai_family == AF_INET) {
            struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&out->addr[i];
            memcpy(sin, n->ai_addr, sizeof *sin);
            sin->sin_port = htons(port);
            out->addr_len[i] = sizeof *sin;
        } else {
            struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)(void *)&out->addr[i];
            memcpy(sin6, n->ai_addr, sizeof *sin6);
            sin6->sin6_port = htons(port);
            out->addr_len[i] = sizeof *sin6;
        }
    }
    if (total == 0) {
        if (reason != NULL)
            *reason = PH_REASON_DNS_FAILURE;
        return ph_diag_set(diag, PH_E_DENIED, 0, "the answer holds no address");
    }
    if (reason != NULL)
        *reason = PH_REASON_ALLOWED;
    return PH_OK;
}

ph_status ph_pinned_addr_string(const ph_pinned_addrs *a, size_t i, char *buf, size_t cap)
{
    if (a == NULL || buf == NULL || cap == 0 || i >= a->count)
        return PH_E_INVAL;
    ph_sockaddr_addr_text((const struct sockaddr *)&a->addr[i], buf, cap);
    return PH_OK;
}

unsigned ph_resolve_outcome(int status, const struct ares_addrinfo *res, const char *name,
                            uint16_t port, unsigned max_ttl_s, unsigned negative_ttl_s,
                            ph_resolve_answer *a)
{
    ph_diag diag;
    memset(&diag, 0, sizeof diag);
    a->addrs.count = 0;
    a->detail[0] = '\0';
    unsigned ttl = 0;
    switch (status) {
    case ARES_SUCCESS:
    case ARES_ENODATA:
        /* Every address checked; an empty answer is a failure. */
        a->st = ph_resolve_check_answer(status == ARES_SUCCESS ? res : NULL, port, &a->addrs,
                                        &a->reason, &diag);
        if (a->st == PH_OK) {
            ttl = max_ttl_s;
            for (const struct ares_addrinfo_node *n = res != NULL ? res->nodes : NULL; n != NULL;
                 n = n->ai_next)
                if (n->ai_ttl >= 0 && (unsigned)n->ai_ttl < ttl)
                    ttl = (unsigned)n->ai_ttl;
            return ttl;
        }
        snprintf(a->detail, sizeof a->detail, "%s", diag.message);
        return negative_ttl_s; /* the denylist is fixed: the verdict cannot change */
    case ARES_ETIMEOUT:
    case ARES_ECANCELLED:
    case ARES_EDESTRUCTION:
        a->st = PH_E_DENIED;
        a->reason = PH_REASON_DNS_TIMEOUT;
        snprintf(a->detail, sizeof a->detail, "no DNS answer for %s in time (%s)", name,
                 ares_strerror(status));
        return 0;
    default:
        a->st = PH_E_DENIED;
        a->reason = PH_REASON_DNS_FAILURE;
        snprintf(a->detail, sizeof a->detail, "DNS lookup of %s failed: %s", name,
                 ares_strerror(status));
        /* Only an authoritative "no such name" is worth remembering. */
        return status == ARES_ENOTFOUND ? negative_ttl_s : 0;
    }
}
