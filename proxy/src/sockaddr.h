/* sockaddr.h - numeric socket addresses as the proxy's settings and logs
 * spell them ("1.2.3.4:80", "[::1]:80"), and the prefixes of trusted PROXY
 * protocol sources. Listeners are not destinations:
 * nothing here resolves a name. */
#ifndef PX_SOCKADDR_H
#define PX_SOCKADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pinhole/sockaddr.h"
#include "pinhole/status.h"

/* A listener's address (pinhole/sockaddr.h); formatted with
 * ph_sockaddr_text / ph_sockaddr_addr_text. */
typedef ph_sockaddr px_sockaddr;

/* Parses "1.2.3.4:80" or "[::1]:80" (ph_sockaddr_parse, the port required;
 * numeric only: listeners are not destinations and are never resolved).
 * The diagnostic quotes text. */
ph_status px_sockaddr_parse(const char *text, px_sockaddr *out, ph_diag *diag);

/* An address prefix: "10.0.0.0/8", "2001:db8::/32", or an address alone
 * (all its bits). */
typedef struct px_prefix {
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];    /* network order; the first 4 bytes for AF_INET */
    uint8_t bits;
} px_prefix;

/* Parses a prefix (numeric, inet_pton's forms, no brackets, no zone).
 * Strict: host bits set past the prefix length ("10.0.0.1/8", a typo for
 * a host or a network), a length of 0 (every address) and an IPv4-mapped
 * prefix (::ffff:a.b.c.d, which no source matches) are refused.
 * Returns NULL or a static message. */
const char *px_prefix_parse(const char *text, px_prefix *out);
/* Whether sa (AF_INET or AF_INET6) lies in p (same family only: an
 * IPv4-mapped IPv6 address is not in an IPv4 prefix). */
bool px_prefix_contains(const px_prefix *p, const struct sockaddr *sa);

#endif
