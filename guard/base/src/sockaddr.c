/* sockaddr.c - numeric socket addresses to and from text
 * (pinhole/sockaddr.h). */
#include "pinhole/sockaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static ph_status refuse(ph_sockaddr *out, ph_diag *diag, size_t at, const char *what)
{
    memset(out, 0, sizeof *out);
    return ph_diag_set(diag, PH_E_INVAL, at, "%s", what);
}

ph_status ph_sockaddr_parse(const char *text, size_t len, int default_port, ph_sockaddr *out,
                            ph_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (text == NULL)
        return refuse(out, diag, 0, "expected ADDR:PORT");
    char host[INET6_ADDRSTRLEN];
    size_t host_at = 0, host_len, rest;
    bool v6 = len > 0 && text[0] == '[';
    if (v6) {
        const char *close = memchr(text, ']', len);
        if (close == NULL)
            return refuse(out, diag, 0, "bad IPv6 address");
        host_at = 1;
        host_len = (size_t)(close - text) - 1;
        rest = (size_t)(close - text) + 1;
    } else {
        const char *colon = memchr(text, ':', len);
        host_len = colon != NULL ? (size_t)(colon - text) : len;
        rest = host_len;
    }
    if (host_len == 0 && !v6)
        return refuse(out, diag, 0, "expected ADDR:PORT");
    /* What follows the address: nothing, or ":PORT". */
    long port = default_port;
    if (rest < len) {
        if (text[rest] != ':')
            return refuse(out, diag, rest, v6 ? "bad IPv6 address" : "expected ADDR:PORT");
        size_t digits = len - rest - 1;
        if (digits == 0 || digits > 5 || (digits > 1 && text[rest + 1] == '0'))
            return refuse(out, diag, rest + 1, "bad port"); /* one spelling: no leading 0 */
        port = 0;
        for (size_t i = rest + 1; i < len; i++) {
            if (text[i] < '0' || text[i] > '9')
                return refuse(out, diag, i, "bad port");
            port = port * 10 + (text[i] - '0');
        }
        if (port > 65535)
            return refuse(out, diag, rest + 1, "bad port");
    } else if (default_port < 0 || default_port > 65535) {
        return refuse(out, diag, len, "expected ADDR:PORT");
    }
    if (host_len >= sizeof host)
        return refuse(out, diag, host_at,
                      v6 ? "bad IPv6 address" : "expected a numeric IPv4 or [IPv6] address");
    memcpy(host, text + host_at, host_len);
    host[host_len] = '\0';
    if (v6) {
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET6, host, &s6.sin6_addr) != 1)
            return refuse(out, diag, host_at, "bad IPv6 address");
        memcpy(&out->ss, &s6, sizeof s6);
        out->len = sizeof s6;
    } else {
        struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        if (inet_pton(AF_INET, host, &s4.sin_addr) != 1)
            return refuse(out, diag, 0, "expected a numeric IPv4 or [IPv6] address");
        memcpy(&out->ss, &s4, sizeof s4);
        out->len = sizeof s4;
    }
    return PH_OK;
}

void ph_sockaddr_addr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    const void *a = NULL;
    struct sockaddr_in s4;
    struct sockaddr_in6 s6;
    if (sa->sa_family == AF_INET) {
        memcpy(&s4, sa, sizeof s4);
        a = &s4.sin_addr;
    } else if (sa->sa_family == AF_INET6) {
        memcpy(&s6, sa, sizeof s6);
        a = &s6.sin6_addr;
    }
    if (a == NULL || inet_ntop(sa->sa_family, a, buf, (socklen_t)cap) == NULL)
        snprintf(buf, cap, "%s", sa->sa_family == AF_UNIX ? "unix" : "?");
}

void ph_sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];
    ph_sockaddr_addr_text(sa, a, sizeof a);
    if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 s6;
        memcpy(&s6, sa, sizeof s6);
        snprintf(buf, cap, "[%s]:%u", a, ntohs(s6.sin6_port));
    } else if (sa->sa_family == AF_INET) {
        struct sockaddr_in s4;
        memcpy(&s4, sa, sizeof s4);
        snprintf(buf, cap, "%s:%u", a, ntohs(s4.sin_port));
    } else {
        snprintf(buf, cap, "%s", a);
    }
}
