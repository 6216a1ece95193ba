/*
 * parse.c - allowlist YAML to pc_policy, driven by libyaml's event API.
 *
 * The grammar: which keys each mapping has, which are required, and what
 * type each value is. Anchors, tags, aliases, unknown and duplicate keys are
 * refused by the walker (yaml_walk.h). A structural error is reported and the
 * offending node skipped, so one run reports every error. Only a libyaml
 * error (the YAML itself is broken) stops the walk.
 *
 * Events, not libyaml's document API: a million-rule file never exists as a
 * node tree, and anchors/aliases/tags stay visible.
 */
#include <stdlib.h>
#include <string.h>

#include "pinhole/host.h"
#include "yaml_walk.h"

/* ------------------------------------------------------------------ */
/* Strings                                                             */

static bool string_ok(pc_loader *L, const pc_scalar *s, const char *what)
{
    if (s->len == 0 || pc_scalar_is_null(s)) {
        pc_report(L, PC_E_STRING, s->pos, "remove the key or give it a value", "%s is empty", what);
        return false;
    }
    if (s->len > PC_MAX_STRING) {
        pc_report(L, PC_E_STRING, s->pos, NULL, "%s is %zu bytes long (limit %u)", what, s->len,
                  PC_MAX_STRING);
        return false;
    }
    const unsigned char *p = (const unsigned char *)s->value;
    for (size_t i = 0; i < s->len;) {
        /* C0 and DEL would forge lines in logs and terminals; the hidden
         * characters (C1, LS, PS, bidi controls, zero-width) would forge or
         * reorder what explain and the logs show. */
        uint32_t cp;
        size_t n = ph_utf8_decode(p + i, s->len - i, &cp);
        if (p[i] < 0x20 || p[i] == 0x7F) {
            pc_report(L, PC_E_STRING, s->pos, "write it on one line without escapes",
                      "%s contains a control character", what);
            return false;
        }
        if (n > 1 && pc_code_point_hidden(cp)) {
            pc_report(L, PC_E_STRING, s->pos, "write it on one line with visible characters only",
                      "%s contains an invisible or bidirectional control character (U+%04X)",
                      what, (unsigned)cp);
            return false;
        }
        i += n;
    }
    return true;
}

