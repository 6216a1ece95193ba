/* yaml_walk.c - strict walking of libyaml events; see yaml_walk.h. */
#include "yaml_walk.h"

#include <stdio.h>
#include <string.h>

#include "pinhole/host.h"
#include "suggest.h"

pc_pos pc_mark_pos(yaml_mark_t m)
{
    pc_pos p = {m.line >= UINT32_MAX ? UINT32_MAX : (uint32_t)m.line + 1,
                m.column >= UINT32_MAX ? UINT32_MAX : (uint32_t)m.column + 1};
    return p;
}

pc_pos pc_ev_pos(const pc_walker *w)
{
    return pc_mark_pos(w->ev.start_mark);
}

static void report_parser_error(pc_walker *w)
{
    pc_loader *L = w->L;
    const yaml_parser_t *p = &w->parser;
    const char *problem = p->problem ? p->problem : "unknown error";
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        L->nomem = true;
        break;
    case YAML_READER_ERROR: {
        /* libyaml gives only a byte offset here; count lines and characters
         * ourselves (source_map.c) so the column is right after UTF-8. */
        size_t offset = p->problem_offset;
        /* For a bad UTF-8 sequence libyaml gives the offset of the byte it
         * choked on, which may be a trailing byte; point at the first byte
         * of the first invalid sequence instead. */
        if (strstr(problem, "UTF-8") || strstr(problem, "Unicode"))
            offset = pc_first_invalid_utf8(L->src.data, L->src.len, offset);
        pc_pos pos = pc_source_pos_of_offset(&L->src, offset);
        const char *help = "save the file as UTF-8 text without control characters";
        if (strstr(problem, "UTF-8"))
            pc_report(L, PC_E_ENCODING, pos, help, "the file is not valid UTF-8: %s", problem);
        else if (p->problem_value >= 0)
            pc_report(L, PC_E_ENCODING, pos, help, "%s (U+%04X)", problem,
                      (unsigned)p->problem_value);
        else
            pc_report(L, PC_E_ENCODING, pos, help, "%s", problem);
        break;
    }
    default:
        if (p->context)
            /* `host: *.example.com` unquoted reads as an alias. */
            pc_report(L, PC_E_YAML_SYNTAX, pc_mark_pos(p->problem_mark),
                      strstr(p->context, "alias") ? "quote a wildcard host: \"*.example.com\"" : NULL,
                      "%s %s (line %zu)", problem, p->context, p->context_mark.line + 1);
        else
            pc_report(L, PC_E_YAML_SYNTAX, pc_mark_pos(p->problem_mark), NULL, "%s", problem);
        break;
    }
}

/* Advances to the next event, refusing anchors, tags and aliases on the way. */
bool pc_walk_next(pc_walker *w)
{
    if (w->have_ev)
        yaml_event_delete(&w->ev);
    w->have_ev = false;
    if (w->fatal)
        return false;
    if (!yaml_parser_parse(&w->parser, &w->ev)) {
        report_parser_error(w);
        w->fatal = true;
        return false;
    }
    w->have_ev = true;
    const yaml_event_t *e = &w->ev;
    const yaml_char_t *anchor = NULL, *tag = NULL;
    switch (e->type) {
    case YAML_SCALAR_EVENT:
        anchor = e->data.scalar.anchor;
        tag = e->data.scalar.tag;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = e->data.sequence_start.anchor;
        tag = e->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = e->data.mapping_start.anchor;
        tag = e->data.mapping_start.tag;
        break;
    case YAML_ALIAS_EVENT: {
        char q[PC_QUOTE_MAX];
        const char *a = (const char *)e->data.alias.anchor;
        pc_report(w->L, PC_E_ALIAS, pc_ev_pos(w), "write the value out in full",
                  "alias '*%s': anchors and aliases are not allowed", pc_quote(q, sizeof q, a, strlen(a)));
        break;
    }
    case YAML_DOCUMENT_START_EVENT:
        if (e->data.document_start.tag_directives.start != e->data.document_start.tag_directives.end)
            pc_report(w->L, PC_E_TAG, pc_ev_pos(w), "remove the %%TAG directive",
                      "%%TAG directives are not allowed");
        break;
    default:
        break;
    }
    char q[PC_QUOTE_MAX];
    if (anchor)
        pc_report(w->L, PC_E_ANCHOR, pc_ev_pos(w), "remove the anchor and write values out in full",
                  "anchor '&%s': anchors and aliases are not allowed",
                  pc_quote(q, sizeof q, (const char *)anchor, strlen((const char *)anchor)));
    if (tag)
        pc_report(w->L, PC_E_TAG, pc_ev_pos(w), "remove the tag; values are typed by the grammar",
                  "tag '%s' is not allowed",
                  pc_quote(q, sizeof q, (const char *)tag, strlen((const char *)tag)));
    return true;
}

