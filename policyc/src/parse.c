/*
 * parse.c - allowlist YAML to pc_policy, over the strict reader's tree
 * (pinhole/yaml_reader.h).
 *
 * The grammar: which keys each mapping has, which are required, and what
 * type each value is. Anchors, tags, aliases, directives, a second
 * document, unknown, duplicate and non-string keys are refused by the
 * reader (the schemas below say which keys each mapping has); their errors
 * become PCxxx diagnostics here. A structural error is reported and the
 * offending node skipped, so one run reports every error. After an error
 * that stopped the reader (broken YAML, a limit) the tree ends where it
 * stopped: the walk reports what it has and stops at the first incomplete
 * collection, so nothing is reported missing that was never read.
 */
#include <stdlib.h>
#include <string.h>

#include "pinhole/host.h"
#include "scalar.h"
#include "suggest.h"

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

/* `protocol: tls | http | tcp`: what a CONNECT tunnel to the rule's
 * destination may carry; absent, TLS or HTTP/1 (both inspected). A value
 * YAML reads as another type (`protocol: 1`, `protocol: ~`) is a wrong
 * type, anything else not one of the three an unknown value. */
static bool parse_protocol(pc_loader *L, const pc_scalar *s, pc_rule *r)
{
    static const struct {
        const char *name;
        ph_protocol p;
    } names[] = {{"tls", PH_PROTOCOL_TLS}, {"http", PH_PROTOCOL_HTTP}, {"tcp", PH_PROTOCOL_TCP}};
    const char *help = "write protocol: tls, protocol: http or protocol: tcp (or leave it out: "
                       "TLS or HTTP/1)";
    const char *type = pc_scalar_yaml_type(s);
    if (type != NULL) {
        pc_report(L, PC_E_TYPE, s->pos, help, "protocol must be a string, not %s", type);
        return false;
    }
    if (!pc_scalar_require_literal(L, s, "a protocol"))
        return false;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (s->len == strlen(names[i].name) && memcmp(s->value, names[i].name, s->len) == 0) {
            r->protocol = names[i].p;
            return true;
        }
    char q[PC_QUOTE_MAX];
    pc_report(L, PC_E_PROTOCOL, s->pos, help, "protocol must be tls, http or tcp, not \"%s\"",
              pc_quote_scalar(q, s));
    return false;
}

/* ------------------------------------------------------------------ */
/* The schemas: the keys each mapping has                               */

enum { RK_HOST, RK_PORTS, RK_REASON, RK_SOURCE, RK_PROTOCOL };
static const char *const rule_keys[] = {"host", "ports", "reason", "source", "protocol"};
enum { LK_RULES, LK_INCLUDE };
static const char *const list_keys[] = {"rules", "include"};
enum { TK_VERSION, TK_LISTS };
static const char *const top_keys[] = {"version", "lists"};

static const ph_yaml_schema rule_schema = {"in a rule", rule_keys, 5, 0, NULL, NULL};
static const ph_yaml_schema rules_schema = {NULL, NULL, 0, 0, NULL, &rule_schema};
static const ph_yaml_schema *const list_values[] = {&rules_schema, NULL};
static const ph_yaml_schema list_schema = {"in a list", list_keys, 2, 0, list_values, NULL};
static const ph_yaml_schema *const lists_values[] = {&list_schema};
/* Keys here are list names: any name (checked by the grammar). */
static const ph_yaml_schema lists_schema = {"in lists", NULL, 0, 0, lists_values, NULL};
static const ph_yaml_schema *const top_values[] = {NULL, &lists_schema};
static const ph_yaml_schema top_schema = {"at the top level", top_keys, 2, 0, top_values, NULL};

/* ------------------------------------------------------------------ */
/* Walking the tree                                                    */