static char *dup_n(pc_loader *L, const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (!c) {
        L->nomem = true;
        return NULL;
    }
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* `source: "file:line"`: provenance written by `policyc dump`. */
static bool parse_source(pc_loader *L, const pc_scalar *s, pc_rule *r)
{
    if (!string_ok(L, s, "source"))
        return false;
    const char *colon = NULL;
    for (size_t i = s->len; i > 0; i--)
        if (s->value[i - 1] == ':') {
            colon = s->value + i - 1;
            break;
        }
    const char *help = "write source: \"FILE:LINE\", e.g. \"allowlist.yaml:12\"";
    if (!colon || colon == s->value) {
        pc_report(L, PC_E_SOURCE, s->pos, help, "source must be FILE:LINE");
        return false;
    }
    size_t flen = (size_t)(colon - s->value);
    if (memchr(s->value, '/', flen) || (flen == 1 && s->value[0] == '.') ||
        (flen == 2 && memcmp(s->value, "..", 2) == 0)) {
        pc_report(L, PC_E_SOURCE, s->pos, help, "source file must be a base name, not a path");
        return false;
    }
    const char *d = colon + 1;
    size_t dlen = s->len - flen - 1;
    uint64_t line = 0;
    bool ok = dlen > 0 && dlen <= 10 && d[0] != '0';
    for (size_t i = 0; ok && i < dlen; i++) {
        if (!ph_is_digit((unsigned char)d[i]))
            ok = false;
        else
            line = line * 10 + (uint64_t)(d[i] - '0');
    }
    if (!ok || line == 0 || line > UINT32_MAX) {
        pc_report(L, PC_E_SOURCE, s->pos, help, "source line must be a number from 1 to %u",
                  UINT32_MAX);
        return false;
    }
    r->source_file = dup_n(L, s->value, flen);
    r->source_line = (uint32_t)line;
    return r->source_file != NULL;
}

/* ------------------------------------------------------------------ */
/* Rules                                                               */

enum { RK_HOST, RK_PORTS, RK_REASON, RK_SOURCE };
static const char *const rule_keys[] = {"host", "ports", "reason", "source"};

typedef struct rule_ctx {
    pc_rule rule;
    bool failed;
    bool ports_limit_reported;
} rule_ctx;

static bool parse_ports(pc_walker *w, rule_ctx *rc)
{
    pc_loader *L = w->L;
    if (w->ev.type == YAML_SCALAR_EVENT) {
        pc_scalar s = pc_scalar_of(w);
        rc->failed = true;
        if (pc_scalar_is_null(&s))
            pc_report(L, PC_E_PORTS_EMPTY, s.pos, "list the ports, e.g. ports: [443]",
                      "ports is empty: there is no default port");
        else
            pc_report(L, PC_E_TYPE, s.pos, "write ports as a sequence, e.g. ports: [443]",
                      "ports must be a sequence, not a string");
        return true;
    }
    if (w->ev.type != YAML_SEQUENCE_START_EVENT) {
        rc->failed = true;
        return pc_walk_wrong_type(w, "ports", "a sequence", "write ports as a sequence, e.g. ports: [443]");
    }
    pc_pos seq_pos = pc_ev_pos(w);
    size_t cap = 0;
    for (;;) {
        if (!pc_walk_next(w))
            return false;
        if (w->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        if (w->ev.type != YAML_SCALAR_EVENT) {
            rc->failed = true;
            if (!pc_walk_wrong_type(w, "a port", "a number or a \"LOW-HIGH\" range", NULL))
                return false;
            continue;
        }
        pc_scalar s = pc_scalar_of(w);
        pc_port_range pr;
        if (!pc_parse_port(L, &s, &pr) || !pc_scalar_require_literal(L, &s, "a port")) {
            rc->failed = true;
            continue;
        }
        if (rc->rule.nports >= L->limits.max_ports_per_rule) {
            if (!rc->ports_limit_reported)
                pc_report(L, PC_E_TOO_MANY_PORTS, s.pos, "use \"LOW-HIGH\" ranges",
                          "more than %u ports in one rule", L->limits.max_ports_per_rule);
            rc->ports_limit_reported = true;
            rc->failed = true;
            continue;
        }
        if (rc->rule.nports == cap) {
            cap = cap ? cap * 2 : 2;
            pc_port_range *np = realloc(rc->rule.ports, cap * sizeof *np);
            if (np)
                rc->rule.ports = np;
            /* Positions are only needed until the overlap check below: one
             * scratch array serves every rule (no malloc per rule). */
            pc_pos *npos = np && cap > L->port_pos_cap
                               ? realloc(L->port_pos, cap * sizeof *npos) : L->port_pos;
            if (npos && cap > L->port_pos_cap) {
                L->port_pos = npos;
                L->port_pos_cap = cap;
            }
            if (!np || !npos) {
                L->nomem = true;
                rc->failed = true;
                return false;
            }
        }
        L->port_pos[rc->rule.nports] = s.pos;
        rc->rule.ports[rc->rule.nports++] = pr;
    }
    if (rc->rule.nports == 0 && !rc->failed) {
        pc_report(L, PC_E_PORTS_EMPTY, seq_pos, "list the ports, e.g. ports: [443]",
                  "ports is empty: there is no default port");
        rc->failed = true;
    }
    if (!pc_check_rule_ports_cover_all(L, rc->rule.ports, rc->rule.nports, seq_pos))
        rc->failed = true;
    pc_check_rule_port_overlap(L, rc->rule.ports, L->port_pos, rc->rule.nports);
    return true;
}

static bool on_rule_value(pc_walker *w, void *ctx, int key, pc_pos key_pos)
{
    rule_ctx *rc = ctx;
    pc_loader *L = w->L;
    (void)key_pos;
    if (key == RK_PORTS)
        return parse_ports(w, rc);
    if (w->ev.type != YAML_SCALAR_EVENT) {
        rc->failed = true;
        return pc_walk_wrong_type(w, rule_keys[key], "a string", NULL);
    }
    pc_scalar s = pc_scalar_of(w);
    switch (key) {
    case RK_HOST:
        /* An invalid host gets its own, more precise, error first. */
        if (!pc_check_host(L, &s, &rc->rule.host, &rc->rule.wildcard) ||
            !pc_scalar_require_literal(L, &s, "a host"))
            rc->failed = true;
        break;
    case RK_REASON: {
        /* `reason: 42` or `reason: yes` is a number or a boolean to every
         * other YAML reader; the text must be quoted to be text. Null is
         * left to string_ok ("reason is empty"). */
        const char *type = pc_scalar_yaml_type(&s);
        char q[PC_QUOTE_MAX], help[PC_QUOTE_MAX + 32];
        if (type && strcmp(type, "null") != 0) {
            snprintf(help, sizeof help, "quote it: reason: \"%s\"", pc_quote_scalar(q, &s));
            pc_report(L, PC_E_TYPE, s.pos, help, "reason must be a string, not %s", type);
            rc->failed = true;
        } else if (!string_ok(L, &s, "reason") || !(rc->rule.reason = dup_n(L, s.value, s.len))) {
            rc->failed = true;
        }
        break;
    }
    case RK_SOURCE:
        if (!parse_source(L, &s, &rc->rule))
            rc->failed = true;
        break;
    default:
        break;
    }
    return true;
}

static void rule_clear(pc_rule *r)
{
    free(r->host);
    free(r->ports);
    free(r->reason);
    free(r->source_file);
    memset(r, 0, sizeof *r);
}

static bool parse_rule(pc_walker *w, pc_list *list, size_t *rules_cap)
{
    pc_loader *L = w->L;
    if (w->ev.type != YAML_MAPPING_START_EVENT)
        return pc_walk_wrong_type(w, "a rule", "a mapping with host and ports",
                          "write a rule as {host: api.example.com, ports: [443]}");
    rule_ctx rc = {0};
    rc.rule.pos = pc_ev_pos(w);
    pc_key_set ks = {rule_keys, 4, "in a rule", {{0}}, 0, 0};
    bool empty;
    bool ok = pc_walk_mapping(w, &ks, on_rule_value, &rc, &empty);
    if (ok && pc_key_missing(&ks, RK_HOST)) {
        pc_report(L, PC_E_HOST_EMPTY, rc.rule.pos, "add host: NAME (one exact name or *.domain)",
                  "rule has no host: every rule names its destination");
        rc.failed = true;
    }
    if (ok && pc_key_missing(&ks, RK_PORTS)) {
        pc_report(L, PC_E_PORTS_MISSING, rc.rule.pos, "add ports: [443] (the ports you need)",
                  "rule has no ports: there is no default port");
        rc.failed = true;
    }
    /* A misspelt required key was reported as unknown (PC011) without a
     * "missing" error; the rule is still incomplete and must not be kept. */
    if (!rc.rule.host || rc.rule.nports == 0)
        rc.failed = true;
    if (ok && !rc.failed && L->total_rules >= L->limits.max_rules) {
        if (!L->rules_limit_reported)
            pc_report(L, PC_E_TOO_MANY_RULES, rc.rule.pos, "split the policy",
                      "more than %u rules", L->limits.max_rules);
        L->rules_limit_reported = true;
        rc.failed = true;
    }
    if (!ok || rc.failed) {
        rule_clear(&rc.rule);
        return ok;
    }
    if (!rc.rule.source_file) {
        rc.rule.source_file = dup_n(L, L->base_name, strlen(L->base_name));
        rc.rule.source_line = rc.rule.pos.line;
    }
    if (list->nrules == *rules_cap) {
        size_t ncap = *rules_cap ? *rules_cap * 2 : 8;
        pc_rule *nr = realloc(list->rules, ncap * sizeof *nr);
        if (!nr) {
            L->nomem = true;
            rule_clear(&rc.rule);
            return false;
        }
        list->rules = nr;
        *rules_cap = ncap;
    }
    list->rules[list->nrules++] = rc.rule;
    L->total_rules++;
    return !L->nomem;
}

/* ------------------------------------------------------------------ */
/* Lists                                                               */

enum { LK_RULES, LK_INCLUDE };
static const char *const list_keys[] = {"rules", "include"};

typedef struct list_ctx {
    size_t index; /* into L->policy->lists */
} list_ctx;

static bool parse_rules(pc_walker *w, pc_list *list)
{
    if (w->ev.type != YAML_SEQUENCE_START_EVENT) {
        pc_scalar s = w->ev.type == YAML_SCALAR_EVENT ? pc_scalar_of(w) : (pc_scalar){0};
        if (w->ev.type == YAML_SCALAR_EVENT && pc_scalar_is_null(&s)) {
            pc_report(w->L, PC_E_EMPTY, pc_ev_pos(w), "add at least one rule",
                      "rules of list '%s' is empty", list->name);
            return true;
        }
        return pc_walk_wrong_type(w, "rules", "a sequence of rules", NULL);
    }
    pc_pos pos = pc_ev_pos(w);
    size_t cap = 0;
    bool any = false;
    for (;;) {
        if (!pc_walk_next(w))
            return false;
        if (w->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        any = true;
        if (!parse_rule(w, list, &cap))
            return false;
    }
    if (!any)
        pc_report(w->L, PC_E_EMPTY, pos, "add at least one rule", "rules of list '%s' is empty",
                  list->name);
    return true;
}

/* A plain list name that YAML types as something else (`null`, `on`, `1`)
 * is another key, or no key, to every other YAML reader of the file. */
static bool list_name_untyped(pc_loader *L, const pc_scalar *s)
{
    const char *type = pc_scalar_yaml_type(s);
    if (!type)
        return true;
    char q[PC_QUOTE_MAX], help[PC_QUOTE_MAX + 48];
    pc_quote_scalar(q, s);
    snprintf(help, sizeof help, "quote it (\"%s\") or choose another name", q);
    pc_report(L, PC_E_LIST_NAME, s->pos, help, "list name '%s' is %s in YAML, not a string", q,
              type);
    return false;
}

static bool parse_include(pc_walker *w, pc_list *list)
{
    pc_loader *L = w->L;
    if (w->ev.type != YAML_SEQUENCE_START_EVENT) {
        pc_scalar s = w->ev.type == YAML_SCALAR_EVENT ? pc_scalar_of(w) : (pc_scalar){0};
        if (w->ev.type == YAML_SCALAR_EVENT && pc_scalar_is_null(&s)) {
            pc_report(L, PC_E_EMPTY, s.pos, "remove include or name a list", "include is empty");
            return true;
        }
        return pc_walk_wrong_type(w, "include", "a sequence of list names", "write include: [common]");
    }
    pc_pos pos = pc_ev_pos(w);
    size_t cap = 0;
    bool any = false, limit_reported = false;
    for (;;) {
        if (!pc_walk_next(w))
            return false;
        if (w->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        any = true;
        if (w->ev.type != YAML_SCALAR_EVENT) {
            if (!pc_walk_wrong_type(w, "an included list", "a list name", NULL))
                return false;
            continue;
        }
        pc_scalar s = pc_scalar_of(w);
        char q[PC_QUOTE_MAX];
        if (!pc_list_name_valid(s.value, s.len)) {
            pc_report(L, PC_E_LIST_NAME, s.pos,
                      "list names are 1 to 64 of a-z 0-9 _ -, starting with a letter or digit",
                      "invalid list name '%s' in include", pc_quote(q, sizeof q, s.value, s.len));
            continue;
        }
        if (!pc_scalar_require_literal(L, &s, "a list name") || !list_name_untyped(L, &s))
            continue;
        if (L->total_includes >= L->limits.max_includes) {
            if (!L->includes_limit_reported)
                pc_report(L, PC_E_TOO_MANY_INCLUDES, s.pos, "use fewer, larger lists",
                          "more than %u includes in the file", L->limits.max_includes);
            L->includes_limit_reported = true;
            continue;
        }
        if (list->nincludes >= L->limits.max_includes_per_list) {
            if (!limit_reported)
                pc_report(L, PC_E_TOO_MANY_INCLUDES, s.pos, NULL,
                          "more than %u includes in list '%s'", L->limits.max_includes_per_list, list->name);
            limit_reported = true;
            continue;
        }
        if (list->nincludes == cap) {
            cap = cap ? cap * 2 : 4;
            char **ni = realloc(list->includes, cap * sizeof *ni);
            if (ni)
                list->includes = ni;
            pc_pos *np = ni ? realloc(list->include_pos, cap * sizeof *np) : NULL;
            if (np)
                list->include_pos = np;
            if (!ni || !np) {
                L->nomem = true;
                return false;
            }
        }
        char *name = dup_n(L, s.value, s.len);
        if (!name)
            return false;
        list->include_pos[list->nincludes] = s.pos;
        list->includes[list->nincludes++] = name;
        L->total_includes++;
    }
    if (!any)
        pc_report(L, PC_E_EMPTY, pos, "remove include or name a list", "include is empty");
    return true;
}

static bool on_list_value(pc_walker *w, void *ctx, int key, pc_pos key_pos)
{
    list_ctx *lc = ctx;
    (void)key_pos;
    pc_list *list = &w->L->policy->lists[lc->index];
    return key == LK_RULES ? parse_rules(w, list) : parse_include(w, list);
}

static bool add_list(pc_loader *L, const pc_scalar *name, size_t *index)
{
    pc_policy *p = L->policy;
    if (p->nlists == L->lists_cap) {
        size_t ncap = L->lists_cap ? L->lists_cap * 2 : 4;
        pc_list *nl = realloc(p->lists, ncap * sizeof *nl);
        if (!nl) {
            L->nomem = true;
            return false;
        }
        p->lists = nl;
        L->lists_cap = ncap;
    }
    pc_list *l = &p->lists[p->nlists];
    memset(l, 0, sizeof *l);
    l->name = dup_n(L, name->value, name->len);
    if (!l->name)
        return false;
    l->pos = name->pos;
    *index = p->nlists++;
    return true;
}

static bool on_lists_entry(pc_walker *w, pc_scalar *name)
{
    pc_loader *L = w->L;
    char q[PC_QUOTE_MAX];
    bool valid = true;
    if (!pc_list_name_valid(name->value, name->len)) {
        pc_report(L, PC_E_LIST_NAME, name->pos,
                  "list names are 1 to 64 of a-z 0-9 _ -, starting with a letter or digit",
                  "invalid list name '%s'", pc_quote(q, sizeof q, name->value, name->len));
        valid = false;
    } else if (!pc_scalar_require_literal(L, name, "a list name") || !list_name_untyped(L, name)) {
        /* Reported, but the list is kept: includes of it must not cascade. */
    } else if (L->policy->nlists >= L->limits.max_lists) {
        if (!L->lists_limit_reported)
            pc_report(L, PC_E_TOO_MANY_LISTS, name->pos, NULL, "more than %u lists", L->limits.max_lists);
        L->lists_limit_reported = true;
        valid = false;
    }
    size_t index = 0;
    if (valid && !add_list(L, name, &index))
        return false;
    if (!pc_walk_next(w))
        return false;
    if (!valid)
        return pc_walk_skip(w);
    if (w->ev.type != YAML_MAPPING_START_EVENT)
        return pc_walk_wrong_type(w, "a list", "a mapping with rules (and optionally include)",
                          "write NAME: {rules: [{host: api.example.com, ports: [443]}]}");
    pc_pos pos = pc_ev_pos(w);
    pc_key_set ks = {list_keys, 2, "in a list", {{0}}, 0, 0};
    list_ctx lc = {index};
    bool empty;
    if (!pc_walk_mapping(w, &ks, on_list_value, &lc, &empty))
        return false;
    if (empty)
        pc_report(L, PC_E_EMPTY, pos, "add rules", "list '%s' is empty",
                  L->policy->lists[index].name);
    else if (pc_key_missing(&ks, LK_RULES))
        pc_report(L, PC_E_MISSING_KEY, pos, "add rules: with at least one rule",
                  "list '%s' has no rules", L->policy->lists[index].name);
    return true;
}

static bool parse_lists(pc_walker *w)
{
    if (w->ev.type != YAML_MAPPING_START_EVENT)
        return pc_walk_wrong_type(w, "lists", "a mapping of list names to lists", NULL);
    pc_pos pos = pc_ev_pos(w);
    bool any = false;
    for (;;) {
        if (!pc_walk_next(w))
            return false;
        if (w->ev.type == YAML_MAPPING_END_EVENT)
            break;
        any = true;
        if (w->ev.type != YAML_SCALAR_EVENT) {
            if (!pc_walk_wrong_type(w, "a list name", "a string", NULL) || !pc_walk_next(w) || !pc_walk_skip(w))
                return false;
            continue;
        }
        pc_scalar name = pc_scalar_of(w);
        /* The name is borrowed from the event: copy it before moving on. */
        char buf[PC_MAX_LIST_NAME + 1];
        if (name.len <= PC_MAX_LIST_NAME) {
            memcpy(buf, name.value, name.len);
            buf[name.len] = '\0';
            name.value = buf;
        } else {
            char q[PC_QUOTE_MAX];
            pc_report(w->L, PC_E_LIST_NAME, name.pos, "list names are at most 64 characters",
                      "invalid list name '%s'", pc_quote(q, sizeof q, name.value, name.len));
            if (!pc_walk_next(w) || !pc_walk_skip(w))
                return false;
            continue;
        }
        if (!on_lists_entry(w, &name))
            return false;
    }
    if (!any)
        pc_report(w->L, PC_E_EMPTY, pos, "define at least one list", "lists is empty");
    return true;
}

/* ------------------------------------------------------------------ */
/* The document                                                        */

enum { TK_VERSION, TK_LISTS };
static const char *const top_keys[] = {"version", "lists"};

static bool on_top_value(pc_walker *w, void *ctx, int key, pc_pos key_pos)
{
    (void)ctx;
    (void)key_pos;
    if (key == TK_LISTS)
        return parse_lists(w);
    if (w->ev.type != YAML_SCALAR_EVENT)
        return pc_walk_wrong_type(w, "version", "the number 1", "write version: 1");
    pc_scalar s = pc_scalar_of(w);
    if (s.plain && s.len == 1 && s.value[0] == '1')
        return true;
    char q[PC_QUOTE_MAX];
    if (!s.plain)
        pc_report(w->L, PC_E_VERSION, s.pos, "write version: 1",
                  "version must be the number 1, not the string '%s'",
                  pc_quote(q, sizeof q, s.value, s.len));
    else
        pc_report(w->L, PC_E_VERSION, s.pos, "write version: 1",
                  "unsupported version '%s': this policyc reads version 1",
                  pc_quote(q, sizeof q, s.value, s.len));
    return true;
}

/* Missing top-level keys are only returned: see parse_stream. */
static bool parse_root(pc_walker *w, bool *missing_version, bool *missing_lists, pc_pos *root_pos)
{
    pc_loader *L = w->L;
    if (w->ev.type == YAML_SCALAR_EVENT) {
        pc_scalar s = pc_scalar_of(w);
        if (pc_scalar_is_null(&s)) {
            pc_report(L, PC_E_EMPTY, s.pos, "start with version: 1 and lists:", "the document is empty");
            return true;
        }
    }
    if (w->ev.type != YAML_MAPPING_START_EVENT)
        return pc_walk_wrong_type(w, "the document", "a mapping with version and lists",
                          "start with version: 1 and lists:");
    pc_pos pos = pc_ev_pos(w);
    pc_key_set ks = {top_keys, 2, "at the top level", {{0}}, 0, 0};
    bool empty;
    if (!pc_walk_mapping(w, &ks, on_top_value, NULL, &empty))
        return false;
    if (empty) {
        pc_report(L, PC_E_EMPTY, pos, "start with version: 1 and lists:", "the document is empty");
        return true;
    }
    *missing_version = pc_key_missing(&ks, TK_VERSION);
    *missing_lists = pc_key_missing(&ks, TK_LISTS);
    *root_pos = pos;
    return true;
}

static bool parse_stream(pc_walker *w)
{
    if (!pc_walk_next(w)) /* STREAM_START */
        return false;
    if (!pc_walk_next(w))
        return false;
    if (w->ev.type == YAML_STREAM_END_EVENT) {
        pc_report(w->L, PC_E_EMPTY, (pc_pos){1, 1}, "start with version: 1 and lists:",
                  "the file is empty");
        return true;
    }
    /* DOCUMENT_START, then the root node, then DOCUMENT_END. */
    bool no_version = false, no_lists = false;
    pc_pos root = {1, 1};
    if (!pc_walk_next(w) || !parse_root(w, &no_version, &no_lists, &root) || !pc_walk_next(w) ||
        !pc_walk_next(w))
        return false;
    /* Reported only once the stream is known to go on cleanly: a YAML error
     * just after the mapping (text less indented than it, a stray byte order
     * mark) ends the mapping early, and "missing key" would be a false error
     * in front of the real one. */
    if (no_version)
        pc_report(w->L, PC_E_MISSING_KEY, root, "add version: 1 as the first line",
                  "missing key 'version'");
    if (no_lists)
        pc_report(w->L, PC_E_MISSING_KEY, root, "add lists: with at least one list",
                  "missing key 'lists'");
    if (w->ev.type == YAML_DOCUMENT_START_EVENT) {
        pc_report(w->L, PC_E_MULTIPLE_DOCUMENTS, pc_ev_pos(w), "keep one document: remove the '---'",
                  "more than one YAML document");
        return false;
    }
    return true;
}

bool pc_parse_yaml(pc_loader *L)
{
    pc_walker w = {.L = L};
    if (!yaml_parser_initialize(&w.parser)) {
        L->nomem = true;
        return false;
    }
    yaml_parser_set_input_string(&w.parser, (const unsigned char *)L->src.data, L->src.len);
    /* Never guess UTF-16 from a BOM: positions are computed on UTF-8 bytes. */
    yaml_parser_set_encoding(&w.parser, YAML_UTF8_ENCODING);
    bool ok = parse_stream(&w) && !w.fatal;
    if (w.have_ev)
        yaml_event_delete(&w.ev);
    yaml_parser_delete(&w.parser);
    return ok;
}
