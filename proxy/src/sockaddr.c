/* sockaddr.c - numeric socket addresses to and from text (sockaddr.h). */
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
    char host[PX_ADDR_MAX];
    const char *colon = strrchr(text, ':');
    memset(out, 0, sizeof *out);
    if (colon == NULL || colon == text || strlen(text) >= sizeof host)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': expected ADDR:PORT", text);
    size_t hl = (size_t)(colon - text);
    memcpy(host, text, hl);
    host[hl] = '\0';
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || colon[1] == '\0' || port < 0 || port > 65535)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': bad port", text);
    if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
            return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': bad IPv6 address", text);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        out->len = sizeof *s6;
        return PH_OK;
    }
    struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
        return ph_diag_set(diag, PH_E_INVAL, 0, "'%s': expected a numeric IPv4 or [IPv6] address",
                           text);
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    out->len = sizeof *s4;
    return PH_OK;
}

void px_addr_format(const struct sockaddr *sa, char *buf, size_t cap)
{
    if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
                  (socklen_t)cap);
    else if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
                  (socklen_t)cap);
    else
        snprintf(buf, cap, "unix");
}

void px_sockaddr_format(const struct sockaddr *sa, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];
    px_addr_format(sa, a, sizeof a);
    if (sa->sa_family == AF_INET6)
        snprintf(buf, cap, "[%s]:%u", a,
                 ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port));
    else if (sa->sa_family == AF_INET)
        snprintf(buf, cap, "%s:%u", a,
                 ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port));
    else
        snprintf(buf, cap, "unix");
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
