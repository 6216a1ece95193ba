/*
 * cmd_diff.c - policyc diff OLD NEW: the destinations (host + ports, and
 * what a tunnel to them may carry) each list gains and loses, in a stable
 * order, for a pull-request comment. A port whose protocol changed is lost
 * with the old one and gained with the new.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "table_input.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc diff OLD NEW\n"
          "\n"
          "Show which destinations each list gains (+) and loses (-) from OLD to NEW.\n"
          "OLD and NEW are allowlists or compiled tables (any mix). Lists are compared\n"
          "after includes are resolved, so a change to an included list shows under\n"
          "every list that includes it. Output order is stable: lists by name, hosts\n"
          "by name (exact name before its wildcard), ports ascending. Ports whose rule\n"
          "says a protocol show it (\"(protocol tcp)\"); a port whose protocol changed\n"
          "is removed with the old one and added with the new.\n"
          "\n"
          "Options:\n"
          "  -h, --help  show this help\n"
          "\n"
          "Exit status: 0 no destination changed, 1 destinations changed,\n"
          "2 usage error or unreadable/invalid input.\n",
          out);
}

/* One destination's merged port ranges. */
typedef struct ports {
    uint16_t lo[PH_TABLE_MAX_RANGES], hi[PH_TABLE_MAX_RANGES];
    size_t n;
} ports;

typedef struct differ {
    const ph_table *old, *new_;
    ports *a, *b, *out;
    size_t added, removed;
    const char *list;
    bool list_printed;
} differ;

/* out = x - y over sorted disjoint inclusive ranges. */
static void subtract(const ports *x, const ports *y, ports *out)
{
    out->n = 0;
    size_t j = 0;
    for (size_t i = 0; i < x->n; i++) {
        uint32_t lo = x->lo[i], hi = x->hi[i];
        while (j < y->n && y->hi[j] < lo)
            j++;
        for (size_t k = j; k < y->n && y->lo[k] <= hi && lo <= hi; k++) {
            if (y->lo[k] > lo) {
                out->lo[out->n] = (uint16_t)lo;
                out->hi[out->n++] = (uint16_t)(y->lo[k] - 1);
            }
            lo = (uint32_t)y->hi[k] + 1;
        }
        if (lo <= hi) {
            out->lo[out->n] = (uint16_t)lo;
            out->hi[out->n++] = (uint16_t)hi;
        }
    }
}

static void print_change(differ *d, char sign, const char *host, ph_protocol proto,
                         const ports *p)
{
    if (p->n == 0)
        return;
    if (!d->list_printed) {
        printf("list %s:\n", d->list);
        d->list_printed = true;
    }
    printf("%c %s ", sign, host);
    for (size_t k = 0; k < p->n; k++) {
        if (p->lo[k] == p->hi[k])
            printf("%s%u", k ? ", " : "", p->lo[k]);
        else
            printf("%s%u-%u", k ? ", " : "", p->lo[k], p->hi[k]);
    }
    if (proto != PH_PROTOCOL_DEFAULT)
        printf(" (protocol %s)", ph_protocol_name(proto));
    putchar('\n');
    if (sign == '+')
        d->added++;
    else
        d->removed++;
}

static void load_ports(const ph_table *t, size_t list, size_t dst, ph_protocol proto, ports *p)
{
    ph_table_destination_protocol_ranges(t, list, dst, proto, p->lo, p->hi, PH_TABLE_MAX_RANGES,
                                         &p->n);
}

static const ph_protocol protocols[] = {PH_PROTOCOL_DEFAULT, PH_PROTOCOL_TLS, PH_PROTOCOL_HTTP,
                                        PH_PROTOCOL_TCP};
#define NPROTOCOLS (sizeof protocols / sizeof *protocols)

/* Entry order of the table: base name, then exact before wildcard. */
static int cmp_dest(const char *a, const char *b)
{
    bool wa = a[0] == '*', wb = b[0] == '*';
    int c = strcmp(a + (wa ? 2 : 0), b + (wb ? 2 : 0));
    return c != 0 ? c : (int)wa - (int)wb;
}

