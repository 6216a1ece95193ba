/*
 * pinhole/yaml_reader.h - the one strict YAML reader of Pinhole's
 * configuration files (policyc's allowlists, pinhole-proxy's config).
 *
 * It reads one YAML document into a small bounded tree of mappings,
 * sequences and scalars, each with its 1-based line:col (columns count
 * characters, as libyaml's marks do) and, for scalars, the style it was
 * written in, so a caller can tell `443` from `"443"`. Everything YAML has
 * beyond that is refused, each with a stable code and a position:
 * anchors, aliases, tags (any, `!!str` included), %TAG and %YAML
 * directives, a second document, duplicate mapping keys, keys that are not
 * scalars, and keys a mapping's schema does not list; and the limits on
 * input size, nesting depth, node count and scalar length.
 *
 * A load with any error fails whole: ph_yaml_read returns PH_E_FORMAT, and
 * the tree that comes with the errors is only for diagnostics (a caller that
 * applies settings must not look at it). After an anchor, tag, directive,
 * alias or key error the reader goes on, so every such error is reported;
 * after a syntax or encoding error, a second document or a limit it stops,
 * and the collections still open are marked PH_YAML_INCOMPLETE.
 *
 * Parsers know no file names: errors carry positions; the caller prints
 * "file:line:col". The reader types nothing: every scalar is text.
 * libyaml is used inside and never appears in this header.
 */
#ifndef PINHOLE_YAML_READER_H
#define PINHOLE_YAML_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ph_yaml_kind {
    PH_YAML_SCALAR = 1,
    PH_YAML_SEQUENCE = 2,
    PH_YAML_MAPPING = 3,
    PH_YAML_REFUSED = 4, /* stands where an alias was; only in a tree that came with errors */
} ph_yaml_kind;

typedef enum ph_yaml_style {
    PH_YAML_PLAIN = 1,         /* scalars */
    PH_YAML_SINGLE_QUOTED = 2,
    PH_YAML_DOUBLE_QUOTED = 3,
    PH_YAML_LITERAL = 4,       /* | block */
    PH_YAML_FOLDED = 5,        /* > block */
    PH_YAML_BLOCK = 6,         /* collections: indented */
    PH_YAML_FLOW = 7,          /* collections: [..] or {..} */
} ph_yaml_style;

/* Node flags. */
#define PH_YAML_VERBATIM 0x1u   /* scalar: its value is exactly its source text (between the
                                 * quotes, if any) on one line: no escape, folding or block */
#define PH_YAML_INCOMPLETE 0x2u /* collection: the read stopped before its end */

typedef struct ph_yaml_pos {
    uint32_t line, col; /* 1-based; 0:0 is "no position" (the whole input) */
} ph_yaml_pos;

typedef struct ph_yaml_node ph_yaml_node;
typedef struct ph_yaml_pair ph_yaml_pair;

/* One node. Owned by its ph_yaml_doc; valid until ph_yaml_free. */
struct ph_yaml_node {
    uint8_t kind;  /* ph_yaml_kind */
    uint8_t style; /* ph_yaml_style */
    uint8_t flags; /* PH_YAML_VERBATIM, PH_YAML_INCOMPLETE */
    ph_yaml_pos pos;
    uint32_t len;  /* scalar: bytes of text; sequence: items; mapping: pairs */
    union {
        const char *text;          /* scalar: len bytes, then a NUL (the text may hold NULs
                                    * only if escaped, e.g. "\0") */
        const ph_yaml_node *items; /* sequence: items[0..len) */
        const ph_yaml_pair *pairs; /* mapping: pairs[0..len), in file order */
    } u;
};

struct ph_yaml_pair {
    ph_yaml_node key, value;
};

/*
 * What a caller allows in its mappings. A schema applies to the node at its
 * place in the document only when that node is a mapping (keys) or a
 * sequence (items); a node of another kind is the caller's to refuse.
 */
typedef struct ph_yaml_schema ph_yaml_schema;
struct ph_yaml_schema {
    const char *name; /* for the caller's messages, e.g. "in a rule"; may be NULL */
    /* The allowed keys: nkeys strings, the i-th at
     * *(const char *const *)((const char *)keys + i * stride) (stride 0:
     * sizeof(char *)), so a caller's table of structs whose first field is
     * the key can serve directly. keys NULL: any scalar key. */
    const char *const *keys;
    size_t nkeys, stride;
    /* values[i]: the schema of keys[i]'s value (NULL: not checked); with
     * keys NULL, values[0] is every value's. values may be NULL. */
    const ph_yaml_schema *const *values;
    const ph_yaml_schema *items; /* a sequence's items; NULL: not checked */
};

/* Limits, and the one thing a caller may accept. */
#define PH_YAML_ACCEPT_VERSION_DIRECTIVE 0x1u /* a `%YAML 1.1` or `%YAML 1.2` line (the
                                               * versions libyaml reads; any other is a
                                               * syntax error) is accepted, not refused */
typedef struct ph_yaml_limits {
    size_t max_bytes;    /* input size */
    uint32_t max_depth;  /* collections inside collections, the root counting 1 */
    uint32_t max_nodes;  /* nodes in the tree, keys included */
    uint32_t max_scalar; /* bytes of one scalar's value */
    uint32_t flags;      /* PH_YAML_ACCEPT_VERSION_DIRECTIVE; 0: every directive refused */
} ph_yaml_limits;

/* 1 MiB, depth 64, 100,000 nodes, 64 KiB scalars, no directive: ample for a
 * config file. */
#define PH_YAML_LIMITS_DEFAULT ((ph_yaml_limits){1u << 20, 64, 100000, 1u << 16, 0})