/* Reports a node of the wrong kind (an alias was already reported). */
static void wrong_type(pc_loader *L, const ph_yaml_node *n, const char *what, const char *expected,
                       const char *help)
{
    if (n->kind != PH_YAML_REFUSED)
        pc_report(L, PC_E_TYPE, pc_node_pos(n), help, "%s must be %s, not %s", what, expected,
                  pc_node_kind(n));
}

/* False when the reader stopped inside n: the walk ends there. */
static bool complete(const ph_yaml_node *n)
{
    return !(n->flags & PH_YAML_INCOMPLETE);
}

/* The known key an unknown one was probably meant to be, or NULL. `mode`
 * and `<<` have their own errors and no suggestion. */
static const char *unknown_key_guess(const ph_yaml_schema *schema, const char *key, size_t len)
{
    if ((len == 4 && memcmp(key, "mode", 4) == 0) || (len == 2 && memcmp(key, "<<", 2) == 0))
        return NULL;
    if (len > KEY_MAX || memchr(key, '\0', len) != NULL)
        return NULL;
    char word[KEY_MAX + 1];
    memcpy(word, key, len);
    word[len] = '\0';
    return pc_suggest(word, schema->keys, schema->nkeys);
}

/* A mapping with a fixed set of known keys (its schema's). */
typedef struct key_set {
    const ph_yaml_schema *schema;
    pc_pos first[8]; /* where each known key was first seen */
    unsigned seen;      /* bit i: keys[i] seen */
    unsigned suggested; /* bit i: an unknown key was reported as a typo of keys[i] */
} key_set;

/* True when key was neither seen nor reported as misspelt: a required key
 * is reported missing only then, so `port: [443]` is one error, not two. */
static bool key_missing(const key_set *ks, int key)
{
    return !((ks->seen | ks->suggested) & (1u << key));
}

/* Calls on_value(L, ctx, key_index, value) for each known key's first
 * value. Unknown, duplicate and non-string keys were reported by the
 * reader; their values are skipped. Returns false when the walk ended
 * (the mapping is incomplete or on_value said so). */
typedef bool (*value_fn)(pc_loader *L, void *ctx, int key, const ph_yaml_node *value);
static bool walk_mapping(pc_loader *L, const ph_yaml_node *map, key_set *ks, value_fn on_value,
                         void *ctx)
{
    const ph_yaml_schema *sc = ks->schema;
    for (uint32_t i = 0; i < map->len; i++) {
        const ph_yaml_node *k = &map->u.pairs[i].key, *v = &map->u.pairs[i].value;
        if (k->kind != PH_YAML_SCALAR)
            continue;
        long idx = ph_yaml_schema_key(sc, k->u.text, k->len);
        if (idx < 0) {
            const char *guess = unknown_key_guess(sc, k->u.text, k->len);
            for (size_t j = 0; guess && j < sc->nkeys; j++)
                if (sc->keys[j] == guess)
                    ks->suggested |= 1u << j;
            continue;
        }
        if (ks->seen & (1u << idx))
            continue;
        ks->seen |= 1u << idx;
        ks->first[idx] = pc_node_pos(k);
        /* Reported, but the key still counts: its value is checked and no
         * "missing key" follows. */
        pc_scalar ksc = pc_scalar_of(k);
        (void)pc_scalar_require_literal(L, &ksc, "a key");
        if (!on_value(L, ctx, (int)idx, v))
            return false;
    }
    return complete(map);
}

/* ------------------------------------------------------------------ */
/* Rules                                                               */

typedef struct rule_ctx {
    pc_rule rule;
    pc_pos protocol_pos; /* where `protocol:`'s value is, when given */
    bool failed;
    bool ports_limit_reported;
} rule_ctx;

