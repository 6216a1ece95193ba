/*
 * yaml_reader.c - libyaml events to a bounded tree; see pinhole/yaml_reader.h.
 *
 * libyaml 0.2.5 detects no duplicate key, hands aliases and tags over as
 * ordinary events and gives reader errors (bad UTF-8, NUL) only a byte
 * offset: each is dealt with here, once, for every configuration file.
 *
 * Memory: nodes, child arrays and scalar texts live in one arena of chunks
 * freed together. While a collection is open its children wait on a stack
 * of finished nodes; at its end they are copied into one array, so each
 * node costs its own size and nothing per pointer.
 */
#include "pinhole/yaml_reader.h"

#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "pinhole/utf8.h"

/* ---- arena ---------------------------------------------------------------- */

typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    max_align_t data[];
} chunk;

#define CHUNK_MIN ((size_t)64 * 1024)

/* n bytes aligned to align (a power of two, at most 16): texts take 1,
 * node arrays 8, so a million short scalars waste nothing to padding. */
static void *arena_alloc(chunk **head, size_t n, size_t align)
{
    chunk *c = *head;
    size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0;
    if (!c || at > c->cap || c->cap - at < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = *head;
        c->used = 0;
        c->cap = cap;
        *head = c;
        at = 0;
    }
    void *p = (char *)c->data + at;
    c->used = at + n;
    return p;
}

/* ---- the document ---------------------------------------------------------- */

struct ph_yaml_doc {
    chunk *arena;
    ph_yaml_node root;
    bool has_root;
    size_t nodes;
    ph_yaml_error *errors;
    size_t nerrors, errors_cap;
};

const ph_yaml_node *ph_yaml_root(const ph_yaml_doc *doc)
{
    return doc->has_root ? &doc->root : NULL;
}

size_t ph_yaml_node_count(const ph_yaml_doc *doc)
{
    return doc->nodes;
}

size_t ph_yaml_error_count(const ph_yaml_doc *doc)
{
    return doc->nerrors;
}

const ph_yaml_error *ph_yaml_error_at(const ph_yaml_doc *doc, size_t i)
{
    return i < doc->nerrors ? &doc->errors[i] : NULL;
}

void ph_yaml_free(ph_yaml_doc **doc)
{
    if (!*doc)
        return;
    for (chunk *c = (*doc)->arena, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free((*doc)->errors);
    free(*doc);
    *doc = NULL;
}

const char *ph_yaml_code_name(ph_yaml_code code)
{
    static const char *const names[] = {
        [PH_YAML_E_SYNTAX] = "yaml_syntax",
        [PH_YAML_E_ENCODING] = "yaml_encoding",
        [PH_YAML_E_TOO_LARGE] = "yaml_too_large",
        [PH_YAML_E_TOO_DEEP] = "yaml_too_deep",
        [PH_YAML_E_TOO_MANY_NODES] = "yaml_too_many_nodes",
        [PH_YAML_E_SCALAR_TOO_LONG] = "yaml_scalar_too_long",
        [PH_YAML_E_MULTIPLE_DOCUMENTS] = "yaml_multiple_documents",
        [PH_YAML_E_ANCHOR] = "yaml_anchor",
        [PH_YAML_E_ALIAS] = "yaml_alias",
        [PH_YAML_E_TAG] = "yaml_tag",
        [PH_YAML_E_TAG_DIRECTIVE] = "yaml_tag_directive",
        [PH_YAML_E_VERSION_DIRECTIVE] = "yaml_version_directive",
        [PH_YAML_E_DUPLICATE_KEY] = "yaml_duplicate_key",
        [PH_YAML_E_KEY_NOT_SCALAR] = "yaml_key_not_scalar",
        [PH_YAML_E_UNKNOWN_KEY] = "yaml_unknown_key",
    };
    if ((int)code < 1 || (int)code > PH_YAML_CODE_MAX)
        return "unknown";
    return names[code];
}

static const char *schema_key_at(const ph_yaml_schema *s, size_t i)
{
    size_t stride = s->stride ? s->stride : sizeof(const char *);
    return *(const char *const *)(const void *)((const char *)s->keys + i * stride);
}

long ph_yaml_schema_key(const ph_yaml_schema *schema, const char *key, size_t len)
{
    if (!schema || !schema->keys)
        return -1;
    for (size_t i = 0; i < schema->nkeys; i++) {
        const char *k = schema_key_at(schema, i);
        if (strlen(k) == len && memcmp(k, key, len) == 0)
            return (long)i;
    }
    return -1;
}

bool ph_yaml_scalar_is(const ph_yaml_node *node, const char *s)
{
    return node && node->kind == PH_YAML_SCALAR && node->len == strlen(s) &&
           memcmp(node->u.text, s, node->len) == 0;
}

const ph_yaml_node *ph_yaml_map_get(const ph_yaml_node *map, const char *key)
{
    if (!map || map->kind != PH_YAML_MAPPING)
        return NULL;
    for (uint32_t i = 0; i < map->len; i++)
        if (ph_yaml_scalar_is(&map->u.pairs[i].key, key))
            return &map->u.pairs[i].value;
    return NULL;
}

/* ---- positions ------------------------------------------------------------- */

static ph_yaml_pos mark_pos(yaml_mark_t m)
{
    ph_yaml_pos p = {m.line >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)m.line + 1,
                     m.column >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)m.column + 1};
    return p;
}

