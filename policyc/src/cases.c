/* cases.c - the strict parser of `policyc test` expectation files (cases.h). */
#include "cases.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "pinhole/diag.h"

typedef struct parser {
    yaml_parser_t yp;
    yaml_event_t ev;
    bool have;
    ph_diag *diag;
    ph_status st;
} parser;

static bool fail_at(parser *p, const yaml_mark_t *m, const char *msg, const char *arg)
{
    if (p->st == PH_OK)
        p->st = ph_diag_set(p->diag, PH_E_FORMAT, m->index, "%zu:%zu: %s%s%s%s",
                            m->line + 1, m->column + 1, msg, arg ? " '" : "", arg ? arg : "",
                            arg ? "'" : "");
    return false;
}

/* The next event; refuses anchors, aliases and tags wherever they appear. */
static bool next(parser *p)
{
    if (p->have)
        yaml_event_delete(&p->ev);
    p->have = false;
    if (!yaml_parser_parse(&p->yp, &p->ev)) {
        yaml_mark_t m = p->yp.problem_mark;
        return fail_at(p, &m, p->yp.problem ? p->yp.problem : "YAML syntax error", NULL);
    }
    p->have = true;
    const yaml_event_t *e = &p->ev;
    if (e->type == YAML_ALIAS_EVENT)
        return fail_at(p, &e->start_mark, "aliases are not allowed", NULL);
    const yaml_char_t *anchor = NULL, *tag = NULL;
    if (e->type == YAML_SCALAR_EVENT)
        anchor = e->data.scalar.anchor, tag = e->data.scalar.tag;
    else if (e->type == YAML_SEQUENCE_START_EVENT)
        anchor = e->data.sequence_start.anchor, tag = e->data.sequence_start.tag;
    else if (e->type == YAML_MAPPING_START_EVENT)
        anchor = e->data.mapping_start.anchor, tag = e->data.mapping_start.tag;
    if (anchor != NULL)
        return fail_at(p, &e->start_mark, "anchors are not allowed", NULL);
    if (tag != NULL)
        return fail_at(p, &e->start_mark, "tags are not allowed", NULL);
    return true;
}

static bool expect(parser *p, yaml_event_type_t t, const char *what)
{
    if (!next(p))
        return false;
    if (p->ev.type != t)
        return fail_at(p, &p->ev.start_mark, what, NULL);
    return true;
}

static const char *scalar(const parser *p)
{
    return (const char *)p->ev.data.scalar.value;
}

static bool set_field(parser *p, char **field, const char *key)
{
    if (*field != NULL)
        return fail_at(p, &p->ev.start_mark, "duplicate key", key);
    if (!expect(p, YAML_SCALAR_EVENT, "expected a string value"))
        return false;
    if (p->ev.data.scalar.length == 0 || strlen(scalar(p)) != p->ev.data.scalar.length)
        return fail_at(p, &p->ev.start_mark, "empty value or NUL byte for", key);
    *field = strdup(scalar(p));
    if (*field == NULL) {
        p->st = ph_diag_set(p->diag, PH_E_NOMEM, 0, "out of memory");
        return false;
    }
    return true;
}

static bool parse_case(parser *p, pc_case *c)
{
    c->line = (uint32_t)p->ev.start_mark.line + 1;
    c->col = (uint32_t)p->ev.start_mark.column + 1;
    yaml_mark_t start = p->ev.start_mark;
    char *expect_s = NULL;
    bool ok = true;
    while (ok && next(p) && p->ev.type != YAML_MAPPING_END_EVENT) {
        if (p->ev.type != YAML_SCALAR_EVENT) {
            ok = fail_at(p, &p->ev.start_mark, "expected a key", NULL);
            break;
        }
        char key[32];
        snprintf(key, sizeof key, "%s", scalar(p));
        if (strcmp(key, "destination") == 0)
            ok = set_field(p, &c->destination, key);
        else if (strcmp(key, "list") == 0)
            ok = set_field(p, &c->list, key);
        else if (strcmp(key, "reason") == 0)
            ok = set_field(p, &c->reason, key);
        else if (strcmp(key, "expect") == 0)
            ok = set_field(p, &expect_s, key);
        else
            ok = fail_at(p, &p->ev.start_mark,
                         "unknown key (expected destination, list, expect, reason):", scalar(p));
    }
    if (p->st != PH_OK)
        ok = false;
    if (ok && c->destination == NULL)
        ok = fail_at(p, &start, "case without", "destination");
    if (ok && expect_s == NULL)
        ok = fail_at(p, &start, "case without", "expect");
    if (ok && strcmp(expect_s, "allow") != 0 && strcmp(expect_s, "deny") != 0)
        ok = fail_at(p, &start, "expect must be allow or deny, not", expect_s);
    if (ok)
        c->expect_allow = strcmp(expect_s, "allow") == 0;
    if (ok && c->reason != NULL && c->expect_allow)
        ok = fail_at(p, &start, "reason only goes with expect: deny", NULL);
    if (ok && c->list == NULL && (c->list = strdup("default")) == NULL) {
        p->st = ph_diag_set(p->diag, PH_E_NOMEM, 0, "out of memory");
        ok = false;
    }
    free(expect_s);
    return ok;
}

