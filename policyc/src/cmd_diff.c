/*
 * cmd_diff.c - policyc diff OLD NEW: the destinations (host + ports) each
 * list gains and loses, in a stable order, for a pull-request comment.
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
          "by name (exact name before its wildcard), ports ascending.\n"
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

static void print_change(differ *d, char sign, const char *host, const ports *p)
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
    putchar('\n');
    if (sign == '+')
        d->added++;
    else
        d->removed++;
}

static void load_ports(const ph_table *t, size_t list, size_t dst, char *host, ports *p)
{
    size_t n = 0;
    ph_table_destination_at(t, list, dst, host, &n);
    ph_table_destination_ranges(t, list, dst, p->lo, p->hi, PH_TABLE_MAX_RANGES, &p->n);
}

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
        int c;
        if (i < na)
            load_ports(d->old, li, i, ha, d->a);
        if (j < nb)
            load_ports(d->new_, lj, j, hb, d->b);
        c = i == na ? 1 : j == nb ? -1 : cmp_dest(ha, hb);
        if (c < 0) {
            print_change(d, '-', ha, d->a);
            i++;
        } else if (c > 0) {
            print_change(d, '+', hb, d->b);
            j++;
        } else {
            subtract(d->a, d->b, d->out);
            print_change(d, '-', ha, d->out);
            subtract(d->b, d->a, d->out);
            print_change(d, '+', hb, d->out);
            i++, j++;
        }
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
