/*
 * test_parse_load.c - the front end's API (load.h): what a loaded policy
 * holds (canonical hosts, ports as written, provenance), the flattening of
 * includes, the all-or-nothing contract, and every limit (reached cheaply
 * through pc_policy_load_buffer_limits).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load-int.h"
#include "test_support.h"

static pc_policy *load_ok(const char *text, const char *name)
{
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    ph_status st = pc_policy_load_buffer(text, strlen(text), name, &p, &d);
    if (st != PH_OK)
        pc_diagnostics_print(stderr, &d, PC_FORMAT_TEXT);
    assert_int_equal(st, PH_OK);
    assert_non_null(p);
    pc_diagnostics_free(&d);
    return p;
}

/* Loads text expecting failure; returns how many diagnostics have code. */
static size_t load_fail(const char *text, size_t len, const pc_load_limits *limits, pc_code code)
{
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = (pc_policy *)&d; /* must be overwritten with NULL */
    ph_status st = pc_policy_load_buffer_limits(text, len, "t.yaml",
                                                limits ? limits : &PC_LOAD_LIMITS_DEFAULT, &p, &d);
    assert_int_not_equal(st, PH_OK);
    assert_null(p);
    size_t n = 0;
    for (size_t i = 0; i < d.count; i++)
        n += d.items[i].code == code;
    if (n == 0)
        pc_diagnostics_print(stderr, &d, PC_FORMAT_TEXT);
    pc_diagnostics_free(&d);
    return n;
}

static const char example[] = "version: 1\n"
                              "lists:\n"
                              "  default:\n"
                              "    include: [common, extra]\n"
                              "    rules:\n"
                              "      - host: api.github.com\n"
                              "        ports: [443, \"8000-8010\"]\n"
                              "        reason: GitHub API\n"
                              "  common:\n"
                              "    include: [base]\n"
                              "    rules:\n"
                              "      - {host: \"*.example.com\", ports: [443], source: \"orig.yaml:77\"}\n"
                              "  extra:\n"
                              "    include: [base]\n"
                              "    rules:\n"
                              "      - {host: extra.example.net, ports: [22]}\n"
                              "  base:\n"
                              "    rules:\n"
                              "      - {host: base.example.org, ports: [80]}\n";

static void test_policy_holds_what_was_written(void **s)
{
    (void)s;
    pc_policy *p = load_ok(example, "conf/allow.yaml");
    assert_string_equal(p->file, "conf/allow.yaml");
    assert_int_equal(p->nlists, 4);
    const pc_list *l = &p->lists[0];
    assert_string_equal(l->name, "default");
    assert_int_equal(l->nincludes, 2);
    assert_string_equal(l->includes[1], "extra");
    assert_int_equal(l->include_pos[1].line, 4);
    assert_int_equal(l->include_pos[1].col, 23);
    const pc_rule *r = &l->rules[0];
    assert_string_equal(r->host, "api.github.com");
    assert_false(r->wildcard);
    assert_int_equal(r->nports, 2);
    assert_int_equal(r->ports[0].lo, 443);
    assert_int_equal(r->ports[0].hi, 443);
    assert_int_equal(r->ports[1].lo, 8000);
    assert_int_equal(r->ports[1].hi, 8010);
    assert_string_equal(r->reason, "GitHub API");
    assert_int_equal(r->pos.line, 6);
    assert_int_equal(r->pos.col, 9);
    /* Provenance: the display name's base name and the rule's own line... */
    assert_string_equal(r->source_file, "allow.yaml");
    assert_int_equal(r->source_line, 6);
    /* ...unless the rule carries `source:` (as `policyc dump` writes it). */
    const pc_rule *w = &p->lists[1].rules[0];
    assert_true(w->wildcard);
    assert_string_equal(w->host, "*.example.com");
    assert_null(w->reason);
    assert_string_equal(w->source_file, "orig.yaml");
    assert_int_equal(w->source_line, 77);
    assert_int_equal(w->pos.line, 12);
    pc_policy_free(&p);
    assert_null(p);
    pc_policy_free(&p); /* NULL-safe */
}

static void test_effective_rules_flatten_once_depth_first(void **s)
{
    (void)s;
    pc_policy *p = load_ok(example, "allow.yaml");
    const pc_rule **rules = NULL;
    size_t n = 0;
    assert_int_equal(pc_policy_effective_rules(p, 0, &rules, &n), PH_OK);
    /* default, then common, then base (via common), then extra; base once. */
    assert_int_equal(n, 4);
    assert_string_equal(rules[0]->host, "api.github.com");
    assert_string_equal(rules[1]->host, "*.example.com");
    assert_string_equal(rules[2]->host, "base.example.org");
    assert_string_equal(rules[3]->host, "extra.example.net");
    /* Pointers into the policy, provenance included. */
    assert_ptr_equal(rules[0], &p->lists[0].rules[0]);
    free(rules);
    assert_int_equal(pc_policy_effective_rules(p, 3, &rules, &n), PH_OK);
    assert_int_equal(n, 1);
    free(rules);
    assert_int_equal(pc_policy_effective_rules(p, 4, &rules, &n), PH_E_INVAL);
    assert_null(rules);
    assert_int_equal(pc_policy_find_list(p, "extra"), 2);
    assert_int_equal(pc_policy_find_list(p, "nope"), -1);
    pc_policy_free(&p);
}

