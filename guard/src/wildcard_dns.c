/* wildcard_dns.c - matching a host against the wildcard-DNS services
 * (wildcard_dns-int.h). The list is a dozen entries: a linear scan of
 * suffix compares costs less than hashing the name. */
#include "wildcard_dns-int.h"

#include <string.h>

static const ph_wildcard_dns_service services[] = {
#include "wildcard_dns_data.inc"
};

const ph_wildcard_dns_service *ph_wildcard_dns_find(const char *host, size_t len)
{
    for (size_t i = 0; i < sizeof services / sizeof services[0]; i++) {
        const ph_wildcard_dns_service *s = &services[i];
        if (len < s->domain_len || memcmp(host + len - s->domain_len, s->domain, s->domain_len) != 0)
            continue;
        if (len == s->domain_len || host[len - s->domain_len - 1] == '.')
            return s;
    }
    return NULL;
}

const char *ph_wildcard_dns_describe(const ph_wildcard_dns_service *s)
{
    if (strcmp(s->kind, "loopback") == 0)
        return "every name under it answers with loopback";
    if (strcmp(s->kind, "rebinding") == 0)
        return "DNS rebinding: its answers change on purpose";
    return "every name under it answers with the address it spells";
}

const ph_wildcard_dns_service *ph_wildcard_dns_all(size_t *count)
{
    *count = sizeof services / sizeof services[0];
    return services;
}