/* Length of the line break at p (as libyaml's scanner counts them: CR LF, CR,
 * LF, NEL, LS, PS), or 0. */
static size_t line_break_len(const unsigned char *p, size_t avail)
{
    if (p[0] == '\n')
        return 1;
    if (p[0] == '\r')
        return avail >= 2 && p[1] == '\n' ? 2 : 1;
    if (avail >= 2 && p[0] == 0xC2 && p[1] == 0x85)
        return 2;
    if (avail >= 3 && p[0] == 0xE2 && p[1] == 0x80 && (p[2] == 0xA8 || p[2] == 0xA9))
        return 3;
    return 0;
}

size_t ph_yaml_line_break_len(const char *data, size_t len, size_t i)
{
    return i < len ? line_break_len((const unsigned char *)data + i, len - i) : 0;
}

/* Counted as libyaml's marks are, so both kinds of position agree. */
ph_yaml_pos ph_yaml_pos_of_offset(const char *text, size_t len, size_t offset)
{
    const unsigned char *data = (const unsigned char *)text;
    ph_yaml_pos pos = {1, 1};
    if (offset > len)
        offset = len;
    for (size_t i = 0; i < offset;) {
        size_t br = line_break_len(data + i, len - i);
        if (br) {
            i += br;
            pos.line++;
            pos.col = 1;
            continue;
        }
        uint32_t cp; /* an invalid byte is one column, as libyaml counts it */
        i += ph_utf8_decode(data + i, len - i, &cp);
        pos.col++;
    }
    return pos;
}

/* The offset of the first invalid UTF-8 sequence at or before limit, else limit. */
static size_t first_invalid_utf8(const unsigned char *data, size_t len, size_t limit)
{
    size_t bad = ph_utf8_first_invalid(data, len);
    return bad < limit ? bad : limit;
}

/* ---- the reader ------------------------------------------------------------ */

typedef struct frame {
    ph_yaml_node node;            /* kind, style, pos; len and u at the end */
    size_t first;                 /* its children start here on the pending stack */
    const ph_yaml_schema *schema; /* this collection's */
    long key;                     /* mapping at a value: the key's schema index (-1: none) */
} frame;

typedef struct reader {
    ph_yaml_doc *doc;
    ph_yaml_limits lim;
    const unsigned char *data;
    size_t len;
    yaml_parser_t parser;
    frame *frames;
    size_t nframes, frames_cap;
    ph_yaml_node *pending;
    size_t npending, pending_cap;
    bool nomem;
    bool stop; /* a fatal error: read no further */
} reader;

static ph_yaml_error *add_error(reader *r, ph_yaml_code code, ph_yaml_pos pos)
{
    ph_yaml_doc *d = r->doc;
    if (d->nerrors == d->errors_cap) {
        size_t cap = d->errors_cap ? d->errors_cap * 2 : 8;
        ph_yaml_error *e = realloc(d->errors, cap * sizeof *e);
        if (!e) {
            r->nomem = true;
            r->stop = true;
            return NULL;
        }
        d->errors = e;
        d->errors_cap = cap;
    }
    ph_yaml_error *e = &d->errors[d->nerrors++];
    memset(e, 0, sizeof *e);
    e->code = code;
    e->pos = pos;
    e->value = -1;
    return e;
}

