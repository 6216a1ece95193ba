/*
 * rule_ports.c - one entry of a rule's `ports`: an integer 1..65535 written
 * as a plain YAML number, or a "LOW-HIGH" range. libyaml hands every scalar
 * over as an untyped string, so the type comes from the scalar's style: a
 * quoted "443" is a string in YAML and refused rather than silently coerced.
 */
#include <stdlib.h>
#include <string.h>

#include "load-int.h"
#include "pinhole/host.h"

typedef enum num_result { NUM_OK, NUM_SYNTAX, NUM_LEADING_ZERO, NUM_RANGE } num_result;

/* Parses s[0..n) as a decimal port: digits only, no sign, no leading zero. */
static num_result parse_number(const char *s, size_t n, uint16_t *out)
{
    if (n == 0)
        return NUM_SYNTAX;
    size_t i = 0;
    bool negative = false;
    if (s[0] == '-' || s[0] == '+') {
        negative = s[0] == '-';
        i = 1;
        if (n == 1)
            return NUM_SYNTAX;
    }
    for (size_t j = i; j < n; j++)
        if (!ph_is_digit((unsigned char)s[j]))
            return NUM_SYNTAX;
    if (negative)
        return NUM_RANGE;
    if (i == 1)
        return NUM_SYNTAX; /* "+443" */
    if (s[0] == '0' && n > 1)
        return NUM_LEADING_ZERO;
    if (n > 5)
        return NUM_RANGE;
    unsigned v = 0;
    for (size_t j = 0; j < n; j++)
        v = v * 10 + (unsigned)(s[j] - '0');
    if (v < 1 || v > 65535)
        return NUM_RANGE;
    *out = (uint16_t)v;
    return NUM_OK;
}

static bool report_number(pc_loader *L, const pc_scalar *s, num_result r, const char *shown)
{
    switch (r) {
    case NUM_LEADING_ZERO:
        pc_report(L, PC_E_PORT_LEADING_ZERO, s->pos, "write the number without leading zeros",
                  "port '%s' has a leading zero", shown);
        break;
    case NUM_RANGE:
        pc_report(L, PC_E_PORT_RANGE, s->pos, NULL, "port '%s' is outside 1..65535", shown);
        break;
    default:
        pc_report(L, PC_E_PORT_SYNTAX, s->pos,
                  "write a number (443) or a quoted range (\"8000-8010\")",
                  "invalid port '%s'", shown);
        break;
    }
    return false;
}

static bool is_allow_all(const pc_scalar *s)
{
    static const char *const words[] = {"*", "**", "any", "all", "ANY", "ALL", "Any", "All"};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        if (s->len == strlen(words[i]) && memcmp(s->value, words[i], s->len) == 0)
            return true;
    return false;
}

bool pc_parse_port(pc_loader *L, const pc_scalar *s, pc_port_range *out)
{
    char q[PC_QUOTE_MAX];
    if (is_allow_all(s)) {
        pc_report(L, PC_E_PORT_ALLOW_ALL, s->pos,
                  "list the ports you need, e.g. [443] or [\"8000-8010\"]",
                  "port '%s' would allow every port: ports are explicit", pc_quote_scalar(q, s));
        return false;
    }
    /* A range: exactly one '-' after the first character ("-5" is a number). */
    const char *dash = s->len > 1 ? memchr(s->value + 1, '-', s->len - 1) : NULL;
    if (dash) {
        size_t lo_len = (size_t)(dash - s->value);
        const char *hi_s = dash + 1;
        size_t hi_len = s->len - lo_len - 1;
        uint16_t lo = 0, hi = 0;
        num_result r = parse_number(s->value, lo_len, &lo);
        if (r == NUM_OK)
            r = parse_number(hi_s, hi_len, &hi);
        if (r != NUM_OK)
            return report_number(L, s, r, pc_quote_scalar(q, s));
        if (lo > hi) {
            char help[64];
            snprintf(help, sizeof help, "write \"%u-%u\"", hi, lo);
            pc_report(L, PC_E_PORT_REVERSED, s->pos, help,
                      "port range '%s' is reversed (%u > %u)", pc_quote_scalar(q, s), lo, hi);
            return false;
        }
        /* Every port is the open-port form, whatever it is written as. */
        if (lo == 1 && hi == 65535) {
            pc_report(L, PC_E_PORT_ALLOW_ALL, s->pos,
                      "list the ports you need, e.g. [443] or [\"8000-8010\"]",
                      "port range '%s' covers every port: ports are explicit",
                      pc_quote_scalar(q, s));
            return false;
        }
        if ((unsigned)(hi - lo) + 1 > PC_WIDE_PORT_RANGE)
            pc_report(L, PC_W_WIDE_PORT_RANGE, s->pos,
                      "narrow it to the ports the destination serves",
                      "port range '%s' spans %u ports (more than %u)", pc_quote_scalar(q, s),
                      (unsigned)(hi - lo) + 1, PC_WIDE_PORT_RANGE);
        out->lo = lo;
        out->hi = hi;
        return true;
    }
    uint16_t v = 0;
    num_result r = parse_number(s->value, s->len, &v);
    if (r != NUM_OK)
        return report_number(L, s, r, pc_quote_scalar(q, s));
    if (!s->plain) {
        char help[32];
        snprintf(help, sizeof help, "write %u without quotes", v);
        pc_report(L, PC_E_PORT_QUOTED, s->pos, help,
                  "port '%s' is quoted: a quoted number is a string in YAML", pc_quote_scalar(q, s));
        return false;
    }
    out->lo = out->hi = v;
    return true;
}