static void test_buffer_need_not_be_nul_terminated(void **s)
{
    (void)s;
    /* The document ends before "garbage": only len bytes are read. */
    const char text[] = "version: 1\nlists: {d: {rules: [{host: a.example.com, ports: [1]}]}}\n:::garbage";
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    assert_int_equal(pc_policy_load_buffer(text, strlen(text) - 10, "t.yaml", &p, &d), PH_OK);
    pc_policy_free(&p);
    pc_diagnostics_free(&d);
}

static void test_every_error_reported_not_only_the_first(void **s)
{
    (void)s;
    const char text[] = "version: 1\nlists:\n  d:\n    rules:\n"
                        "      - {host: A.example.com, ports: [443]}\n"
                        "      - {host: b.example.com, ports: [\"443\"]}\n"
                        "      - {host: \"*.com\", ports: [443]}\n"
                        "      - {host: d.example.com, ports: [0]}\n";
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    assert_int_equal(pc_policy_load_buffer(text, strlen(text), "t.yaml", &p, &d), PH_E_FORMAT);
    assert_int_equal(d.errors, 4);
    assert_int_equal(d.items[0].line, 5);
    assert_int_equal(d.items[3].line, 8);
    pc_diagnostics_free(&d);
}

static void test_warnings_do_not_block_loading(void **s)
{
    (void)s;
    const char text[] = "version: 1\nlists:\n  d:\n    rules:\n"
                        "      - {host: a.example.com, ports: [443]}\n"
                        "      - {host: a.example.com, ports: [443]}\n";
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    assert_int_equal(pc_policy_load_buffer(text, strlen(text), "t.yaml", &p, &d), PH_OK);
    assert_non_null(p);
    assert_int_equal(d.warnings, 1);
    assert_int_equal(d.items[0].code, PC_W_DUPLICATE_RULE);
    pc_policy_free(&p);
    pc_diagnostics_free(&d);
}

static void test_unreadable_file_is_pc001(void **s)
{
    (void)s;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    assert_int_equal(pc_policy_load_file("/nonexistent/dir/allow.yaml", NULL, &p, &d), PH_E_IO);
    assert_null(p);
    assert_int_equal(d.count, 1);
    assert_int_equal(d.items[0].code, PC_E_READ);
    assert_string_equal(d.items[0].file, "/nonexistent/dir/allow.yaml");
    assert_int_equal(d.items[0].line, 0);
    /* A directory opens but cannot be read. */
    pc_diagnostics_free(&d);
    assert_int_equal(pc_policy_load_file(ph_test_source_path("tests"), "tests", &p, &d), PH_E_IO);
    assert_int_equal(d.items[0].code, PC_E_READ);
    pc_diagnostics_free(&d);
}

static void test_file_size_limit_is_pc002(void **s)
{
    (void)s;
    /* The size is checked before a byte is read, so a short buffer with a
     * claimed huge length is enough to exercise the limit. */
    static const char tiny[] = "version: 1\n";
    assert_int_equal(load_fail(tiny, PC_MAX_FILE_BYTES + 1, NULL, PC_E_FILE_TOO_LARGE), 1);
}

/* "version: 1" and n lists (lists_form) or one list of n rules. */
static char *generate(unsigned n, bool lists_form)
{
    size_t cap = 64 + (size_t)n * 96, o = 0;
    char *buf = malloc(cap);
    o += (size_t)snprintf(buf, cap, "version: 1\nlists:\n%s", lists_form ? "" : "  d:\n    rules:\n");
    for (unsigned i = 0; i < n; i++) {
        if (lists_form)
            o += (size_t)snprintf(buf + o, cap - o,
                                  "  l%u: {rules: [{host: h%u.example.com, ports: [443]}]}\n", i, i);
        else
            o += (size_t)snprintf(buf + o, cap - o, "      - {host: h%u.example.com, ports: [443]}\n", i);
    }
    return buf;
}

static void test_lists_limit_is_pc070(void **s)
{
    (void)s;
    pc_load_limits lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_lists = 3;
    char *text = generate(5, true);
    assert_int_equal(load_fail(text, strlen(text), &lim, PC_E_TOO_MANY_LISTS), 1);
    free(text);
}

