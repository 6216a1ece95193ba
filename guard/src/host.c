/* host.c - canonical host names and IP-literal detection (see pinhole/host.h). */
#include "pinhole/host.h"

#include <arpa/inet.h>
#include <string.h>

/* WHATWG's "ends in a number": the last label (ignoring one trailing dot) is
 * all decimal digits, or "0x"/"0X" followed by hex digits (possibly none). */
static bool last_label_is_number(const char *host, size_t len)
{
    if (len > 0 && host[len - 1] == '.')
        len--;
    size_t start = len;
    while (start > 0 && host[start - 1] != '.')
        start--;
    const char *l = host + start;
    size_t n = len - start;
    if (n == 0)
        return false;
    size_t i = 0;
    if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
        for (i = 2; i < n; i++)
            if (!ph_is_hex((unsigned char)l[i]))
                return false;
        return true;
    }
    for (i = 0; i < n; i++)
        if (!ph_is_digit((unsigned char)l[i]))
            return false;
    return true;
}

bool ph_host_is_ip_literal(const char *host, size_t len)
{
    if (memchr(host, ':', len) || memchr(host, '[', len) || memchr(host, ']', len))
        return true;
    if (last_label_is_number(host, len))
        return true;
    char buf[64];
    if (len < sizeof buf) {
        memcpy(buf, host, len);
        buf[len] = '\0';
        unsigned char addr[16];
        if (inet_pton(AF_INET, buf, addr) == 1 || inet_pton(AF_INET6, buf, addr) == 1)
            return true;
    }
    return false;
}

static ph_host_error fail(ph_host_error e, size_t at, size_t *where)
{
    if (where)
        *where = at;
    return e;
}

ph_host_error ph_host_check(const char *host, size_t len, size_t *where)
{
    if (len == 0)
        return fail(PH_HOST_EMPTY, 0, where);
    if (ph_host_is_ip_literal(host, len))
        return fail(PH_HOST_IP_LITERAL, 0, where);

    size_t labels = 0, label_start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || host[i] == '.') {
            size_t n = i - label_start;
            if (n == 0) {
                if (i == len && i > 0)
                    return fail(PH_HOST_TRAILING_DOT, i - 1, where);
                return fail(PH_HOST_EMPTY_LABEL, i, where);
            }
            if (n > PH_LABEL_MAX)
                return fail(PH_HOST_LABEL_TOO_LONG, label_start + PH_LABEL_MAX, where);
            if (host[label_start] == '-')
                return fail(PH_HOST_HYPHEN_EDGE, label_start, where);
            if (host[i - 1] == '-')
                return fail(PH_HOST_HYPHEN_EDGE, i - 1, where);
            labels++;
            label_start = i + 1;
            continue;
        }
        unsigned char c = (unsigned char)host[i];
        if (c >= 0x80)
            return fail(PH_HOST_NON_ASCII, i, where);
        if (ph_is_upper(c))
            return fail(PH_HOST_UPPERCASE, i, where);
        if (!ph_is_ldh(c))
            return fail(PH_HOST_BAD_CHAR, i, where);
    }
    if (len > PH_HOST_MAX)
        return fail(PH_HOST_TOO_LONG, PH_HOST_MAX, where);
    if (labels < 2)
        return fail(PH_HOST_SINGLE_LABEL, 0, where);
    return PH_HOST_OK;
}

const char *ph_host_error_string(ph_host_error e)
{
    switch (e) {
    case PH_HOST_OK: return "valid host name";
    case PH_HOST_EMPTY: return "empty host name";
    case PH_HOST_TOO_LONG: return "host name longer than 253 bytes";
    case PH_HOST_EMPTY_LABEL: return "empty label in host name";
    case PH_HOST_TRAILING_DOT: return "trailing dot in host name";
    case PH_HOST_LABEL_TOO_LONG: return "label longer than 63 bytes in host name";
    case PH_HOST_UPPERCASE: return "uppercase letter in host name";
    case PH_HOST_NON_ASCII: return "non-ASCII byte in host name";
    case PH_HOST_BAD_CHAR: return "character not allowed in host name (letters, digits and '-' only)";
    case PH_HOST_HYPHEN_EDGE: return "label starts or ends with '-'";
    case PH_HOST_SINGLE_LABEL: return "host name has a single label";
    case PH_HOST_IP_LITERAL: return "IP address literal";
    }
    return "unknown host error";
}
