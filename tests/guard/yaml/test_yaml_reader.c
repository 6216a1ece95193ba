/* test_yaml_reader.c - the strict YAML reader (pinhole/yaml_reader.h): the
 * tree it builds, each refusal with its code and position, the limits, and
 * that a load with an error is a failure. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/yaml_reader.h"

static const char *const item_keys[] = {"host", "ports"};
static const ph_yaml_schema item_schema = {"in an item", item_keys, 2, 0, NULL, NULL};
static const ph_yaml_schema items_schema = {NULL, NULL, 0, 0, NULL, &item_schema};
static const char *const root_keys[] = {"version", "items"};
static const ph_yaml_schema *const root_values[] = {NULL, &items_schema};
static const ph_yaml_schema root_schema = {"at the top level", root_keys, 2, 0, root_values, NULL};

/* Reads text; expects exactly one error with code at line:col (the first
 * error, when several: n is how many there must be). */
static void expect_errors(const char *text, const ph_yaml_limits *lim, const ph_yaml_schema *schema,
                          size_t n, ph_yaml_code code, uint32_t line, uint32_t col)
{
    ph_yaml_doc *doc = NULL;
    assert_int_equal(ph_yaml_read(text, strlen(text), lim, schema, &doc), PH_E_FORMAT);
    if (ph_yaml_error_count(doc) != n)
        fail_msg("%zu errors for %s, want %zu (first: %s)", ph_yaml_error_count(doc), text, n,
                 ph_yaml_code_name(ph_yaml_error_at(doc, 0)->code));
    const ph_yaml_error *e = ph_yaml_error_at(doc, 0);
    if (e->code != code || e->pos.line != line || e->pos.col != col)
        fail_msg("%s at %u:%u for '%s', want %s at %u:%u", ph_yaml_code_name(e->code),
                 e->pos.line, e->pos.col, text, ph_yaml_code_name(code), line, col);
    ph_yaml_free(&doc);
    assert_null(doc);
}

static void expect_error(const char *text, ph_yaml_code code, uint32_t line, uint32_t col)
{
    expect_errors(text, NULL, &root_schema, 1, code, line, col);
}

static void test_a_good_document_is_a_tree_with_positions_and_styles(void **state)
{
    (void)state;
    const char text[] = "version: 1\nitems:\n  - host: a.example.com\n    ports: [443, \"80\"]\n"
                        "  - {host: 'b', ports: []}\n";
    ph_yaml_doc *doc = NULL;
    assert_int_equal(ph_yaml_read(text, sizeof text - 1, NULL, &root_schema, &doc), PH_OK);
    assert_int_equal(ph_yaml_error_count(doc), 0);
    const ph_yaml_node *root = ph_yaml_root(doc);
    assert_non_null(root);
    assert_int_equal(root->kind, PH_YAML_MAPPING);
    assert_int_equal(root->style, PH_YAML_BLOCK);
    assert_int_equal(root->len, 2);
    assert_true(ph_yaml_scalar_is(ph_yaml_map_get(root, "version"), "1"));
    const ph_yaml_node *items = ph_yaml_map_get(root, "items");
    assert_int_equal(items->kind, PH_YAML_SEQUENCE);
    assert_int_equal(items->len, 2);
    const ph_yaml_node *ports = ph_yaml_map_get(&items->u.items[0], "ports");
    assert_int_equal(ports->style, PH_YAML_FLOW);
    assert_int_equal(ports->pos.line, 4);
    assert_int_equal(ports->pos.col, 12);
    assert_int_equal(ports->u.items[0].style, PH_YAML_PLAIN);
    assert_int_equal(ports->u.items[1].style, PH_YAML_DOUBLE_QUOTED);
    assert_true(ports->u.items[1].flags & PH_YAML_VERBATIM);
    assert_int_equal(ports->u.items[1].pos.col, 18);
    const ph_yaml_node *host = ph_yaml_map_get(&items->u.items[1], "host");
    assert_int_equal(host->style, PH_YAML_SINGLE_QUOTED);
    assert_int_equal(host->pos.line, 5);
    assert_int_equal(host->pos.col, 12);
    /* root, 2 keys, version's value, items, 2 items, 4 keys, 2 hosts, 2 port lists, 2 ports */
    assert_int_equal(ph_yaml_node_count(doc), 17);
    ph_yaml_free(&doc);
    ph_yaml_free(&doc); /* NULL-safe */
}