static void set_text(ph_yaml_error *e, const char *s, size_t n)
{
    if (!e)
        return;
    e->text_len = n;
    if (n > PH_YAML_TEXT_MAX - 1)
        n = PH_YAML_TEXT_MAX - 1;
    memcpy(e->text, s, n);
    e->text[n] = '\0';
}

static void fatal(reader *r, ph_yaml_code code, ph_yaml_pos pos, long limit)
{
    ph_yaml_error *e = add_error(r, code, pos);
    if (e)
        e->value = limit;
    r->stop = true;
}

static void parser_error(reader *r)
{
    const yaml_parser_t *p = &r->parser;
    if (p->error == YAML_MEMORY_ERROR) {
        r->nomem = true;
        r->stop = true;
        return;
    }
    const char *problem = p->problem ? p->problem : "invalid YAML";
    ph_yaml_error *e;
    if (p->error == YAML_READER_ERROR) {
        /* For a bad UTF-8 sequence libyaml gives the offset of the byte it
         * choked on, which may be a trailing byte: point at the first byte
         * of the first invalid sequence instead. */
        size_t off = p->problem_offset;
        if (strstr(problem, "UTF-8") || strstr(problem, "Unicode"))
            off = first_invalid_utf8(r->data, r->len, off);
        e = add_error(r, PH_YAML_E_ENCODING, ph_yaml_pos_of_offset((const char *)r->data, r->len, off));
        if (e) {
            e->offset = off;
            e->value = p->problem_value;
        }
    } else {
        e = add_error(r, PH_YAML_E_SYNTAX, mark_pos(p->problem_mark));
        if (e && p->context) {
            e->context = p->context;
            e->context_line = p->context_mark.line >= UINT32_MAX - 1
                                  ? UINT32_MAX : (uint32_t)p->context_mark.line + 1;
        }
    }
    if (e)
        e->problem = problem;
    r->stop = true;
}

static bool push_pending(reader *r, const ph_yaml_node *n)
{
    if (r->npending == r->pending_cap) {
        size_t cap = r->pending_cap ? r->pending_cap * 2 : 64;
        ph_yaml_node *p = realloc(r->pending, cap * sizeof *p);
        if (!p) {
            r->nomem = r->stop = true;
            return false;
        }
        r->pending = p;
        r->pending_cap = cap;
    }
    r->pending[r->npending++] = *n;
    return true;
}

/* Whether a scalar's value is its source text as written: an escape always
 * takes more characters than the one it stands for, and folding or a block
 * spans lines, so one line and equal character counts (quotes aside) prove
 * there is none. */
static bool scalar_verbatim(const yaml_event_t *ev)
{
    yaml_scalar_style_t style = ev->data.scalar.style;
    if (ev->start_mark.line != ev->end_mark.line)
        return false;
    if (style == YAML_PLAIN_SCALAR_STYLE)
        return true;
    if (style != YAML_SINGLE_QUOTED_SCALAR_STYLE && style != YAML_DOUBLE_QUOTED_SCALAR_STYLE)
        return false;
    /* libyaml's values are valid UTF-8: characters are the bytes that do
     * not continue a sequence. */
    size_t chars = 0, n = ev->data.scalar.length;
    const unsigned char *v = ev->data.scalar.value;
    for (size_t i = 0; i < n; i++)
        chars += (v[i] & 0xC0) != 0x80;
    return ev->end_mark.column >= ev->start_mark.column &&
           ev->end_mark.column - ev->start_mark.column == chars + 2;
}

static uint8_t scalar_style(yaml_scalar_style_t s)
{
    switch (s) {
    case YAML_SINGLE_QUOTED_SCALAR_STYLE: return PH_YAML_SINGLE_QUOTED;
    case YAML_DOUBLE_QUOTED_SCALAR_STYLE: return PH_YAML_DOUBLE_QUOTED;
    case YAML_LITERAL_SCALAR_STYLE: return PH_YAML_LITERAL;
    case YAML_FOLDED_SCALAR_STYLE: return PH_YAML_FOLDED;
    default: return PH_YAML_PLAIN;
    }
}

/* The schema of a node starting now, from its parent's. */
static const ph_yaml_schema *child_schema(const reader *r)
{
    if (r->nframes == 0)
        return NULL;
    const frame *f = &r->frames[r->nframes - 1];
    const ph_yaml_schema *s = f->schema;
    if (!s)
        return NULL;
    if (f->node.kind == PH_YAML_SEQUENCE)
        return s->items;
    bool at_key = ((r->npending - f->first) % 2) == 0;
    if (at_key || !s->values)
        return NULL;
    if (!s->keys)
        return s->values[0];
    return f->key >= 0 ? s->values[f->key] : NULL;
}