/* The current event starts a node: consume the whole node. */
bool pc_walk_skip(pc_walker *w)
{
    yaml_event_type_t t = w->ev.type;
    if (t != YAML_SEQUENCE_START_EVENT && t != YAML_MAPPING_START_EVENT)
        return !w->fatal;
    size_t depth = 1;
    while (depth > 0) {
        if (!pc_walk_next(w))
            return false;
        switch (w->ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            /* libyaml's scanner walks its whole stack of flow levels for
             * every token: unbounded nesting ("[[[[...") would make it
             * quadratic. No allowlist nests this deep; stop here. */
            if (++depth > PC_MAX_NESTING) {
                pc_report(w->L, PC_E_NESTING, pc_ev_pos(w), NULL,
                          "YAML nested more than %u levels deep", PC_MAX_NESTING);
                w->fatal = true;
                return false;
            }
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        default:
            break;
        }
    }
    return true;
}

const char *pc_node_kind(const pc_walker *w)
{
    switch (w->ev.type) {
    case YAML_SCALAR_EVENT: return "a string";
    case YAML_SEQUENCE_START_EVENT: return "a sequence";
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_ALIAS_EVENT: return "an alias";
    default: return "nothing";
    }
}

/* Whether the scalar's value is its source text as written. An escape
 * ("\x2e", "\u002e", '') always takes more characters than the one it
 * stands for, and folding or a block scalar spans lines, so one line and
 * equal character counts (quotes aside) prove there is none. */
static bool scalar_literal(const yaml_event_t *ev)
{
    yaml_scalar_style_t style = ev->data.scalar.style;
    if (ev->start_mark.line != ev->end_mark.line)
        return false;
    if (style == YAML_PLAIN_SCALAR_STYLE)
        return true;
    if (style != YAML_SINGLE_QUOTED_SCALAR_STYLE && style != YAML_DOUBLE_QUOTED_SCALAR_STYLE)
        return false;
    /* Characters, as the marks count them: one per byte for ASCII (nearly
     * every scalar of a policy, and this runs for each one). */
    size_t chars = 0, n = ev->data.scalar.length;
    const unsigned char *v = ev->data.scalar.value;
    size_t i = 0;
    while (i < n && v[i] < 0x80)
        i++;
    chars = i;
    for (uint32_t cp; i < n; chars++)
        i += ph_utf8_decode(v + i, n - i, &cp);
    return ev->end_mark.column >= ev->start_mark.column &&
           ev->end_mark.column - ev->start_mark.column == chars + 2;
}

pc_scalar pc_scalar_of(const pc_walker *w)
{
    pc_scalar s = {(const char *)w->ev.data.scalar.value, w->ev.data.scalar.length,
                   w->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE, scalar_literal(&w->ev),
                   pc_ev_pos(w)};
    return s;
}

bool pc_scalar_require_literal(pc_loader *L, const pc_scalar *s, const char *what)
{
    if (s->literal)
        return true;
    char q[PC_QUOTE_MAX], help[PC_QUOTE_MAX + 64];
    snprintf(help, sizeof help, "write it out on one line as it is: \"%s\"", pc_quote_scalar(q, s));
    pc_report(L, PC_E_NOT_LITERAL, s->pos, help,
              "%s must be written literally: no escape sequences, line breaks or block scalars",
              what);
    return false;
}

static bool word_in(const pc_scalar *s, const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s->len == strlen(words[i]) && memcmp(s->value, words[i], s->len) == 0)
            return true;
    return false;
}

/* A plain empty value, `~` or `null`: YAML's ways of writing nothing. */
bool pc_scalar_is_null(const pc_scalar *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    return s->plain && word_in(s, nulls, sizeof nulls / sizeof *nulls);
}

static bool all_of(const char *p, size_t n, const char *set)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!p[i] || !strchr(set, p[i]))
            return false;
    return true;
}

/* YAML 1.1 and 1.2 numbers: [-+] then 0x.., 0o.., 0b.., 0.. (octal),
 * digits with '_' (1.1), sexagesimal d:ss, or a float with '.', exponent,
 * .inf or .nan. */
