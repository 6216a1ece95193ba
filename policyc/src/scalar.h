/*
 * scalar.h - allowlist scalars as the grammar sees them: a node of the strict
 * YAML reader's tree (pinhole/yaml_reader.h) as a pc_scalar, and what YAML
 * would type a plain scalar as.
 */
#ifndef POLICYC_SCALAR_H
#define POLICYC_SCALAR_H

#include "load-int.h"
#include "pinhole/yaml_reader.h"

/* Longest key that can get a did-you-mean suggestion. */
#define KEY_MAX 64

static inline pc_pos pc_node_pos(const ph_yaml_node *n)
{
    return (pc_pos){n->pos.line, n->pos.col};
}

/* A scalar node as a pc_scalar (value borrowed from the tree). */
pc_scalar pc_scalar_of(const ph_yaml_node *n);

/* "a string", "a sequence", "a mapping", "an alias". */
const char *pc_node_kind(const ph_yaml_node *n);

/* A plain empty value, `~` or `null`: YAML's ways of writing nothing. */
bool pc_scalar_is_null(const pc_scalar *s);

/* What YAML (1.2 core schema, and 1.1 where it types more) makes of a plain
 * scalar that is not a string: "a number" (42, 0x2a, 0o52, 1_000, 4.2e1,
 * .inf, .nan, 1:30), "a boolean" (true, yes, on, y...), "null"; NULL for a
 * string or any quoted scalar. Another YAML reader of the same file would
 * see that type, so a text field must not silently take it as text. */
const char *pc_scalar_yaml_type(const pc_scalar *s);

/* Keys, hosts, ports and list names are read by people in review: refuses
 * (PC018) one whose value differs from its source text, e.g.
 * "a\x2eexample.com" or a block scalar. Returns s->literal. */
bool pc_scalar_require_literal(pc_loader *L, const pc_scalar *s, const char *what);

#endif