/* A node that starts at a key position of the innermost mapping. */
static bool at_key(const reader *r)
{
    if (r->nframes == 0)
        return false;
    const frame *f = &r->frames[r->nframes - 1];
    return f->node.kind == PH_YAML_MAPPING && ((r->npending - f->first) % 2) == 0;
}

/* A finished node goes to its parent (or becomes the root). */
static void finish_node(reader *r, const ph_yaml_node *n)
{
    if (r->nframes == 0) {
        r->doc->root = *n;
        r->doc->has_root = true;
        return;
    }
    frame *f = &r->frames[r->nframes - 1];
    if (f->node.kind == PH_YAML_MAPPING && ((r->npending - f->first) % 2) == 0) {
        /* A key: check it against the schema. */
        f->key = -1;
        if (n->kind == PH_YAML_SCALAR && f->schema && f->schema->keys) {
            f->key = ph_yaml_schema_key(f->schema, n->u.text, n->len);
            if (f->key < 0) {
                ph_yaml_error *e = add_error(r, PH_YAML_E_UNKNOWN_KEY, n->pos);
                set_text(e, n->u.text, n->len);
                if (e)
                    e->schema = f->schema;
            }
        } else if (n->kind == PH_YAML_SEQUENCE || n->kind == PH_YAML_MAPPING) {
            ph_yaml_error *e = add_error(r, PH_YAML_E_KEY_NOT_SCALAR, n->pos);
            if (e) {
                e->schema = f->schema;
                e->kind = (ph_yaml_kind)n->kind;
            }
        }
    }
    push_pending(r, n);
}


typedef struct key_ref {
    const ph_yaml_node *key;
    uint32_t index;
} key_ref;

static int key_ref_cmp(const void *pa, const void *pb)
{
    const key_ref *a = pa, *b = pb;
    if (a->key->len != b->key->len)
        return a->key->len < b->key->len ? -1 : 1;
    int c = memcmp(a->key->u.text, b->key->u.text, a->key->len);
    if (c)
        return c;
    return (a->index > b->index) - (a->index < b->index);
}

static bool keys_equal(const ph_yaml_node *a, const ph_yaml_node *b)
{
    return a->len == b->len && memcmp(a->u.text, b->u.text, a->len) == 0;
}

static void report_duplicate(reader *r, const ph_yaml_schema *s, const ph_yaml_node *first,
                             const ph_yaml_node *again)
{
    ph_yaml_error *e = add_error(r, PH_YAML_E_DUPLICATE_KEY, again->pos);
    set_text(e, again->u.text, again->len);
    if (e) {
        e->first = first->pos;
        e->schema = s;
    }
}

/* Every scalar key the schema allows that comes again: one error per
 * repetition, pointing back at the first. Unknown keys were reported. */
static void check_duplicates(reader *r, const frame *f, const ph_yaml_pair *pairs, uint32_t n)
{
    const ph_yaml_schema *s = f->schema;
    bool known_only = s && s->keys;
    if (n <= 16) {
        for (uint32_t i = 1; i < n; i++) {
            const ph_yaml_node *k = &pairs[i].key;
            if (k->kind != PH_YAML_SCALAR || (known_only && ph_yaml_schema_key(s, k->u.text, k->len) < 0))
                continue;
            for (uint32_t j = 0; j < i; j++)
                if (pairs[j].key.kind == PH_YAML_SCALAR && keys_equal(&pairs[j].key, k)) {
                    report_duplicate(r, s, &pairs[j].key, k);
                    break;
                }
        }
        return;
    }
    key_ref *refs = malloc(n * sizeof *refs);
    if (!refs) {
        r->nomem = r->stop = true;
        return;
    }
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        const ph_yaml_node *k = &pairs[i].key;
        if (k->kind == PH_YAML_SCALAR && !(known_only && ph_yaml_schema_key(s, k->u.text, k->len) < 0))
            refs[m++] = (key_ref){k, i};
    }
    qsort(refs, m, sizeof *refs, key_ref_cmp);
    for (uint32_t i = 1, first = 0; i < m; i++) {
        if (keys_equal(refs[first].key, refs[i].key))
            report_duplicate(r, s, refs[first].key, refs[i].key);
        else
            first = i;
    }
    free(refs);
}