static bool yaml_number(const char *p, size_t n)
{
    static const char *const special[] = {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"};
    if (n > 0 && (p[0] == '-' || p[0] == '+'))
        p++, n--;
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        if (n == strlen(special[i]) && memcmp(p, special[i], n) == 0)
            return true;
    if (n > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        return all_of(p + 2, n - 2, "0123456789abcdefABCDEF_");
    if (n > 2 && p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
        return all_of(p + 2, n - 2, "01234567_");
    if (n > 2 && p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
        return all_of(p + 2, n - 2, "01_");
    /* Mantissa: digits, '_', ':' (sexagesimal) and at most one '.', with at
     * least one digit; then an optional exponent. */
    size_t i = 0, digits = 0, dots = 0;
    for (; i < n && (ph_is_digit((unsigned char)p[i]) || p[i] == '_' || p[i] == ':' || p[i] == '.'); i++) {
        digits += ph_is_digit((unsigned char)p[i]);
        dots += p[i] == '.';
    }
    if (digits == 0 || dots > 1 || p[0] == '_' || p[0] == ':')
        return false;
    if (i == n)
        return true;
    if (p[i] != 'e' && p[i] != 'E')
        return false;
    i++;
    if (i < n && (p[i] == '-' || p[i] == '+'))
        i++;
    return all_of(p + i, n - i, "0123456789");
}

const char *pc_scalar_yaml_type(const pc_scalar *s)
{
    static const char *const booleans[] = {
        "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
        "on", "On", "ON", "off", "Off", "OFF", "y", "Y", "n", "N"};
    if (!s->plain)
        return NULL;
    if (pc_scalar_is_null(s))
        return "null";
    if (word_in(s, booleans, sizeof booleans / sizeof *booleans))
        return "a boolean";
    if (yaml_number(s->value, s->len))
        return "a number";
    return NULL;
}

/* Reports a node of the wrong kind (aliases were already reported) and skips it. */
bool pc_walk_wrong_type(pc_walker *w, const char *what, const char *expected, const char *help)
{
    if (w->ev.type != YAML_ALIAS_EVENT)
        pc_report(w->L, PC_E_TYPE, pc_ev_pos(w), help, "%s must be %s, not %s", what, expected,
                  pc_node_kind(w));
    return pc_walk_skip(w);
}

/* ------------------------------------------------------------------ */
/* Mappings with a fixed set of keys                                   */

bool pc_key_missing(const pc_key_set *ks, int key)
{
    return !((ks->seen | ks->suggested) & (1u << key));
}

int pc_read_key(pc_walker *w, pc_key_set *ks, pc_pos *key_pos)
{
    *key_pos = pc_ev_pos(w);
    if (w->ev.type != YAML_SCALAR_EVENT) {
        if (!pc_walk_wrong_type(w, "a key", "a string", NULL))
            return -2;
        return -1;
    }
    pc_scalar k = pc_scalar_of(w);
    char q[PC_QUOTE_MAX];
    for (size_t i = 0; i < ks->n; i++) {
        if (k.len == strlen(ks->names[i]) && memcmp(k.value, ks->names[i], k.len) == 0) {
            if (ks->seen & (1u << i)) {
                pc_report(w->L, PC_E_DUPLICATE_KEY, k.pos, "remove one of them",
                          "duplicate key '%s' %s (first at line %u)", ks->names[i], ks->where,
                          ks->first[i].line);
                return -1;
            }
            ks->seen |= 1u << i;
            ks->first[i] = k.pos;
            /* Reported, but the key still counts: its value is checked
             * and no "missing key" follows. */
            (void)pc_scalar_require_literal(w->L, &k, "a key");
            return (int)i;
        }
    }
    if (k.len == 4 && memcmp(k.value, "mode", 4) == 0) {
        pc_report(w->L, PC_E_MODE, k.pos,
                  "remove it and list every destination as a rule with host and ports",
                  "'mode' is not a key: there is no open mode, only listed destinations");
        return -1;
    }
    if (k.len == 2 && memcmp(k.value, "<<", 2) == 0) {
        pc_report(w->L, PC_E_UNKNOWN_KEY, k.pos, "write the keys out in full in each mapping",
                  "merge key '<<' %s: merges, anchors and aliases are not allowed", ks->where);
        return -1;
    }
    char help[160];
    const char *guess = NULL;
    if (k.len <= KEY_MAX && memchr(k.value, '\0', k.len) == NULL) {
        char word[KEY_MAX + 1];
        memcpy(word, k.value, k.len);
        word[k.len] = '\0';
        guess = pc_suggest(word, ks->names, ks->n);
    }
    if (guess) {
        snprintf(help, sizeof help, "did you mean '%s'?", guess);
        for (size_t i = 0; i < ks->n; i++)
            if (ks->names[i] == guess)
                ks->suggested |= 1u << i;
    }
    else {
        size_t o = (size_t)snprintf(help, sizeof help, "the keys here are");
        for (size_t i = 0; i < ks->n && o < sizeof help; i++)
            o += (size_t)snprintf(help + o, sizeof help - o, "%s '%s'", i ? "," : "", ks->names[i]);
    }
    pc_report(w->L, PC_E_UNKNOWN_KEY, k.pos, help, "unknown key '%s' %s",
              pc_quote(q, sizeof q, k.value, k.len), ks->where);
    return -1;
}

bool pc_walk_mapping(pc_walker *w, pc_key_set *ks, pc_value_fn on_value, void *ctx, bool *empty)
{
    *empty = true;
    for (;;) {
        if (!pc_walk_next(w))
            return false;
        if (w->ev.type == YAML_MAPPING_END_EVENT)
            return true;
        *empty = false;
        pc_pos key_pos;
        int key = pc_read_key(w, ks, &key_pos);
        if (key == -2 || !pc_walk_next(w))
            return false;
        if (key < 0) {
            if (!pc_walk_skip(w))
                return false;
        } else if (!on_value(w, ctx, key, key_pos)) {
            return false;
        }
    }
}