static void test_escapes_and_blocks_are_not_verbatim(void **state)
{
    (void)state;
    const char text[] = "a: \"a\\x2eb\"\nb: |\n  x\nc: 'it''s'\nd: plain\n";
    ph_yaml_doc *doc = NULL;
    assert_int_equal(ph_yaml_read(text, sizeof text - 1, NULL, NULL, &doc), PH_OK);
    const ph_yaml_node *root = ph_yaml_root(doc);
    assert_string_equal(ph_yaml_map_get(root, "a")->u.text, "a.b");
    assert_false(ph_yaml_map_get(root, "a")->flags & PH_YAML_VERBATIM);
    assert_int_equal(ph_yaml_map_get(root, "b")->style, PH_YAML_LITERAL);
    assert_false(ph_yaml_map_get(root, "b")->flags & PH_YAML_VERBATIM);
    assert_false(ph_yaml_map_get(root, "c")->flags & PH_YAML_VERBATIM);
    assert_true(ph_yaml_map_get(root, "d")->flags & PH_YAML_VERBATIM);
    ph_yaml_free(&doc);
}

static void test_each_refusal_has_its_code_and_position(void **state)
{
    (void)state;
    expect_error("version: &v 1\n", PH_YAML_E_ANCHOR, 1, 10);
    expect_errors("version: 1\nitems: *i\n", NULL, &root_schema, 1, PH_YAML_E_ALIAS, 2, 8);
    expect_error("version: !!str 1\n", PH_YAML_E_TAG, 1, 10);
    expect_error("version: !local 1\n", PH_YAML_E_TAG, 1, 10);
    expect_error("items: !!seq []\n", PH_YAML_E_TAG, 1, 8);
    expect_error("%TAG !e! tag:example.com,2000:\n---\nversion: 1\n", PH_YAML_E_TAG_DIRECTIVE, 1, 1);
    expect_error("%YAML 1.2\n---\nversion: 1\n", PH_YAML_E_VERSION_DIRECTIVE, 1, 1);
    expect_error("version: 1\n---\nversion: 1\n", PH_YAML_E_MULTIPLE_DOCUMENTS, 2, 1);
    expect_error("version: 1\nversion: 2\n", PH_YAML_E_DUPLICATE_KEY, 2, 1);
    expect_error("items:\n  - {host: a, host: b}\n", PH_YAML_E_DUPLICATE_KEY, 2, 15);
    expect_error("? [version]\n: 1\n", PH_YAML_E_KEY_NOT_SCALAR, 1, 3);
    expect_error("verison: 1\n", PH_YAML_E_UNKNOWN_KEY, 1, 1);
    expect_error("items:\n  - {host: a, prots: [1]}\n", PH_YAML_E_UNKNOWN_KEY, 2, 15);
    expect_error("version: 1\n\tx: 2\n", PH_YAML_E_SYNTAX, 2, 1);
    expect_error("version: \"\xff\"\n", PH_YAML_E_ENCODING, 1, 11);
    /* A trailing byte of a broken sequence: the error is at its first byte. */
    expect_error("version: \"\xc3\xa9\xe2\x82\"\n", PH_YAML_E_ENCODING, 1, 12);
}

static void test_every_error_is_reported_and_sorted(void **state)
{
    (void)state;
    const char text[] = "items:\n  - {host: !!str a, host: b, bad: 1}\nversion: &v 1\n";
    ph_yaml_doc *doc = NULL;
    assert_int_equal(ph_yaml_read(text, sizeof text - 1, NULL, &root_schema, &doc), PH_E_FORMAT);
    assert_int_equal(ph_yaml_error_count(doc), 4);
    const ph_yaml_code want[] = {PH_YAML_E_TAG, PH_YAML_E_DUPLICATE_KEY, PH_YAML_E_UNKNOWN_KEY,
                                 PH_YAML_E_ANCHOR};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ph_yaml_error_at(doc, i)->code, want[i]);
    const ph_yaml_error *dup = ph_yaml_error_at(doc, 1);
    assert_string_equal(dup->text, "host");
    assert_int_equal(dup->first.line, 2);
    assert_int_equal(dup->first.col, 6);
    assert_ptr_equal(dup->schema, &item_schema);
    assert_string_equal(ph_yaml_error_at(doc, 2)->text, "bad");
    assert_string_equal(ph_yaml_error_at(doc, 3)->text, "v");
    assert_null(ph_yaml_error_at(doc, 4));
    ph_yaml_free(&doc);
}