/* Closes the innermost collection: its children become one array. */
static void close_frame(reader *r, bool incomplete)
{
    frame f = r->frames[--r->nframes];
    size_t n = r->npending - f.first;
    if (f.node.kind == PH_YAML_MAPPING)
        n &= ~(size_t)1; /* a key whose value never came */
    ph_yaml_node node = f.node;
    node.len = (uint32_t)(f.node.kind == PH_YAML_MAPPING ? n / 2 : n);
    node.flags |= incomplete ? PH_YAML_INCOMPLETE : 0;
    if (n) {
        ph_yaml_node *arr = arena_alloc(&r->doc->arena, n * sizeof *arr, _Alignof(ph_yaml_node));
        if (!arr) {
            r->nomem = r->stop = true;
            node.len = 0;
        } else {
            memcpy(arr, r->pending + f.first, n * sizeof *arr);
            if (node.kind == PH_YAML_MAPPING) {
                node.u.pairs = (const ph_yaml_pair *)(const void *)arr;
                check_duplicates(r, &f, node.u.pairs, node.len);
            } else {
                node.u.items = arr;
            }
        }
    }
    r->npending = f.first;
    finish_node(r, &node);
}

/* Counts one more node; refuses one past the limit. */
static bool count_node(reader *r, ph_yaml_pos pos)
{
    if (r->doc->nodes >= r->lim.max_nodes) {
        fatal(r, PH_YAML_E_TOO_MANY_NODES, pos, (long)r->lim.max_nodes);
        return false;
    }
    r->doc->nodes++;
    return true;
}

static void check_properties(reader *r, ph_yaml_pos pos, const yaml_char_t *anchor,
                             const yaml_char_t *tag)
{
    if (anchor)
        set_text(add_error(r, PH_YAML_E_ANCHOR, pos), (const char *)anchor,
                 strlen((const char *)anchor));
    if (tag)
        set_text(add_error(r, PH_YAML_E_TAG, pos), (const char *)tag, strlen((const char *)tag));
}

static void on_scalar(reader *r, const yaml_event_t *e)
{
    ph_yaml_pos pos = mark_pos(e->start_mark);
    check_properties(r, pos, e->data.scalar.anchor, e->data.scalar.tag);
    if (!count_node(r, pos))
        return;
    size_t len = e->data.scalar.length;
    if (len > r->lim.max_scalar) {
        fatal(r, PH_YAML_E_SCALAR_TOO_LONG, pos, (long)r->lim.max_scalar);
        return;
    }
    char *text = arena_alloc(&r->doc->arena, len + 1, 1);
    if (!text) {
        r->nomem = r->stop = true;
        return;
    }
    memcpy(text, e->data.scalar.value, len);
    text[len] = '\0';
    ph_yaml_node n = {.kind = PH_YAML_SCALAR, .style = scalar_style(e->data.scalar.style),
                      .flags = scalar_verbatim(e) ? PH_YAML_VERBATIM : 0, .pos = pos,
                      .len = (uint32_t)len, .u.text = text};
    finish_node(r, &n);
}

static void on_collection_start(reader *r, const yaml_event_t *e, ph_yaml_kind kind)
{
    ph_yaml_pos pos = mark_pos(e->start_mark);
    bool flow;
    if (kind == PH_YAML_MAPPING) {
        check_properties(r, pos, e->data.mapping_start.anchor, e->data.mapping_start.tag);
        flow = e->data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
    } else {
        check_properties(r, pos, e->data.sequence_start.anchor, e->data.sequence_start.tag);
        flow = e->data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE;
    }
    /* libyaml's scanner walks its whole stack of flow levels for every
     * token: unbounded nesting would make it quadratic. Stop here. */
    if (r->nframes >= r->lim.max_depth) {
        fatal(r, PH_YAML_E_TOO_DEEP, pos, (long)r->lim.max_depth);
        return;
    }
    if (!count_node(r, pos))
        return;
    if (r->nframes == r->frames_cap) {
        size_t cap = r->frames_cap ? r->frames_cap * 2 : 16;
        frame *f = realloc(r->frames, cap * sizeof *f);
        if (!f) {
            r->nomem = r->stop = true;
            return;
        }
        r->frames = f;
        r->frames_cap = cap;
    }
    const ph_yaml_schema *s = at_key(r) ? NULL : child_schema(r);
    frame f = {.node = {.kind = (uint8_t)kind, .style = flow ? PH_YAML_FLOW : PH_YAML_BLOCK,
                        .pos = pos},
               .first = r->npending, .schema = s, .key = -1};
    r->frames[r->nframes++] = f;
}

