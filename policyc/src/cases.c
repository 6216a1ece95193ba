/* cases.c - the strict parser of `policyc test` expectation files (cases.h). */
#include "cases.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/diag.h"
#include "pinhole/yaml_reader.h"

static const char *const case_keys[] = {"destination", "list", "expect", "reason"};
static const ph_yaml_schema case_schema = {"in a case", case_keys, 4, 0, NULL, NULL};
static const ph_yaml_schema cases_schema = {NULL, NULL, 0, 0, NULL, &case_schema};
static const char *const top_keys[] = {"cases"};
static const ph_yaml_schema *const top_values[] = {&cases_schema};
static const ph_yaml_schema top_schema = {"at the top level", top_keys, 1, 0, top_values, NULL};

__attribute__((format(printf, 3, 4)))
static ph_status fail_at(ph_diag *diag, ph_yaml_pos pos, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ph_diag_set(diag, PH_E_FORMAT, 0, "%u:%u: %s", (unsigned)pos.line, (unsigned)pos.col, msg);
}

/* The reader's refusal, as this file's messages say it. */
static ph_status reader_error(const ph_yaml_error *e, ph_diag *diag)
{
    switch (e->code) {
    case PH_YAML_E_SYNTAX:
    case PH_YAML_E_ENCODING:
        return fail_at(diag, e->pos, "%s", e->problem ? e->problem : "YAML syntax error");
    case PH_YAML_E_ALIAS: return fail_at(diag, e->pos, "aliases are not allowed");
    case PH_YAML_E_ANCHOR: return fail_at(diag, e->pos, "anchors are not allowed");
    case PH_YAML_E_TAG: return fail_at(diag, e->pos, "tags are not allowed");
    case PH_YAML_E_TAG_DIRECTIVE: return fail_at(diag, e->pos, "%%TAG directives are not allowed");
    case PH_YAML_E_VERSION_DIRECTIVE: return fail_at(diag, e->pos, "%%YAML directives are not allowed");
    case PH_YAML_E_MULTIPLE_DOCUMENTS: return fail_at(diag, e->pos, "only one YAML document is allowed");
    case PH_YAML_E_DUPLICATE_KEY: return fail_at(diag, e->pos, "duplicate key '%s'", e->text);
    case PH_YAML_E_KEY_NOT_SCALAR: return fail_at(diag, e->pos, "expected a key");
    case PH_YAML_E_UNKNOWN_KEY:
        return fail_at(diag, e->pos, e->schema == &case_schema
                                         ? "unknown key (expected destination, list, expect, reason): '%s'"
                                         : "unknown top-level key (expected cases): '%s'", e->text);
    case PH_YAML_E_TOO_DEEP:
        return fail_at(diag, e->pos, "nested more than %ld levels deep", e->value);
    default:
        return fail_at(diag, e->pos, "%s", ph_yaml_code_name(e->code));
    }
}

static ph_status set_field(const ph_yaml_node *v, char **field, const char *key, ph_diag *diag)
{
    if (v->kind != PH_YAML_SCALAR)
        return fail_at(diag, v->pos, "expected a string value");
    if (v->len == 0 || strlen(v->u.text) != v->len)
        return fail_at(diag, v->pos, "empty value or NUL byte for '%s'", key);
    *field = strdup(v->u.text);
    return *field ? PH_OK : ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
}

static ph_status parse_case(const ph_yaml_node *n, pc_case *c, ph_diag *diag)
{
    c->line = n->pos.line;
    c->col = n->pos.col;
    char *expect_s = NULL;
    ph_status st = PH_OK;
    for (uint32_t i = 0; st == PH_OK && i < n->len; i++) {
        const ph_yaml_pair *p = &n->u.pairs[i];
        char **field[] = {&c->destination, &c->list, &expect_s, &c->reason};
        long k = ph_yaml_schema_key(&case_schema, p->key.u.text, p->key.len);
        if (k >= 0)
            st = set_field(&p->value, field[k], case_keys[k], diag);
    }
    if (st == PH_OK && c->destination == NULL)
        st = fail_at(diag, n->pos, "case without 'destination'");
    if (st == PH_OK && expect_s == NULL)
        st = fail_at(diag, n->pos, "case without 'expect'");
    if (st == PH_OK && strcmp(expect_s, "allow") != 0 && strcmp(expect_s, "deny") != 0)
        st = fail_at(diag, n->pos, "expect must be allow or deny, not '%s'", expect_s);
    if (st == PH_OK)
        c->expect_allow = strcmp(expect_s, "allow") == 0;
    if (st == PH_OK && c->reason != NULL && c->expect_allow)
        st = fail_at(diag, n->pos, "reason only goes with expect: deny");
    if (st == PH_OK && c->list == NULL && (c->list = strdup("default")) == NULL)
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    free(expect_s);
    return st;
}

static ph_status parse_cases(const ph_yaml_node *n, pc_cases *out, ph_diag *diag)
{
    if (n->kind != PH_YAML_SEQUENCE)
        return fail_at(diag, n->pos, "'cases' must be a sequence of cases");
    if (n->len == 0)
        return fail_at(diag, n->pos, "no cases");
    if (n->len > PC_MAX_CASES)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "%u:%u: more than %u cases",
                           (unsigned)n->u.items[PC_MAX_CASES].pos.line,
                           (unsigned)n->u.items[PC_MAX_CASES].pos.col, PC_MAX_CASES);
    out->items = calloc(n->len, sizeof *out->items);
    if (out->items == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    for (uint32_t i = 0; i < n->len; i++) {
        const ph_yaml_node *item = &n->u.items[i];
        if (item->kind != PH_YAML_MAPPING)
            return fail_at(diag, item->pos, "each case must be a mapping");
        ph_status st = parse_case(item, &out->items[out->count++], diag);
        if (st != PH_OK)
            return st;
    }
    return PH_OK;
}

ph_status pc_cases_parse(const char *data, size_t len, pc_cases *out, ph_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (len > PC_MAX_CASES_FILE)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "cases file larger than %zu bytes",
                           PC_MAX_CASES_FILE);
    /* A case is a mapping of four pairs: nine nodes, and the sequence. */
    const ph_yaml_limits lim = {PC_MAX_CASES_FILE, 16, PC_MAX_CASES * 10 + 16, 1u << 16, 0};
    ph_yaml_doc *doc = NULL;
    ph_status st = ph_yaml_read(data, len, &lim, &top_schema, &doc);
    if (st == PH_E_NOMEM)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    const ph_yaml_node *root = ph_yaml_root(doc);
    if (st != PH_OK) {
        st = reader_error(ph_yaml_error_at(doc, 0), diag);
    } else if (root == NULL) {
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "1:1: empty file: expected cases:");
    } else if (root->kind != PH_YAML_MAPPING) {
        st = fail_at(diag, root->pos, "expected a mapping with cases:");
    } else {
        const ph_yaml_node *cases = ph_yaml_map_get(root, "cases");
        st = cases ? parse_cases(cases, out, diag) : fail_at(diag, root->pos, "missing key 'cases'");
    }
    ph_yaml_free(&doc);
    if (st != PH_OK)
        pc_cases_free(out);
    return st;
}

void pc_cases_free(pc_cases *cases)
{
    for (size_t i = 0; i < cases->count; i++) {
        free(cases->items[i].destination);
        free(cases->items[i].list);
        free(cases->items[i].reason);
    }
    free(cases->items);
    memset(cases, 0, sizeof *cases);
}
