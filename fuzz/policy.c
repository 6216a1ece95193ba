/*
 * fuzz/policy.c - the allowlist front end (policyc/src/load.h): bytes in,
 * pc_policy_load_buffer must neither crash nor hang, and its answer must be
 * consistent. Invariants:
 *   - all or nothing: PH_OK exactly when there is no error, and then a
 *     policy; otherwise no policy and at least one error (or out of memory);
 *   - diagnostics are in the fixed order (file, line, col, code), positioned
 *     (line 0 only for whole-file ones, columns >= 1) and printable in every
 *     format;
 *   - a loaded policy is canonical: every host passes ph_host_check (a
 *     wildcard's base too), every port range is 1 <= lo <= hi, no list is
 *     empty, provenance is a base name and a line >= 1;
 *   - no loaded rule names a wildcard-DNS service or covers every port;
 *   - every rule is re-findable: each list's effective rules contain each of
 *     its own rules, by pointer and by (host, port).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dump.h"
#include "load-int.h"
#include "load.h"
#include "pinhole/host.h"
#include "pinhole/table.h"
#include "wildcard_dns-int.h"

#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

static FILE *sink(void)
{
    static FILE *devnull;
    if (!devnull)
        devnull = fopen("/dev/null", "w");
    return devnull;
}

static void check_diagnostics(const pc_diagnostics *d)
{
    for (size_t i = 0; i < d->count; i++) {
        const pc_diagnostic *x = &d->items[i];
        CHECK(pc_code_lookup(x->code) != NULL);
        CHECK(x->message && x->message[0]);
        CHECK(x->line == 0 ? x->col == 0 : x->col >= 1);
        if (i > 0) {
            const pc_diagnostic *p = &d->items[i - 1];
            CHECK(p->line < x->line || (p->line == x->line && p->col < x->col) ||
                  (p->line == x->line && p->col == x->col && p->code <= x->code));
        }
    }
    FILE *out = sink();
    if (out)
        for (int f = PC_FORMAT_TEXT; f <= PC_FORMAT_GITHUB; f++)
            pc_diagnostics_print(out, d, (pc_diag_format)f);
}

static void check_rule(const pc_rule *r)
{
    const char *name = r->host;
    if (r->wildcard) {
        CHECK(name[0] == '*' && name[1] == '.');
        name += 2;
        CHECK(strlen(name) + 2 <= PH_HOST_MAX); /* it can match some name */
    }
    CHECK(ph_host_check(name, strlen(name), NULL) == PH_HOST_OK);
    CHECK(ph_wildcard_dns_find(name, strlen(name)) == NULL);
    CHECK(r->nports >= 1);
    uint32_t total = 0;
    for (size_t k = 0; k < r->nports; k++) {
        CHECK(r->ports[k].lo >= 1 && r->ports[k].lo <= r->ports[k].hi);
        total += (uint32_t)(r->ports[k].hi - r->ports[k].lo) + 1;
    }
    if (total >= 65535) {
        size_t m = 0;
        pc_port_range *merged = pc_ports_normalize(r->ports, r->nports, &m);
        CHECK(merged != NULL);
        CHECK(!(m == 1 && merged[0].lo == 1 && merged[0].hi == 65535));
        free(merged);
    }
    CHECK(r->source_file && r->source_file[0] && !strchr(r->source_file, '/'));
    CHECK(r->source_line >= 1);
}

static bool refind(const pc_rule **eff, size_t n, const pc_rule *r)
{
    bool by_pointer = false, by_value = false;
    for (size_t i = 0; i < n; i++) {
        by_pointer |= eff[i] == r;
        by_value |= strcmp(eff[i]->host, r->host) == 0 && eff[i]->nports >= 1 &&
                    eff[i]->ports[0].lo == r->ports[0].lo;
    }
    return by_pointer && by_value;
}

/* The table helper (owned by the table part): compiles p twice (identical
 * bytes), opens the table, checks that every effective rule answers "allowed"
 * on the first and last port of each of its ranges (an exact host as is, a
 * wildcard as "x." + base; the rule that answers is one for that very name),
 * and that compile(dump(T)) == T. */
static void check_table(const pc_policy *p)
{
    uint8_t *image = NULL, *again = NULL;
    size_t len = 0, len2 = 0;
    CHECK(pc_compile(p, &image, &len, NULL) == PH_OK);
    CHECK(pc_compile(p, &again, &len2, NULL) == PH_OK);
    CHECK(len == len2 && memcmp(image, again, len) == 0);
    free(again);
    ph_table *t = NULL;
    CHECK(ph_table_open_buffer(image, len, &t, NULL) == PH_OK);
    for (size_t l = 0; l < p->nlists; l++) {
        const pc_rule **eff = NULL;
        size_t n = 0;
        CHECK(pc_policy_effective_rules(p, l, &eff, &n) == PH_OK);
        for (size_t i = 0; i < n; i++) {
            const pc_rule *r = eff[i];
            char q[300];
            int ql = snprintf(q, sizeof q, "%s%s", r->wildcard ? "x." : "",
                              r->wildcard ? r->host + 2 : r->host);
            if (ql <= 0 || ql > 253)
                continue; /* "x." + a 252-byte base is not a name */
            for (size_t k = 0; k < r->nports; k++) {
                uint16_t ports[2] = {r->ports[k].lo, r->ports[k].hi};
                for (int e = 0; e < 2; e++) {
                    ph_table_result res;
                    CHECK(ph_table_lookup(t, p->lists[l].name, q, (size_t)ql, ports[e], &res) ==
                          PH_OK);
                    CHECK(res.allowed && res.has_rule);
                    CHECK(strcmp(res.rule.host, r->host) == 0 ||
                          (r->wildcard && strcmp(res.rule.host, q) == 0));
                    CHECK(strcmp(res.rule.list, p->lists[l].name) == 0);
                }
            }
        }
        free(eff);
    }
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    CHECK(f != NULL && pc_dump_table(f, t) == 0);
    fclose(f);
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *back = NULL;
    CHECK(pc_policy_load_buffer(text, tlen, "dump.yaml", &back, &d) == PH_OK);
    CHECK(pc_compile(back, &again, &len2, NULL) == PH_OK);
    CHECK(len == len2 && memcmp(image, again, len) == 0);
    pc_policy_free(&back);
    pc_diagnostics_free(&d);
    free(text);
    free(again);
    free(image);
    ph_table_close(&t);
}

static void check_policy(const pc_policy *p)
{
    CHECK(p->nlists >= 1);
    for (size_t l = 0; l < p->nlists; l++) {
        const pc_list *list = &p->lists[l];
        CHECK(list->nrules >= 1);
        const pc_rule **eff = NULL;
        size_t n = 0;
        CHECK(pc_policy_effective_rules(p, l, &eff, &n) == PH_OK);
        CHECK(n >= list->nrules);
        for (size_t r = 0; r < list->nrules; r++) {
            check_rule(&list->rules[r]);
            CHECK(refind(eff, n, &list->rules[r]));
        }
        free(eff);
    }
    /* ---- TABLE HELPER: extend here ------------------------------------ */
    check_table(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    ph_status st = pc_policy_load_buffer((const char *)data, size, "fuzz.yaml", &p, &d);
    if (st == PH_OK) {
        CHECK(p != NULL && d.errors == 0);
        check_policy(p);
    } else {
        CHECK(p == NULL);
        CHECK(st == PH_E_NOMEM || d.errors > 0);
    }
    check_diagnostics(&d);
    pc_policy_free(&p);
    pc_diagnostics_free(&d);
    return 0;
}
