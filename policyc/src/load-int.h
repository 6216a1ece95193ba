/*
 * load-int.h - the loader's private state, shared by the files that make up
 * the front end: parse.c (the YAML reader's tree -> pc_policy), rule_host.c,
 * rule_ports.c, includes.c (names, cycles, depth, flattening) and lint.c
 * (warnings).
 */
#ifndef POLICYC_LOAD_INT_H
#define POLICYC_LOAD_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "load.h"
#include "source_map.h"

/* The limits of load.h; tests lower them to reach each limit cheaply. */
typedef struct pc_load_limits {
    unsigned max_lists, max_rules, max_ports_per_rule, max_includes_per_list;
    unsigned max_include_depth, max_effective_rules, max_includes;
} pc_load_limits;

#define PC_LOAD_LIMITS_DEFAULT                                                          \
    ((pc_load_limits){PC_MAX_LISTS, PC_MAX_RULES, PC_MAX_PORTS_PER_RULE,                \
                      PC_MAX_INCLUDES_PER_LIST, PC_MAX_INCLUDE_DEPTH, PC_MAX_EFFECTIVE_RULES, \
                      PC_MAX_INCLUDES})

/* pc_policy_load_buffer with other limits (tests only). */
ph_status pc_policy_load_buffer_limits(const char *data, size_t len, const char *display_name,
                                       const pc_load_limits *limits, pc_policy **out,
                                       pc_diagnostics *diags);

typedef struct pc_loader {
    pc_load_limits limits;
    const char *file;      /* display name, in every diagnostic */
    const char *base_name; /* default rule->source_file */
    pc_source src;
    pc_diagnostics *diags;
    size_t errors_before;  /* diags->errors when this load started */
    pc_policy *policy;
    size_t lists_cap;
    size_t total_rules;
    size_t total_includes;
    pc_pos *port_pos;      /* scratch: positions of the rule being parsed's ports */
    size_t port_pos_cap;
    bool includes_limit_reported;
    bool lists_limit_reported;
    bool rules_limit_reported;
    bool nomem;
} pc_loader;

/* A YAML scalar as the validators see it (value borrowed from the event). */
typedef struct pc_scalar {
    const char *value;
    size_t len;
    bool plain; /* plain style: the only style a number may have */
    bool literal; /* the value is exactly the text between the quotes (or the
                   * plain text) on one line: no escape, folding or block */
    pc_pos pos;
} pc_scalar;

/* Appends a diagnostic at pos (line 0: about the whole file), with the
 * source line attached. fmt's arguments must be valid UTF-8 (use pc_quote). */
void pc_report(pc_loader *L, pc_code code, pc_pos pos, const char *help, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Writes s[0..len) into buf for quoting in a message: control characters
 * escaped as \xNN, cut (with "...") on a character boundary to fit. */
const char *pc_quote(char *buf, size_t size, const char *s, size_t len);
#define PC_QUOTE_MAX 80

/* pc_quote of a scalar's value, into buf[PC_QUOTE_MAX]. */
static inline const char *pc_quote_scalar(char *buf, const pc_scalar *s)
{
    return pc_quote(buf, PC_QUOTE_MAX, s->value, s->len);
}

/* parse.c: parses L->src into L->policy. Returns false when the YAML itself
 * is broken (the walk stopped early and the policy is incomplete). */
bool pc_parse_yaml(pc_loader *L);

/* rule_host.c: validates a rule's host. On success *host is the malloc'd
 * canonical host and *wildcard says whether it is "*." + base. On failure
 * reports exactly one error and returns false. */
bool pc_check_host(pc_loader *L, const pc_scalar *s, char **host, bool *wildcard);
/* Reports PC042 and returns true when name[0..len) (canonical) is at or
 * under a wildcard-DNS service (guard/data/wildcard_dns_services.txt). */
bool pc_report_wildcard_dns(pc_loader *L, const pc_scalar *s, const char *name, size_t len);

/* rule_ports.c: parses one entry of `ports`. Reports and returns false on error. */
bool pc_parse_port(pc_loader *L, const pc_scalar *s, pc_port_range *out);
/* Refuses (PC052, returns false) a rule whose entries together cover every
 * port, as "1-32767" plus "32768-65535" do. pos: where the sequence starts. */
bool pc_check_rule_ports_cover_all(pc_loader *L, const pc_port_range *ports, size_t n,
                                   pc_pos pos);
/* Warns (PC102) about entries of one rule that overlap an earlier entry. */
void pc_check_rule_port_overlap(pc_loader *L, const pc_port_range *ports, const pc_pos *pos,
                                size_t n);
/* Sorted, merged copy of ports (malloc'd; *nout its length). NULL on ENOMEM. */
pc_port_range *pc_ports_normalize(const pc_port_range *ports, size_t n, size_t *nout);

/* includes.c: duplicate list names, unknown includes, cycles, depth.
 * Returns true when the include graph is sound enough to flatten. */
bool pc_resolve_includes(pc_loader *L);

/* The lists whose rules make up lists[list_index]'s effective rules, in
 * flattening order (itself first); order has room for policy->nlists. */
ph_status pc_effective_lists(const pc_policy *policy, size_t list_index, size_t *order,
                             size_t *count);

/* lint.c: the warnings over each flattened list (PC100, PC101, PC102) and
 * the PC074 limit. Only called on a sound include graph. */
void pc_lint_policy(pc_loader *L);

/* A valid list name: 1..PC_MAX_LIST_NAME of [a-z0-9_-], starting with a
 * letter or digit. */
bool pc_list_name_valid(const char *s, size_t len);

#endif
