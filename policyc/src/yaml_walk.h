/*
 * yaml_walk.h - strict walking of libyaml events (private to the front end).
 *
 * The walker owns one current event. Every advance refuses anchors, tags,
 * %TAG directives and aliases on the way (each reported once, where it
 * stands), and a libyaml error (broken YAML, bad encoding) is reported with
 * a position in characters and ends the walk: libyaml cannot resume.
 * Grammar code (parse.c) consumes one node per value; whatever it does not
 * expect it reports and skips with pc_walk_skip, so the walk goes on and
 * every error is found.
 */
#ifndef POLICYC_YAML_WALK_H
#define POLICYC_YAML_WALK_H

#include <yaml.h>

#include "load-int.h"

typedef struct pc_walker {
    pc_loader *L;
    yaml_parser_t parser;
    yaml_event_t ev; /* the current event, valid while have_ev */
    bool have_ev;
    bool fatal; /* libyaml failed: no further event */
} pc_walker;

/* Longest key that can get a did-you-mean suggestion. */
#define KEY_MAX 64

/* 1-based position of a libyaml mark (0-based, in characters). */
pc_pos pc_mark_pos(yaml_mark_t m);
/* Where the current event starts. */
pc_pos pc_ev_pos(const pc_walker *w);

/* Advances to the next event (deleting the current one). Returns false, with
 * w->fatal set, when libyaml failed (already reported). */
bool pc_walk_next(pc_walker *w);

/* The current event starts a node: consumes the whole node. A node nested
 * more than PC_MAX_NESTING deep is reported (PC016) and ends the walk, since
 * libyaml's scanner is quadratic in flow nesting. Returns false when the
 * walk ended. */
bool pc_walk_skip(pc_walker *w);

/* "a string", "a sequence", "a mapping", "an alias": the current node. */
const char *pc_node_kind(const pc_walker *w);

/* The current scalar event as a pc_scalar (value borrowed from the event). */
pc_scalar pc_scalar_of(const pc_walker *w);
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

/* Reports the current node as being of the wrong kind (PC009: "WHAT must be
 * EXPECTED, not ...", aliases being already reported) and skips it. */
bool pc_walk_wrong_type(pc_walker *w, const char *what, const char *expected, const char *help);

/* A mapping with a fixed set of known keys (at most 8). */
typedef struct pc_key_set {
    const char *const *names; /* known keys */
    size_t n;
    const char *where;        /* "at the top level", "in a list", "in a rule" */
    pc_pos first[8];          /* where each known key was first seen */
    unsigned seen;            /* bit i: names[i] seen */
    unsigned suggested;       /* bit i: an unknown key was reported as a typo of names[i] */
} pc_key_set;

/* True when key was neither seen nor reported as misspelt: a required key
 * is reported missing only then, so `port: [443]` is one error, not two. */
bool pc_key_missing(const pc_key_set *ks, int key);

/* Reads the key at the current event. Returns the index of a known key, -1
 * when the key was reported (unknown with a did-you-mean, duplicate, not a
 * string, `mode`) and its value must be skipped, -2 when the walk ended. */
int pc_read_key(pc_walker *w, pc_key_set *ks, pc_pos *key_pos);

/* Loops over a mapping's entries (current event: MAPPING_START), calling
 * on_value(w, ctx, key_index, key_pos) with the current event at the value,
 * which the callback must consume entirely. Returns false when the walk
 * ended; *empty tells whether the mapping had no entry. */
typedef bool (*pc_value_fn)(pc_walker *w, void *ctx, int key, pc_pos key_pos);
bool pc_walk_mapping(pc_walker *w, pc_key_set *ks, pc_value_fn on_value, void *ctx, bool *empty);

#endif
