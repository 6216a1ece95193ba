/* destination.c - parsing "host:port" and formatting ports (destination.h). */
#include "destination.h"

#include <stdio.h>
#include <string.h>

#include "pinhole/host.h"

bool pc_parse_destination(const char *s, char host[static PC_DEST_HOST_MAX], uint16_t *port,
                          const char **why)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s) {
        *why = "expected HOST:PORT";
        return false;
    }
    size_t hl = (size_t)(colon - s);
    if (hl >= PC_DEST_HOST_MAX) {
        *why = "host name too long";
        return false;
    }
    const char *p = colon + 1;
    size_t pl = strlen(p);
    for (size_t i = 0; i < pl; i++) {
        if (!ph_is_digit((unsigned char)p[i])) {
            *why = "port must be a decimal number 1..65535";
            return false;
        }
    }
    if (pl == 0) {
        *why = "port must be a decimal number 1..65535";
        return false;
    }
    if (p[0] == '0') {
        *why = pl == 1 ? "port 0 is not allowed" : "port has a leading zero";
        return false;
    }
    unsigned v = 0;
    for (size_t i = 0; i < pl && i < 6; i++)
        v = v * 10 + (unsigned)(p[i] - '0');
    if (pl > 5 || v > 65535) {
        *why = "port out of range (1..65535)";
        return false;
    }
    memcpy(host, s, hl);
    host[hl] = '\0';
    *port = (uint16_t)v;
    return true;
}

void pc_format_rule_ports(const ph_table *t, size_t rule, char *buf, size_t cap)
{
    size_t at = 0;
    uint16_t lo, hi;
    buf[0] = '\0';
    for (size_t k = 0; ph_table_rule_port(t, rule, k, &lo, &hi) == PH_OK && at < cap; k++) {
        int n = lo == hi ? snprintf(buf + at, cap - at, "%s%u", k ? ", " : "", lo)
                         : snprintf(buf + at, cap - at, "%s%u-%u", k ? ", " : "", lo, hi);
        if (n < 0)
            break;
        at += (size_t)n;
    }
}

ph_status pc_explain_destination(const ph_table *t, const char *list, const char *host,
                                 uint16_t port, ph_table_explanation *out)
{
    size_t len = strlen(host);
    ph_status st = ph_table_explain(t, list, host, len, port, out);
    if (st == PH_E_INVAL && ph_host_is_ip_literal(host, len))
        out->result.reason = PH_REASON_IP_LITERAL;
    return st == PH_E_INVAL ? PH_OK : st;
}
