/* wildcard_dns.c - matching a host against the wildcard-DNS services
 * (wildcard_dns-int.h). The list is a dozen entries: a linear scan of
 * suffix compares costs less than hashing the name. */
#include "wildcard_dns-int.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static const ph_wildcard_dns_service services[] = {
#include "wildcard_dns_data.inc"
};

/* Whether host[0..len) ends with d[0..n), compared from the last byte: a
 * name not under d almost always differs there, so each service costs a
 * compare or two (every allowed lookup checks all of them). */
static bool ends_with(const char *host, size_t len, const char *d, size_t n)
{
    if (len < n)
        return false;
    const char *p = host + len - n;
    for (size_t i = n; i-- > 0;)
        if (p[i] != d[i])
            return false;
    return true;
}

#define NSERVICES (sizeof services / sizeof services[0])
_Static_assert(NSERVICES <= 32, "by_last holds one bit per service");

/* by_last[c]: bit i set when service i's domain ends with byte c, so a name
 * is compared only with the services that end as it does (usually none or
 * one: every allowed lookup asks). Built on first use; threads racing to
 * build it write the same values (the same pattern as table_checksum.c). */
static uint32_t by_last[256];
static int by_last_ready;

static uint32_t services_ending_with(unsigned char last)
{
    if (!__atomic_load_n(&by_last_ready, __ATOMIC_ACQUIRE)) {
        for (size_t i = 0; i < NSERVICES; i++) {
            unsigned char c = (unsigned char)services[i].domain[services[i].domain_len - 1];
            __atomic_fetch_or(&by_last[c], (uint32_t)1 << i, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&by_last_ready, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&by_last[last], __ATOMIC_RELAXED);
}

const ph_wildcard_dns_service *ph_wildcard_dns_find(const char *host, size_t len)
{
    if (len == 0)
        return NULL;
    for (uint32_t m = services_ending_with((unsigned char)host[len - 1]); m != 0; m &= m - 1) {
        const ph_wildcard_dns_service *s = &services[__builtin_ctz(m)];
        if (!ends_with(host, len, s->domain, s->domain_len))
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