static bool parse_ports(pc_loader *L, const ph_yaml_node *n, rule_ctx *rc)
{
    if (n->kind == PH_YAML_SCALAR) {
        pc_scalar s = pc_scalar_of(n);
        rc->failed = true;
        if (pc_scalar_is_null(&s))
            pc_report(L, PC_E_PORTS_EMPTY, s.pos, "list the ports, e.g. ports: [443]",
                      "ports is empty: there is no default port");
        else
            pc_report(L, PC_E_TYPE, s.pos, "write ports as a sequence, e.g. ports: [443]",
                      "ports must be a sequence, not a string");
        return true;
    }
    if (n->kind != PH_YAML_SEQUENCE) {
        rc->failed = true;
        wrong_type(L, n, "ports", "a sequence", "write ports as a sequence, e.g. ports: [443]");
        return complete(n);
    }
    pc_pos seq_pos = pc_node_pos(n);
    size_t cap = 0;
    for (uint32_t i = 0; i < n->len; i++) {
        const ph_yaml_node *item = &n->u.items[i];
        if (item->kind != PH_YAML_SCALAR) {
            rc->failed = true;
            wrong_type(L, item, "a port", "a number or a \"LOW-HIGH\" range", NULL);
            if (!complete(item))
                return false;
            continue;
        }
        pc_scalar s = pc_scalar_of(item);
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
    if (!complete(n))
        return false;
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

static bool on_rule_value(pc_loader *L, void *ctx, int key, const ph_yaml_node *n)
{
    rule_ctx *rc = ctx;
    if (key == RK_PORTS)
        return parse_ports(L, n, rc);
    if (n->kind != PH_YAML_SCALAR) {
        rc->failed = true;
        wrong_type(L, n, rule_keys[key], "a string", NULL);
        return complete(n);
    }
    pc_scalar s = pc_scalar_of(n);
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
    case RK_PROTOCOL:
        rc->protocol_pos = s.pos;
        if (!parse_protocol(L, &s, &rc->rule))
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

static bool parse_rule(pc_loader *L, const ph_yaml_node *n, pc_list *list, size_t *rules_cap)
{
    if (n->kind != PH_YAML_MAPPING) {
        wrong_type(L, n, "a rule", "a mapping with host and ports",
                   "write a rule as {host: api.example.com, ports: [443]}");
        return complete(n);
    }
    rule_ctx rc = {0};
    rc.rule.pos = pc_node_pos(n);
    key_set ks = {&rule_schema, {{0}}, 0, 0};
    bool ok = walk_mapping(L, n, &ks, on_rule_value, &rc);
    if (ok && key_missing(&ks, RK_HOST)) {
        pc_report(L, PC_E_HOST_EMPTY, rc.rule.pos, "add host: NAME (one exact name or *.domain)",
                  "rule has no host: every rule names its destination");
        rc.failed = true;
    }
    if (ok && key_missing(&ks, RK_PORTS)) {
        pc_report(L, PC_E_PORTS_MISSING, rc.rule.pos, "add ports: [443] (the ports you need)",
                  "rule has no ports: there is no default port");
        rc.failed = true;
    }
    /* tcp relays whatever the client sends, uninspected: to one host the
     * operator named, never to every name under a domain. */
    if (ok && !rc.failed && rc.rule.protocol == PH_PROTOCOL_TCP && rc.rule.wildcard) {
        pc_report(L, PC_E_PROTOCOL_WILDCARD, rc.protocol_pos,
                  "name each host that speaks another protocol in a rule of its own",
                  "protocol tcp names one host, not a wildcard");
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

typedef struct list_ctx {
    size_t index; /* into L->policy->lists */
} list_ctx;

static bool parse_rules(pc_loader *L, const ph_yaml_node *n, pc_list *list)
{
    if (n->kind != PH_YAML_SEQUENCE) {
        pc_scalar s = n->kind == PH_YAML_SCALAR ? pc_scalar_of(n) : (pc_scalar){0};
        if (n->kind == PH_YAML_SCALAR && pc_scalar_is_null(&s)) {
            pc_report(L, PC_E_EMPTY, pc_node_pos(n), "add at least one rule",
                      "rules of list '%s' is empty", list->name);
            return true;
        }
        wrong_type(L, n, "rules", "a sequence of rules", NULL);
        return complete(n);
    }
    size_t cap = 0;
    for (uint32_t i = 0; i < n->len; i++)
        if (!parse_rule(L, &n->u.items[i], list, &cap))
            return false;
    if (!complete(n))
        return false;
    if (n->len == 0)
        pc_report(L, PC_E_EMPTY, pc_node_pos(n), "add at least one rule",
                  "rules of list '%s' is empty", list->name);
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

static bool parse_include(pc_loader *L, const ph_yaml_node *n, pc_list *list)
{
    if (n->kind != PH_YAML_SEQUENCE) {
        pc_scalar s = n->kind == PH_YAML_SCALAR ? pc_scalar_of(n) : (pc_scalar){0};
        if (n->kind == PH_YAML_SCALAR && pc_scalar_is_null(&s)) {
            pc_report(L, PC_E_EMPTY, s.pos, "remove include or name a list", "include is empty");
            return true;
        }
        wrong_type(L, n, "include", "a sequence of list names", "write include: [common]");
        return complete(n);
    }
    size_t cap = 0;
    bool limit_reported = false;
    for (uint32_t i = 0; i < n->len; i++) {
        const ph_yaml_node *item = &n->u.items[i];
        if (item->kind != PH_YAML_SCALAR) {
            wrong_type(L, item, "an included list", "a list name", NULL);
            if (!complete(item))
                return false;
            continue;
        }
        pc_scalar s = pc_scalar_of(item);
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
    if (!complete(n))
        return false;
    if (n->len == 0)
        pc_report(L, PC_E_EMPTY, pc_node_pos(n), "remove include or name a list", "include is empty");
    return true;
}

static bool on_list_value(pc_loader *L, void *ctx, int key, const ph_yaml_node *n)
{
    list_ctx *lc = ctx;
    pc_list *list = &L->policy->lists[lc->index];
    return key == LK_RULES ? parse_rules(L, n, list) : parse_include(L, n, list);
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

static bool on_lists_entry(pc_loader *L, const pc_scalar *name, const ph_yaml_node *value)
{
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
    if (!valid)
        return complete(value);
    if (value->kind != PH_YAML_MAPPING) {
        wrong_type(L, value, "a list", "a mapping with rules (and optionally include)",
                   "write NAME: {rules: [{host: api.example.com, ports: [443]}]}");
        return complete(value);
    }
    key_set ks = {&list_schema, {{0}}, 0, 0};
    list_ctx lc = {index};
    if (!walk_mapping(L, value, &ks, on_list_value, &lc))
        return false;
    if (value->len == 0)
        pc_report(L, PC_E_EMPTY, pc_node_pos(value), "add rules", "list '%s' is empty",
                  L->policy->lists[index].name);
    else if (key_missing(&ks, LK_RULES))
        pc_report(L, PC_E_MISSING_KEY, pc_node_pos(value), "add rules: with at least one rule",
                  "list '%s' has no rules", L->policy->lists[index].name);
    return true;
}

static bool parse_lists(pc_loader *L, const ph_yaml_node *n)
{
    if (n->kind != PH_YAML_MAPPING) {
        wrong_type(L, n, "lists", "a mapping of list names to lists", NULL);
        return complete(n);
    }
    for (uint32_t i = 0; i < n->len; i++) {
        const ph_yaml_node *k = &n->u.pairs[i].key, *v = &n->u.pairs[i].value;
        /* A name that is not a string was reported by the reader. */
        if (k->kind != PH_YAML_SCALAR) {
            if (!complete(k) || !complete(v))
                return false;
            continue;
        }
        pc_scalar name = pc_scalar_of(k);
        if (name.len > PC_MAX_LIST_NAME) {
            char q[PC_QUOTE_MAX];
            pc_report(L, PC_E_LIST_NAME, name.pos, "list names are at most 64 characters",
                      "invalid list name '%s'", pc_quote(q, sizeof q, name.value, name.len));
            if (!complete(v))
                return false;
            continue;
        }
        if (!on_lists_entry(L, &name, v))
            return false;
    }
    if (!complete(n))
        return false;
    if (n->len == 0)
        pc_report(L, PC_E_EMPTY, pc_node_pos(n), "define at least one list", "lists is empty");
    return true;
}

/* ------------------------------------------------------------------ */
/* The document                                                        */

static bool on_top_value(pc_loader *L, void *ctx, int key, const ph_yaml_node *n)
{
    (void)ctx;
    if (key == TK_LISTS)
        return parse_lists(L, n);
    if (n->kind != PH_YAML_SCALAR) {
        wrong_type(L, n, "version", "the number 1", "write version: 1");
        return complete(n);
    }
    pc_scalar s = pc_scalar_of(n);
    if (s.plain && s.len == 1 && s.value[0] == '1')
        return true;
    char q[PC_QUOTE_MAX];
    if (!s.plain)
        pc_report(L, PC_E_VERSION, s.pos, "write version: 1",
                  "version must be the number 1, not the string '%s'",
                  pc_quote(q, sizeof q, s.value, s.len));
    else
        pc_report(L, PC_E_VERSION, s.pos, "write version: 1",
                  "unsupported version '%s': this policyc reads version 1",
                  pc_quote(q, sizeof q, s.value, s.len));
    return true;
}

/* The reader's refusals as policyc's diagnostics (codes and messages of
 * docs/allowlist.md). Returns false when the reader stopped early. */
static bool report_reader_errors(pc_loader *L, const ph_yaml_doc *doc)
{
    bool stopped = false;
    for (size_t i = 0; i < ph_yaml_error_count(doc); i++) {
        const ph_yaml_error *e = ph_yaml_error_at(doc, i);
        pc_pos pos = {e->pos.line, e->pos.col};
        char q[PC_QUOTE_MAX], help[160];
        const char *problem = e->problem ? e->problem : "unknown error";
        pc_quote(q, sizeof q, e->text, e->text_len < sizeof e->text ? e->text_len : sizeof e->text - 1);
        switch (e->code) {
        case PH_YAML_E_ENCODING: {
            const char *h = "save the file as UTF-8 text without control characters";
            if (strstr(problem, "UTF-8"))
                pc_report(L, PC_E_ENCODING, pos, h, "the file is not valid UTF-8: %s", problem);
            else if (e->value >= 0)
                pc_report(L, PC_E_ENCODING, pos, h, "%s (U+%04X)", problem, (unsigned)e->value);
            else
                pc_report(L, PC_E_ENCODING, pos, h, "%s", problem);
            stopped = true;
            break;
        }
        case PH_YAML_E_SYNTAX:
            if (e->context)
                /* `host: *.example.com` unquoted reads as an alias. */
                pc_report(L, PC_E_YAML_SYNTAX, pos,
                          strstr(e->context, "alias") ? "quote a wildcard host: \"*.example.com\"" : NULL,
                          "%s %s (line %u)", problem, e->context, (unsigned)e->context_line);
            else
                pc_report(L, PC_E_YAML_SYNTAX, pos, NULL, "%s", problem);
            stopped = true;
            break;
        case PH_YAML_E_TOO_LARGE:
            pc_report(L, PC_E_FILE_TOO_LARGE, pos, "split the policy", "file is larger than %ld bytes",
                      e->value);
            stopped = true;
            break;
        case PH_YAML_E_TOO_MANY_NODES:
            pc_report(L, PC_E_FILE_TOO_LARGE, pos, "split the policy",
                      "more than %ld YAML nodes in the file", e->value);
            stopped = true;
            break;
        case PH_YAML_E_SCALAR_TOO_LONG:
            pc_report(L, PC_E_STRING, pos, NULL, "a value is longer than %ld bytes", e->value);
            stopped = true;
            break;
        case PH_YAML_E_TOO_DEEP:
            pc_report(L, PC_E_NESTING, pos, NULL, "YAML nested more than %ld levels deep", e->value);
            stopped = true;
            break;
        case PH_YAML_E_MULTIPLE_DOCUMENTS:
            pc_report(L, PC_E_MULTIPLE_DOCUMENTS, pos, "keep one document: remove the '---'",
                      "more than one YAML document");
            stopped = true;
            break;
        case PH_YAML_E_ANCHOR:
            pc_report(L, PC_E_ANCHOR, pos, "remove the anchor and write values out in full",
                      "anchor '&%s': anchors and aliases are not allowed", q);
            break;
        case PH_YAML_E_ALIAS:
            pc_report(L, PC_E_ALIAS, pos, "write the value out in full",
                      "alias '*%s': anchors and aliases are not allowed", q);
            break;
        case PH_YAML_E_TAG:
            pc_report(L, PC_E_TAG, pos, "remove the tag; values are typed by the grammar",
                      "tag '%s' is not allowed", q);
            break;
        case PH_YAML_E_TAG_DIRECTIVE:
            pc_report(L, PC_E_TAG, pos, "remove the %TAG directive", "%%TAG directives are not allowed");
            break;
        case PH_YAML_E_VERSION_DIRECTIVE:
            pc_report(L, PC_E_TAG, pos, "remove the %YAML directive",
                      "%%YAML directives are not allowed");
            break;
        case PH_YAML_E_DUPLICATE_KEY:
            if (e->schema == &lists_schema)
                pc_report(L, PC_E_DUPLICATE_KEY, pos, "rename or merge the lists",
                          "duplicate list '%s' (first at line %u)", q, (unsigned)e->first.line);
            else
                pc_report(L, PC_E_DUPLICATE_KEY, pos, "remove one of them",
                          "duplicate key '%s'%s%s (first at line %u)", q,
                          e->schema && e->schema->name ? " " : "",
                          e->schema && e->schema->name ? e->schema->name : "", (unsigned)e->first.line);
            break;
        case PH_YAML_E_KEY_NOT_SCALAR:
            if (e->kind != PH_YAML_REFUSED)
                pc_report(L, PC_E_TYPE, pos, NULL, "%s must be a string, not %s",
                          e->schema == &lists_schema ? "a list name" : "a key",
                          e->kind == PH_YAML_MAPPING ? "a mapping" : "a sequence");
            break;
        case PH_YAML_E_UNKNOWN_KEY: {
            const ph_yaml_schema *sc = e->schema;
            const char *where = sc && sc->name ? sc->name : "here";
            if (e->text_len == 4 && memcmp(e->text, "mode", 4) == 0) {
                pc_report(L, PC_E_MODE, pos,
                          "remove it and list every destination as a rule with host and ports",
                          "'mode' is not a key: there is no open mode, only listed destinations");
                break;
            }
            if (e->text_len == 2 && memcmp(e->text, "<<", 2) == 0) {
                pc_report(L, PC_E_UNKNOWN_KEY, pos, "write the keys out in full in each mapping",
                          "merge key '<<' %s: merges, anchors and aliases are not allowed", where);
                break;
            }
            const char *guess = sc ? unknown_key_guess(sc, e->text, e->text_len) : NULL;
            if (guess) {
                snprintf(help, sizeof help, "did you mean '%s'?", guess);
            } else {
                size_t o = (size_t)snprintf(help, sizeof help, "the keys here are");
                for (size_t k = 0; sc && k < sc->nkeys && o < sizeof help; k++)
                    o += (size_t)snprintf(help + o, sizeof help - o, "%s '%s'", k ? "," : "",
                                          sc->keys[k]);
            }
            pc_report(L, PC_E_UNKNOWN_KEY, pos, help, "unknown key '%s' %s", q, where);
            break;
        }
        default:
            pc_report(L, PC_E_YAML_SYNTAX, pos, NULL, "YAML refused (%s)", ph_yaml_code_name(e->code));
            stopped = true;
            break;
        }
    }
    return !stopped;
}

/* Missing top-level keys are reported only when the reader read the
 * whole document: a YAML error just after the mapping (text less indented
 * than it, a stray byte order mark) ends the mapping early, and "missing
 * key" would be a false error in front of the real one. */
static bool parse_root(pc_loader *L, const ph_yaml_node *root, bool read_whole)
{
    if (root->kind == PH_YAML_SCALAR) {
        pc_scalar s = pc_scalar_of(root);
        if (pc_scalar_is_null(&s)) {
            pc_report(L, PC_E_EMPTY, s.pos, "start with version: 1 and lists:", "the document is empty");
            return true;
        }
    }
    if (root->kind != PH_YAML_MAPPING) {
        wrong_type(L, root, "the document", "a mapping with version and lists",
                   "start with version: 1 and lists:");
        return complete(root);
    }
    pc_pos pos = pc_node_pos(root);
    key_set ks = {&top_schema, {{0}}, 0, 0};
    if (!walk_mapping(L, root, &ks, on_top_value, NULL))
        return false;
    if (root->len == 0) {
        pc_report(L, PC_E_EMPTY, pos, "start with version: 1 and lists:", "the document is empty");
        return true;
    }
    if (read_whole && key_missing(&ks, TK_VERSION))
        pc_report(L, PC_E_MISSING_KEY, pos, "add version: 1 as the first line",
                  "missing key 'version'");
    if (read_whole && key_missing(&ks, TK_LISTS))
        pc_report(L, PC_E_MISSING_KEY, pos, "add lists: with at least one list",
                  "missing key 'lists'");
    return true;
}

/* Limits of the tree policyc asks the reader for (PC002, PC016, PC017). */
#define PC_MAX_YAML_NODES (32u * 1024 * 1024)
#define PC_MAX_YAML_SCALAR (16u * 1024 * 1024)

bool pc_parse_yaml(pc_loader *L)
{
    /* `%YAML 1.1` (or 1.2) only says which YAML the file is written in;
     * allowlists have always accepted it. %TAG is refused. */
    const ph_yaml_limits lim = {PC_MAX_FILE_BYTES, PC_MAX_NESTING, PC_MAX_YAML_NODES,
                                PC_MAX_YAML_SCALAR, PH_YAML_ACCEPT_VERSION_DIRECTIVE};
    ph_yaml_doc *doc = NULL;
    if (ph_yaml_read(L->src.data, L->src.len, &lim, &top_schema, &doc) == PH_E_NOMEM) {
        L->nomem = true;
        return false;
    }
    bool whole = report_reader_errors(L, doc);
    /* A second document stops the reader after the first, which is whole. */
    bool first_whole = whole;
    for (size_t i = 0; !first_whole && i < ph_yaml_error_count(doc); i++)
        if (ph_yaml_error_at(doc, i)->code == PH_YAML_E_MULTIPLE_DOCUMENTS)
            first_whole = true;
    for (size_t i = 0; first_whole && !whole && i < ph_yaml_error_count(doc); i++) {
        ph_yaml_code c = ph_yaml_error_at(doc, i)->code;
        if (c == PH_YAML_E_SYNTAX || c == PH_YAML_E_ENCODING || c == PH_YAML_E_TOO_DEEP ||
            c == PH_YAML_E_TOO_MANY_NODES || c == PH_YAML_E_SCALAR_TOO_LONG)
            first_whole = false;
    }
    const ph_yaml_node *root = ph_yaml_root(doc);
    bool ok = true;
    if (!root) {
        if (whole)
            pc_report(L, PC_E_EMPTY, (pc_pos){1, 1}, "start with version: 1 and lists:",
                      "the file is empty");
    } else {
        ok = parse_root(L, root, first_whole);
    }
    ph_yaml_free(&doc);
    return ok && whole;
}