static int compare_ranges(const void *pa, const void *pb)
{
    const pc_port_range *a = pa, *b = pb;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    return (a->hi > b->hi) - (a->hi < b->hi);
}

pc_port_range *pc_ports_normalize(const pc_port_range *ports, size_t n, size_t *nout)
{
    pc_port_range *r = malloc((n ? n : 1) * sizeof *r);
    if (!r)
        return NULL;
    memcpy(r, ports, n * sizeof *r);
    qsort(r, n, sizeof *r, compare_ranges);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        /* Merge overlapping and adjacent ranges: [80-90, 91-95] is 80-95. */
        if (o > 0 && (uint32_t)r[i].lo <= (uint32_t)r[o - 1].hi + 1) {
            if (r[i].hi > r[o - 1].hi)
                r[o - 1].hi = r[i].hi;
        } else {
            r[o++] = r[i];
        }
    }
    *nout = o;
    return r;
}

bool pc_check_rule_ports_cover_all(pc_loader *L, const pc_port_range *ports, size_t n,
                                   pc_pos pos)
{
    uint32_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (uint32_t)(ports[i].hi - ports[i].lo) + 1;
    if (n < 2 || total < 65535)
        return true; /* fewer ports than there are: cannot cover them all */
    size_t m = 0;
    pc_port_range *merged = pc_ports_normalize(ports, n, &m);
    if (!merged) {
        L->nomem = true;
        return false;
    }
    bool all = m == 1 && merged[0].lo == 1 && merged[0].hi == 65535;
    if (all)
        pc_report(L, PC_E_PORT_ALLOW_ALL, pos,
                  "list the ports you need, e.g. [443] or [\"8000-8010\"]",
                  "these ports together cover every port: ports are explicit");
    free(merged);
    return !all;
}

static const char *format_range(char buf[static 16], pc_port_range r)
{
    if (r.lo == r.hi)
        snprintf(buf, 16, "%u", r.lo);
    else
        snprintf(buf, 16, "%u-%u", r.lo, r.hi);
    return buf;
}

typedef struct indexed_range {
    pc_port_range r;
    size_t index; /* position in the rule, to keep equal ranges in file order */
} indexed_range;

static int compare_indexed(const void *pa, const void *pb)
{
    const indexed_range *a = pa, *b = pb;
    int c = compare_ranges(&a->r, &b->r);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

void pc_check_rule_port_overlap(pc_loader *L, const pc_port_range *ports, const pc_pos *pos,
                                size_t n)
{
    if (n < 2)
        return;
    /* Sorted by range, each entry is compared with the widest reach of the
     * entries before it: O(n log n). */
    indexed_range *e = malloc(n * sizeof *e);
    if (!e) {
        L->nomem = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        e[i] = (indexed_range){ports[i], i};
    qsort(e, n, sizeof *e, compare_indexed);
    size_t reach = 0;
    for (size_t k = 1; k < n; k++) {
        if (e[k].r.lo <= e[reach].r.hi) {
            /* Warn at the entry written later in the file. */
            size_t later = e[k].index > e[reach].index ? e[k].index : e[reach].index;
            size_t earlier = e[k].index > e[reach].index ? e[reach].index : e[k].index;
            char a[16], b[16];
            pc_report(L, PC_W_PORT_OVERLAP, pos[later], "remove or merge the overlapping entries",
                      "port %s overlaps port %s (%u:%u) of the same rule",
                      format_range(a, ports[later]), format_range(b, ports[earlier]),
                      pos[earlier].line, pos[earlier].col);
        }
        if (e[k].r.hi > e[reach].r.hi)
            reach = k;
    }
    free(e);
}