static void on_event(reader *r, const yaml_event_t *e, const ph_yaml_schema *root_schema,
                     unsigned *documents)
{
    switch (e->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++*documents > 1) {
            fatal(r, PH_YAML_E_MULTIPLE_DOCUMENTS, mark_pos(e->start_mark), -1);
            return;
        }
        if (e->data.document_start.version_directive &&
            !(r->lim.flags & PH_YAML_ACCEPT_VERSION_DIRECTIVE))
            add_error(r, PH_YAML_E_VERSION_DIRECTIVE, mark_pos(e->start_mark));
        if (e->data.document_start.tag_directives.start != e->data.document_start.tag_directives.end)
            add_error(r, PH_YAML_E_TAG_DIRECTIVE, mark_pos(e->start_mark));
        break;
    case YAML_SCALAR_EVENT:
        on_scalar(r, e);
        break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool root = r->nframes == 0;
        on_collection_start(r, e, e->type == YAML_MAPPING_START_EVENT ? PH_YAML_MAPPING
                                                                       : PH_YAML_SEQUENCE);
        if (root && r->nframes == 1)
            r->frames[0].schema = root_schema;
        break;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (r->nframes > 0)
            close_frame(r, false);
        break;
    case YAML_ALIAS_EVENT: {
        ph_yaml_pos pos = mark_pos(e->start_mark);
        const char *a = (const char *)e->data.alias.anchor;
        set_text(add_error(r, PH_YAML_E_ALIAS, pos), a, strlen(a));
        if (!count_node(r, pos))
            return;
        ph_yaml_node n = {.kind = PH_YAML_REFUSED, .pos = pos, .u.text = ""};
        finish_node(r, &n);
        break;
    }
    default:
        break;
    }
}

static int compare_errors(const void *pa, const void *pb)
{
    const ph_yaml_error *a = pa, *b = pb;
    if (a->pos.line != b->pos.line)
        return a->pos.line < b->pos.line ? -1 : 1;
    if (a->pos.col != b->pos.col)
        return a->pos.col < b->pos.col ? -1 : 1;
    return (a->code > b->code) - (a->code < b->code);
}

ph_status ph_yaml_read(const char *data, size_t len, const ph_yaml_limits *limits,
                       const ph_yaml_schema *schema, ph_yaml_doc **out)
{
    *out = NULL;
    ph_yaml_doc *doc = calloc(1, sizeof *doc);
    if (!doc)
        return PH_E_NOMEM;
    reader r = {.doc = doc, .lim = limits ? *limits : PH_YAML_LIMITS_DEFAULT,
                .data = (const unsigned char *)data, .len = len};
    if (len > r.lim.max_bytes) {
        fatal(&r, PH_YAML_E_TOO_LARGE, (ph_yaml_pos){0, 0}, (long)r.lim.max_bytes);
    } else if (!yaml_parser_initialize(&r.parser)) {
        r.nomem = true;
    } else {
        yaml_parser_set_input_string(&r.parser, r.data, len);
        /* Never guess UTF-16 from a byte order mark: positions are counted
         * on UTF-8. */
        yaml_parser_set_encoding(&r.parser, YAML_UTF8_ENCODING);
        unsigned documents = 0;
        while (!r.stop) {
            yaml_event_t e;
            if (!yaml_parser_parse(&r.parser, &e)) {
                parser_error(&r);
                break;
            }
            bool end = e.type == YAML_STREAM_END_EVENT;
            on_event(&r, &e, schema, &documents);
            yaml_event_delete(&e);
            if (end)
                break;
        }
        yaml_parser_delete(&r.parser);
        while (r.nframes > 0 && !r.nomem)
            close_frame(&r, true);
    }
    free(r.frames);
    free(r.pending);
    if (r.nomem) {
        ph_yaml_free(&doc);
        return PH_E_NOMEM;
    }
    if (doc->nerrors > 1) {
        /* Stable: equal positions keep their code order, then event order. */
        qsort(doc->errors, doc->nerrors, sizeof *doc->errors, compare_errors);
    }
    *out = doc;
    return doc->nerrors ? PH_E_FORMAT : PH_OK;
}