static void test_rules_limit_is_pc071(void **s)
{
    (void)s;
    pc_load_limits lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_rules = 10;
    char *text = generate(12, false);
    assert_int_equal(load_fail(text, strlen(text), &lim, PC_E_TOO_MANY_RULES), 1);
    free(text);
}

static void test_ports_limit_is_pc072(void **s)
{
    (void)s;
    pc_load_limits lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_ports_per_rule = 4;
    const char text[] = "version: 1\nlists:\n  d:\n    rules:\n"
                        "      - {host: a.example.com, ports: [1, 2, 3, 4, 5, 6]}\n";
    assert_int_equal(load_fail(text, strlen(text), &lim, PC_E_TOO_MANY_PORTS), 1);
}

static void test_includes_limit_is_pc073(void **s)
{
    (void)s;
    pc_load_limits lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_includes_per_list = 2;
    const char text[] = "version: 1\nlists:\n"
                        "  d: {include: [a, b, c], rules: [{host: d.example.com, ports: [1]}]}\n"
                        "  a: {rules: [{host: a.example.com, ports: [1]}]}\n"
                        "  b: {rules: [{host: b.example.com, ports: [1]}]}\n"
                        "  c: {rules: [{host: c.example.com, ports: [1]}]}\n";
    assert_int_equal(load_fail(text, strlen(text), &lim, PC_E_TOO_MANY_INCLUDES), 1);
    /* and over the whole file */
    lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_includes = 2;
    assert_int_equal(load_fail(text, strlen(text), &lim, PC_E_TOO_MANY_INCLUDES), 1);
}

static void test_effective_rules_limit_is_pc074(void **s)
{
    (void)s;
    pc_load_limits lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_effective_rules = 5;
    /* 3 lists of 2 rules each would be 6 flattened rules; a includes b. */
    const char text[] = "version: 1\nlists:\n"
                        "  a: {include: [b], rules: [{host: a.example.com, ports: [1]}, {host: a2.example.com, ports: [1]}]}\n"
                        "  b: {rules: [{host: b.example.com, ports: [1]}, {host: b2.example.com, ports: [1]}]}\n";
    assert_int_equal(load_fail(text, strlen(text), &lim, PC_E_EFFECTIVE_TOO_LARGE), 1);
}

static void test_include_depth_limit_counts_edges(void **s)
{
    (void)s;
    pc_load_limits lim = PC_LOAD_LIMITS_DEFAULT;
    lim.max_include_depth = 2;
    const char ok[] = "version: 1\nlists:\n"
                      "  a: {include: [b], rules: [{host: a.example.com, ports: [1]}]}\n"
                      "  b: {include: [c], rules: [{host: b.example.com, ports: [1]}]}\n"
                      "  c: {rules: [{host: c.example.com, ports: [1]}]}\n";
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    assert_int_equal(pc_policy_load_buffer_limits(ok, strlen(ok), "t", &lim, &p, &d), PH_OK);
    pc_policy_free(&p);
    pc_diagnostics_free(&d);
    lim.max_include_depth = 1;
    assert_int_equal(load_fail(ok, strlen(ok), &lim, PC_E_INCLUDE_DEPTH), 1);
}

static void test_hostile_inputs_fail_cleanly(void **s)
{
    (void)s;
    /* Deep nesting, a billion-laughs shape, a tag directive, huge scalars. */
    size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    assert_int_equal(load_fail(deep, 2 * n, NULL, PC_E_TYPE), 1);
    /* and it stops early: libyaml is quadratic in flow nesting */
    assert_int_equal(load_fail(deep, 2 * n, NULL, PC_E_NESTING), 1);
    free(deep);
    const char laughs[] = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n";
    assert_true(load_fail(laughs, strlen(laughs), NULL, PC_E_ALIAS) >= 4);
    const char tagdir[] = "%TAG ! tag:example.com,2000:\n---\nversion: 1\n";
    assert_int_equal(load_fail(tagdir, strlen(tagdir), NULL, PC_E_TAG), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_holds_what_was_written),
        cmocka_unit_test(test_effective_rules_flatten_once_depth_first),
        cmocka_unit_test(test_buffer_need_not_be_nul_terminated),
        cmocka_unit_test(test_every_error_reported_not_only_the_first),
        cmocka_unit_test(test_warnings_do_not_block_loading),
        cmocka_unit_test(test_unreadable_file_is_pc001),
        cmocka_unit_test(test_file_size_limit_is_pc002),
        cmocka_unit_test(test_lists_limit_is_pc070),
        cmocka_unit_test(test_rules_limit_is_pc071),
        cmocka_unit_test(test_ports_limit_is_pc072),
        cmocka_unit_test(test_includes_limit_is_pc073),
        cmocka_unit_test(test_effective_rules_limit_is_pc074),
        cmocka_unit_test(test_include_depth_limit_counts_edges),
        cmocka_unit_test(test_hostile_inputs_fail_cleanly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
