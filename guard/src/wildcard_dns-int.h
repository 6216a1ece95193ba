/* wildcard_dns-int.h - the wildcard-DNS and DNS-rebinding services a rule
 * may never name and the guard never allows (guard/data/
 * wildcard_dns_services.txt, compiled in). Private to libpinhole; policyc
 * reaches it through compiler-int.h. */
#ifndef PINHOLE_WILDCARD_DNS_INT_H
#define PINHOLE_WILDCARD_DNS_INT_H

#include <stddef.h>

/* One service; every field is a static string. */
typedef struct ph_wildcard_dns_service {
    const char *domain; /* canonical, e.g. "nip.io" */
    size_t domain_len;
    const char *kind;   /* "address-in-name", "loopback" or "rebinding" */
    const char *source; /* https URL where the service describes itself */
} ph_wildcard_dns_service;

/* The service whose domain is host[0..len) or a parent of it on a label
 * boundary ("nip.io", "8-8-8-8.nip.io"; not "snip.io"), or NULL. host must
 * be canonical (lowercase, no trailing dot): the URL and CONNECT parsers and
 * policyc's canonical candidate are. Thread-safe, allocation-free. */
const ph_wildcard_dns_service *ph_wildcard_dns_find(const char *host, size_t len);

/* What the service does, in a few words, from its kind (static string):
 * "every name under it answers with the address it spells", ... */
const char *ph_wildcard_dns_describe(const ph_wildcard_dns_service *s);

/* The compiled list, for documentation checks: *count entries. */
const ph_wildcard_dns_service *ph_wildcard_dns_all(size_t *count);

#endif
