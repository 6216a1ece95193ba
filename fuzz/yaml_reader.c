/*
 * fuzz/yaml_reader.c - the strict YAML reader (pinhole/yaml_reader.h): bytes
 * in, ph_yaml_read must neither crash nor hang, and what it returns must
 * hold together. Invariants, under small limits (so each is reached) and
 * with and without a schema:
 *   - all or nothing: PH_OK exactly when there is no error; PH_E_FORMAT
 *     with at least one error; nothing else but PH_E_NOMEM;
 *   - every error has a known code with a stable name and a position
 *     (line and column >= 1; only "too large" is about the whole input),
 *     and the errors are sorted by position;
 *   - the tree is within the limits: node count, depth, scalar length,
 *     every scalar NUL-terminated after its length;
 *   - a tree without errors holds only mappings, sequences and scalars,
 *     nothing incomplete, only scalar keys, no key twice in a mapping, and
 *     under the schema only the schema's keys; its node count is exactly
 *     the nodes the walk finds;
 *   - reading the same bytes again gives the same status and errors.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/yaml_reader.h"

#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

static const ph_yaml_limits limits = {1u << 16, 8, 512, 64, 0};

static const char *const item_keys[] = {"host", "ports", "reason"};
static const ph_yaml_schema item_schema = {"in an item", item_keys, 3, 0, NULL, NULL};
static const ph_yaml_schema items_schema = {NULL, NULL, 0, 0, NULL, &item_schema};
static const char *const root_keys[] = {"version", "items", "any"};
static const ph_yaml_schema *const root_values[] = {NULL, &items_schema, NULL};
static const ph_yaml_schema root_schema = {"at the top level", root_keys, 3, 0, root_values, NULL};

/* Walks n at depth (1 for the root); returns the nodes under and at n. */
static size_t walk(const ph_yaml_node *n, uint32_t depth, bool clean, const ph_yaml_schema *schema)
{
    size_t count = 1;
    switch (n->kind) {
    case PH_YAML_SCALAR:
        CHECK(n->len <= limits.max_scalar);
        CHECK(n->u.text[n->len] == '\0');
        CHECK(n->style >= PH_YAML_PLAIN && n->style <= PH_YAML_FOLDED);
        break;
    case PH_YAML_SEQUENCE:
        CHECK(depth <= limits.max_depth);
        CHECK(n->style == PH_YAML_BLOCK || n->style == PH_YAML_FLOW);
        for (uint32_t i = 0; i < n->len; i++)
            count += walk(&n->u.items[i], depth + 1, clean, schema ? schema->items : NULL);
        break;
    case PH_YAML_MAPPING:
        CHECK(depth <= limits.max_depth);
        CHECK(n->style == PH_YAML_BLOCK || n->style == PH_YAML_FLOW);
        for (uint32_t i = 0; i < n->len; i++) {
            const ph_yaml_node *k = &n->u.pairs[i].key;
            const ph_yaml_schema *vs = NULL;
            if (clean) {
                CHECK(k->kind == PH_YAML_SCALAR);
                for (uint32_t j = 0; j < i; j++)
                    CHECK(!(n->u.pairs[j].key.len == k->len &&
                            memcmp(n->u.pairs[j].key.u.text, k->u.text, k->len) == 0));
                if (schema && schema->keys) {
                    long idx = ph_yaml_schema_key(schema, k->u.text, k->len);
                    CHECK(idx >= 0);
                    vs = schema->values ? schema->values[idx] : NULL;
                }
            }
            count += walk(k, depth + 1, clean, NULL);
            count += walk(&n->u.pairs[i].value, depth + 1, clean, vs);
        }
        break;
    default:
        CHECK(!clean && n->kind == PH_YAML_REFUSED);
        break;
    }
    if (clean)
        CHECK(!(n->flags & PH_YAML_INCOMPLETE));
    return count;
}

static void read_once(const uint8_t *data, size_t size, const ph_yaml_schema *schema)
{
    ph_yaml_doc *doc = NULL;
    ph_status st = ph_yaml_read((const char *)data, size, &limits, schema, &doc);
    if (st == PH_E_NOMEM) {
        CHECK(doc == NULL);
        return;
    }
    CHECK(doc != NULL);
    CHECK(st == PH_OK || st == PH_E_FORMAT);
    size_t nerr = ph_yaml_error_count(doc);
    CHECK((st == PH_OK) == (nerr == 0));
    CHECK(ph_yaml_node_count(doc) <= limits.max_nodes);
    for (size_t i = 0; i < nerr; i++) {
        const ph_yaml_error *e = ph_yaml_error_at(doc, i);
        CHECK(e->code >= 1 && e->code <= PH_YAML_CODE_MAX);
        CHECK(strcmp(ph_yaml_code_name(e->code), "unknown") != 0);
        if (e->code == PH_YAML_E_TOO_LARGE)
            CHECK(e->pos.line == 0);
        else
            CHECK(e->pos.line >= 1 && e->pos.col >= 1);
        if (e->code == PH_YAML_E_DUPLICATE_KEY)
            CHECK(e->first.line >= 1 && (e->first.line < e->pos.line ||
                                         (e->first.line == e->pos.line && e->first.col < e->pos.col)));
        CHECK(memchr(e->text, '\0', sizeof e->text) != NULL);
        if (i > 0) {
            const ph_yaml_error *p = ph_yaml_error_at(doc, i - 1);
            CHECK(p->pos.line < e->pos.line || (p->pos.line == e->pos.line && p->pos.col <= e->pos.col));
        }
    }
    CHECK(ph_yaml_error_at(doc, nerr) == NULL);
    const ph_yaml_node *root = ph_yaml_root(doc);
    if (root) {
        size_t walked = walk(root, 1, st == PH_OK, schema);
        if (st == PH_OK)
            CHECK(walked == ph_yaml_node_count(doc));
        else
            CHECK(walked <= ph_yaml_node_count(doc));
    }
    /* The same bytes, the same answer. */
    ph_yaml_doc *again = NULL;
    ph_status st2 = ph_yaml_read((const char *)data, size, &limits, schema, &again);
    if (st2 != PH_E_NOMEM) {
        CHECK(st2 == st);
        CHECK(ph_yaml_error_count(again) == nerr);
        for (size_t i = 0; i < nerr; i++)
            CHECK(ph_yaml_error_at(again, i)->code == ph_yaml_error_at(doc, i)->code);
    }
    ph_yaml_free(&again);
    ph_yaml_free(&doc);
    CHECK(doc == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_once(data, size, NULL);
    read_once(data, size, &root_schema);
    return 0;
}