static bool parse_cases(parser *p, pc_cases *out)
{
    size_t cap = 0;
    if (!expect(p, YAML_SEQUENCE_START_EVENT, "'cases' must be a sequence of cases"))
        return false;
    yaml_mark_t start = p->ev.start_mark;
    while (next(p) && p->ev.type != YAML_SEQUENCE_END_EVENT) {
        if (p->ev.type != YAML_MAPPING_START_EVENT)
            return fail_at(p, &p->ev.start_mark, "each case must be a mapping", NULL);
        if (out->count == PC_MAX_CASES) {
            p->st = ph_diag_set(p->diag, PH_E_LIMIT, p->ev.start_mark.index,
                                "%zu:%zu: more than %u cases", p->ev.start_mark.line + 1,
                                p->ev.start_mark.column + 1, PC_MAX_CASES);
            return false;
        }
        if (out->count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            pc_case *n = realloc(out->items, ncap * sizeof *n);
            if (n == NULL) {
                p->st = ph_diag_set(p->diag, PH_E_NOMEM, 0, "out of memory");
                return false;
            }
            out->items = n;
            cap = ncap;
        }
        pc_case *c = &out->items[out->count++];
        memset(c, 0, sizeof *c);
        if (!parse_case(p, c))
            return false;
    }
    if (p->st != PH_OK)
        return false;
    if (out->count == 0)
        return fail_at(p, &start, "no cases", NULL);
    return true;
}

ph_status pc_cases_parse(const char *data, size_t len, pc_cases *out, ph_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (len > PC_MAX_CASES_FILE)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "cases file larger than %zu bytes",
                           PC_MAX_CASES_FILE);
    parser p = {.diag = diag, .st = PH_OK};
    if (!yaml_parser_initialize(&p.yp))
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    yaml_parser_set_input_string(&p.yp, (const unsigned char *)data, len);
    bool seen = false, ok = expect(&p, YAML_STREAM_START_EVENT, "expected a YAML stream") &&
                            expect(&p, YAML_DOCUMENT_START_EVENT, "empty file: expected cases:") &&
                            expect(&p, YAML_MAPPING_START_EVENT, "expected a mapping with cases:");
    while (ok && next(&p) && p.ev.type != YAML_MAPPING_END_EVENT) {
        if (p.ev.type != YAML_SCALAR_EVENT || strcmp(scalar(&p), "cases") != 0)
            ok = fail_at(&p, &p.ev.start_mark, "unknown top-level key (expected cases)", NULL);
        else if (seen)
            ok = fail_at(&p, &p.ev.start_mark, "duplicate key", "cases");
        else
            ok = seen = parse_cases(&p, out);
    }
    if (ok && p.st == PH_OK && !seen)
        ok = fail_at(&p, &p.ev.start_mark, "missing key", "cases");
    if (ok && p.st == PH_OK)
        ok = expect(&p, YAML_DOCUMENT_END_EVENT, "expected the end of the document") &&
             expect(&p, YAML_STREAM_END_EVENT, "only one YAML document is allowed");
    if (p.have)
        yaml_event_delete(&p.ev);
    yaml_parser_delete(&p.yp);
    if (!ok || p.st != PH_OK) {
        pc_cases_free(out);
        return p.st != PH_OK ? p.st : ph_diag_set(diag, PH_E_FORMAT, 0, "invalid cases file");
    }
    return PH_OK;
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