/* Stable codes; ph_yaml_code_name gives each a stable name. */
typedef enum ph_yaml_code {
    PH_YAML_E_SYNTAX = 1,           /* libyaml's scanner or parser: broken YAML */
    PH_YAML_E_ENCODING = 2,         /* not UTF-8, or a character YAML forbids (NUL, C0) */
    PH_YAML_E_TOO_LARGE = 3,        /* more than max_bytes of input */
    PH_YAML_E_TOO_DEEP = 4,         /* more than max_depth nested collections */
    PH_YAML_E_TOO_MANY_NODES = 5,   /* more than max_nodes nodes */
    PH_YAML_E_SCALAR_TOO_LONG = 6,  /* a scalar longer than max_scalar */
    PH_YAML_E_MULTIPLE_DOCUMENTS = 7,
    PH_YAML_E_ANCHOR = 8,           /* &name */
    PH_YAML_E_ALIAS = 9,            /* *name */
    PH_YAML_E_TAG = 10,             /* !tag, !!str, !<...> */
    PH_YAML_E_TAG_DIRECTIVE = 11,   /* %TAG */
    PH_YAML_E_VERSION_DIRECTIVE = 12, /* %YAML (unless PH_YAML_ACCEPT_VERSION_DIRECTIVE) */
    PH_YAML_E_DUPLICATE_KEY = 13,   /* a key twice in one mapping */
    PH_YAML_E_KEY_NOT_SCALAR = 14,  /* ? [a, b] : ... */
    PH_YAML_E_UNKNOWN_KEY = 15,     /* a key the mapping's schema does not list */
} ph_yaml_code;
#define PH_YAML_CODE_MAX 15

#define PH_YAML_TEXT_MAX 128

/* One error. Every error has a code and a position (line >= 1), except
 * PH_YAML_E_TOO_LARGE, which is about the whole input (0:0). */
typedef struct ph_yaml_error {
    ph_yaml_code code;
    ph_yaml_pos pos;
    ph_yaml_pos first;             /* DUPLICATE_KEY: where the key first was */
    const ph_yaml_schema *schema;  /* UNKNOWN_KEY, DUPLICATE_KEY, KEY_NOT_SCALAR: the
                                    * mapping's schema (NULL: none) */
    const char *problem;           /* SYNTAX, ENCODING: libyaml's static description */
    const char *context;           /* SYNTAX: libyaml's static context, or NULL */
    uint32_t context_line;         /* SYNTAX with a context: the line it starts at */
    long value;                    /* ENCODING: the offending code point, or -1;
                                    * limits: the limit */
    size_t offset;                 /* ENCODING: byte offset of the first invalid sequence */
    ph_yaml_kind kind;             /* KEY_NOT_SCALAR: the key's kind */
    /* ANCHOR, ALIAS: the name; TAG: the tag; UNKNOWN_KEY, DUPLICATE_KEY: the
     * key. Cut to PH_YAML_TEXT_MAX - 1 bytes (text_len is the whole length). */
    char text[PH_YAML_TEXT_MAX];
    size_t text_len;
} ph_yaml_error;

typedef struct ph_yaml_doc ph_yaml_doc;

/*
 * Reads data[0..len) (need not be NUL-terminated; a leading byte order mark
 * is the caller's to drop) as one YAML document. schema: the root's (NULL:
 * no key is unknown); limits NULL: PH_YAML_LIMITS_DEFAULT.
 * Returns PH_OK: no error, *out holds the tree (ph_yaml_root NULL for an
 * empty input); PH_E_FORMAT: *out holds at least one error, sorted by
 * position, and a tree for diagnostics only; PH_E_NOMEM: *out NULL.
 * The caller owns *out (ph_yaml_free). data and schema must outlive the
 * call only (schema pointers in errors: as long as the schema lives).
 */
ph_status ph_yaml_read(const char *data, size_t len, const ph_yaml_limits *limits,
                       const ph_yaml_schema *schema, ph_yaml_doc **out);

/* Frees *doc and sets it to NULL (NULL-safe). */
void ph_yaml_free(ph_yaml_doc **doc);

/* The root node, or NULL when the input had no document. */
const ph_yaml_node *ph_yaml_root(const ph_yaml_doc *doc);
/* Nodes in the tree (keys included). */
size_t ph_yaml_node_count(const ph_yaml_doc *doc);
/* Errors, sorted by position; i < ph_yaml_error_count. */
size_t ph_yaml_error_count(const ph_yaml_doc *doc);
const ph_yaml_error *ph_yaml_error_at(const ph_yaml_doc *doc, size_t i);

/* "yaml_syntax", "yaml_alias", ...: a stable name for each code; "unknown"
 * for a value that is not a code. */
const char *ph_yaml_code_name(ph_yaml_code code);

/* The value of key in a mapping node (first match), or NULL. */
const ph_yaml_node *ph_yaml_map_get(const ph_yaml_node *map, const char *key);

/* Whether a scalar node's text is exactly s. */
bool ph_yaml_scalar_is(const ph_yaml_node *node, const char *s);

/* The position of byte offset in data[0..len) (clamped to len), counted as
 * the reader counts: lines end at CR LF, CR, LF, NEL, LS or PS; a valid
 * UTF-8 sequence is one column, and so is each byte of an invalid one. For
 * a caller that positions its own findings in the same text. O(offset). */
ph_yaml_pos ph_yaml_pos_of_offset(const char *data, size_t len, size_t offset);

/* The length of the line break at data[i] (i < len) as the reader counts
 * them: 2 for CR LF and NEL, 3 for LS and PS, 1 for a lone CR or LF; 0 when
 * there is none. */
size_t ph_yaml_line_break_len(const char *data, size_t len, size_t i);

/* The index of key in schema's keys, or -1. */
long ph_yaml_schema_key(const ph_yaml_schema *schema, const char *key, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* PINHOLE_YAML_READER_H */