static void test_limits(void **state)
{
    (void)state;
    ph_yaml_limits lim = {64, 3, 6, 4, 0};
    expect_errors("a: [[[1]]]\n", &lim, NULL, 1, PH_YAML_E_TOO_DEEP, 1, 6);
    expect_errors("a: [1, 2, 3, 4, 5]\n", &lim, NULL, 1, PH_YAML_E_TOO_MANY_NODES, 1, 14);
    expect_errors("a: abcde\n", &lim, NULL, 1, PH_YAML_E_SCALAR_TOO_LONG, 1, 4);
    ph_yaml_doc *doc = NULL;
    char big[100];
    memset(big, 'a', sizeof big);
    assert_int_equal(ph_yaml_read(big, sizeof big, &lim, NULL, &doc), PH_E_FORMAT);
    assert_int_equal(ph_yaml_error_at(doc, 0)->code, PH_YAML_E_TOO_LARGE);
    assert_int_equal(ph_yaml_error_at(doc, 0)->pos.line, 0);
    assert_null(ph_yaml_root(doc));
    ph_yaml_free(&doc);
    /* Deep flow nesting stops at the limit, in linear time. */
    size_t n = 200000;
    char *deep = malloc(2 * n + 1);
    assert_non_null(deep);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    expect_errors(deep, NULL, NULL, 1, PH_YAML_E_TOO_DEEP, 1, 65);
    free(deep);
}

static void test_a_stopped_read_marks_what_is_incomplete(void **state)
{
    (void)state;
    const char text[] = "version: 1\nitems:\n  - {host: a, ports: [1\n";
    ph_yaml_doc *doc = NULL;
    assert_int_equal(ph_yaml_read(text, sizeof text - 1, NULL, &root_schema, &doc), PH_E_FORMAT);
    assert_int_equal(ph_yaml_error_at(doc, 0)->code, PH_YAML_E_SYNTAX);
    const ph_yaml_node *root = ph_yaml_root(doc);
    assert_non_null(root);
    assert_true(root->flags & PH_YAML_INCOMPLETE);
    assert_true(ph_yaml_scalar_is(ph_yaml_map_get(root, "version"), "1"));
    const ph_yaml_node *items = ph_yaml_map_get(root, "items");
    assert_true(items->flags & PH_YAML_INCOMPLETE);
    ph_yaml_free(&doc);
    /* An accepted %YAML line, when the caller asks for it. */
    ph_yaml_limits lim = PH_YAML_LIMITS_DEFAULT;
    lim.flags = PH_YAML_ACCEPT_VERSION_DIRECTIVE;
    const char v[] = "%YAML 1.1\n---\nversion: 1\n";
    assert_int_equal(ph_yaml_read(v, sizeof v - 1, &lim, &root_schema, &doc), PH_OK);
    ph_yaml_free(&doc);
    /* Nothing at all is no document, not an error. */
    assert_int_equal(ph_yaml_read("", 0, NULL, &root_schema, &doc), PH_OK);
    assert_null(ph_yaml_root(doc));
    ph_yaml_free(&doc);
}

static void test_code_names_are_stable(void **state)
{
    (void)state;
    assert_string_equal(ph_yaml_code_name(PH_YAML_E_ALIAS), "yaml_alias");
    assert_string_equal(ph_yaml_code_name(PH_YAML_E_UNKNOWN_KEY), "yaml_unknown_key");
    assert_string_equal(ph_yaml_code_name((ph_yaml_code)0), "unknown");
    assert_string_equal(ph_yaml_code_name((ph_yaml_code)(PH_YAML_CODE_MAX + 1)), "unknown");
    for (int c = 1; c <= PH_YAML_CODE_MAX; c++)
        assert_string_not_equal(ph_yaml_code_name((ph_yaml_code)c), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_good_document_is_a_tree_with_positions_and_styles),
        cmocka_unit_test(test_escapes_and_blocks_are_not_verbatim),
        cmocka_unit_test(test_each_refusal_has_its_code_and_position),
        cmocka_unit_test(test_every_error_is_reported_and_sorted),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_a_stopped_read_marks_what_is_incomplete),
        cmocka_unit_test(test_code_names_are_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
