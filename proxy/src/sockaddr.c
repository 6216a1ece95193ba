/* sockaddr.c - the proxy's settings' addresses and prefixes (sockaddr.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pinhole/diag.h"
#include "sockaddr.h"

ph_status px_sockaddr_parse(const char *text, px_sockaddr *out, ph_diag *diag)
{
    ph_diag d;
    if (ph_sockaddr_parse(text, strlen(text), PH_SOCKADDR_PORT_REQUIRED, out, &d) != PH_OK)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': %s", text, d.message);
    return PH_OK;
}

const char *px_prefix_parse(const char *text, px_prefix *out)
{
    char host[INET6_ADDRSTRLEN];
    const char *slash = strchr(text, '/');
    size_t hl = slash ? (size_t)(slash - text) : strlen(text);
    memset(out, 0, sizeof *out);
    if (hl == 0 || hl >= sizeof host)
        return "expected ADDR or ADDR/BITS";
    memcpy(host, text, hl);
    host[hl] = '\0';
    unsigned max;
    if (inet_pton(AF_INET, host, out->addr) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, host, out->addr) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        return "expected a numeric IPv4 or IPv6 address (ADDR or ADDR/BITS)";
    }
    unsigned long bits = max;
    if (slash) {
        char *end;
        errno = 0;
        if (slash[1] < '0' || slash[1] > '9')
            return "expected a prefix length after '/'";
        bits = strtoul(slash + 1, &end, 10);
        if (errno || *end || bits > max)
            return "prefix length out of range";
    }
    if (bits == 0)
        return "a /0 prefix would let every address name its own client";
    static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
    if (out->family == AF_INET6 && bits >= 96 && memcmp(out->addr, v4mapped, 12) == 0)
        return "an IPv4-mapped prefix matches no source (IPv6 listeners are IPv6-only): "
               "write the IPv4 prefix";
    for (unsigned i = (unsigned)bits; i < max; i++)
        if (out->addr[i / 8] & (0x80 >> (i % 8)))
            return "address bits set past the prefix length";
    out->bits = (uint8_t)bits;
    return NULL;
}

bool px_prefix_contains(const px_prefix *p, const struct sockaddr *sa)
{
    const uint8_t *a;
    if (sa->sa_family != p->family)
        return false;
    if (sa->sa_family == AF_INET)
        a = (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
    else
        a = (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
    unsigned full = p->bits / 8, rest = p->bits % 8;
    if (memcmp(a, p->addr, full) != 0)
        return false;
    return rest == 0 || ((a[full] ^ p->addr[full]) & (uint8_t)(0xff << (8 - rest))) == 0;
}