/* Walks both lists' destinations in order (li or lj may be SIZE_MAX: absent). */
static void diff_list(differ *d, size_t li, size_t lj)
{
    size_t na = li == SIZE_MAX ? 0 : ph_table_list_destination_count(d->old, li);
    size_t nb = lj == SIZE_MAX ? 0 : ph_table_list_destination_count(d->new_, lj);
    size_t i = 0, j = 0;
    char ha[256], hb[256];
    while (i < na || j < nb) {
        if (i < na)
            ph_table_destination_at(d->old, li, i, ha, NULL);
        if (j < nb)
            ph_table_destination_at(d->new_, lj, j, hb, NULL);
        int c = i == na ? 1 : j == nb ? -1 : cmp_dest(ha, hb);
        for (size_t k = 0; k < NPROTOCOLS; k++) {
            ph_protocol pr = protocols[k];
            d->a->n = d->b->n = 0;
            if (c <= 0)
                load_ports(d->old, li, i, pr, d->a);
            if (c >= 0)
                load_ports(d->new_, lj, j, pr, d->b);
            subtract(d->a, d->b, d->out);
            print_change(d, '-', ha, pr, d->out);
            subtract(d->b, d->a, d->out);
            print_change(d, '+', hb, pr, d->out);
        }
        i += c <= 0;
        j += c >= 0;
    }
}

static int run_diff(const ph_table *old, const ph_table *new_)
{
    differ d = {.old = old, .new_ = new_};
    d.a = malloc(sizeof *d.a);
    d.b = malloc(sizeof *d.b);
    d.out = malloc(sizeof *d.out);
    if (d.a == NULL || d.b == NULL || d.out == NULL) {
        free(d.a), free(d.b), free(d.out);
        fputs("policyc diff: out of memory\n", stderr);
        return 2;
    }
    printf("--- old policy id %s\n+++ new policy id %s\n", ph_table_policy_id_hex(old),
           ph_table_policy_id_hex(new_));
    size_t i = 0, j = 0, na = ph_table_list_count(old), nb = ph_table_list_count(new_);
    while (i < na || j < nb) {
        const char *a = NULL, *b = NULL;
        if (i < na)
            ph_table_list_at(old, i, &a, NULL, NULL);
        if (j < nb)
            ph_table_list_at(new_, j, &b, NULL, NULL);
        int c = a == NULL ? 1 : b == NULL ? -1 : strcmp(a, b);
        d.list = c <= 0 ? a : b;
        d.list_printed = false;
        if (c < 0)
            printf("list %s: removed\n", a), d.list_printed = true;
        else if (c > 0)
            printf("list %s: added\n", b), d.list_printed = true;
        diff_list(&d, c <= 0 ? i : SIZE_MAX, c >= 0 ? j : SIZE_MAX);
        i += c <= 0;
        j += c >= 0;
    }
    free(d.a), free(d.b), free(d.out);
    if (d.added == 0 && d.removed == 0) {
        puts(memcmp(ph_table_policy_id(old), ph_table_policy_id(new_), PH_TABLE_ID_LEN) == 0
                 ? "no destination changed"
                 : "no destination changed (reasons or list names differ)");
        return 0;
    }
    printf("%zu destination change(s) added, %zu removed\n", d.added, d.removed);
    return 1;
}

int pc_cmd_diff(int argc, char **argv)
{
    int first;
    int rc = pc_args_operands_only(argc, argv, 2, "OLD and NEW", usage, &first);
    if (rc >= 0)
        return rc;
    ph_table *old = NULL, *new_ = NULL;
    if (pc_open_table_input("diff", argv[first], &old, NULL) != 0 ||
        pc_open_table_input("diff", argv[first + 1], &new_, NULL) != 0) {
        ph_table_close(&old);
        return 2;
    }
    rc = run_diff(old, new_);
    ph_table_close(&old);
    ph_table_close(&new_);
    return rc;
}
