/*
 * test_check_formats.c - one file with several errors printed in each format
 * (text, JSON, SARIF, GitHub) matches its golden output byte for byte, and
 * the machine formats have the structure their consumers need.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"
#include "test_support.h"

#define DIR "tests/data/allowlists/formats/"

static char *print_format(pc_diag_format format, pc_diagnostics *d)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(pc_diagnostics_print(out, d, format), PH_OK);
    fclose(out);
    return text;
}

static void load_several_errors(pc_diagnostics *d)
{
    pc_diagnostics_init(d);
    pc_policy *p = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s", ph_test_source_path(DIR "several-errors.yaml"));
    assert_int_equal(pc_policy_load_file(path, "several-errors.yaml", &p, d), PH_E_FORMAT);
    assert_null(p);
    assert_true(d->errors >= 5);
    assert_int_equal(d->warnings, 1);
}

static void check_golden(const char *format_name)
{
    pc_diag_format f;
    assert_true(pc_diag_format_parse(format_name, &f));
    pc_diagnostics d;
    load_several_errors(&d);
    char *got = print_format(f, &d);
    char rel[256];
    snprintf(rel, sizeof rel, DIR "several-errors.%s", format_name);
    char *want = ph_test_read_file(ph_test_source_path(rel), NULL);
    assert_non_null(want);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "--- expected\n%s--- got\n%s", want, got);
    assert_string_equal(got, want);
    free(got);
    free(want);
    pc_diagnostics_free(&d);
}

static void test_text_golden(void **s) { (void)s; check_golden("text"); }
static void test_json_golden(void **s) { (void)s; check_golden("json"); }
static void test_sarif_golden(void **s) { (void)s; check_golden("sarif"); }
static void test_github_golden(void **s) { (void)s; check_golden("github"); }

static void test_unknown_format_is_refused(void **s)
{
    (void)s;
    pc_diag_format f = PC_FORMAT_TEXT;
    assert_false(pc_diag_format_parse("xml", &f));
    assert_false(pc_diag_format_parse("", &f));
    assert_false(pc_diag_format_parse("JSON", &f));
}

static void test_json_counts_and_fields(void **s)
{
    (void)s;
    pc_diagnostics d;
    load_several_errors(&d);
    char *text = print_format(PC_FORMAT_JSON, &d);
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "pinhole-policyc-check/1");
    assert_int_equal(json_integer_value(json_object_get(doc, "errors")), (json_int_t)d.errors);
    json_t *list = json_object_get(doc, "diagnostics");
    assert_int_equal(json_array_size(list), d.count);
    for (size_t i = 0; i < d.count; i++) {
        json_t *x = json_array_get(list, i);
        assert_int_equal(json_integer_value(json_object_get(x, "line")), d.items[i].line);
        assert_int_equal(json_integer_value(json_object_get(x, "column")), d.items[i].col);
        assert_non_null(json_string_value(json_object_get(x, "message")));
        assert_int_equal(strlen(json_string_value(json_object_get(x, "code"))), 5);
    }
    json_decref(doc);
    free(text);
    pc_diagnostics_free(&d);
}

static void test_sarif_structure(void **s)
{
    (void)s;
    pc_diagnostics d;
    load_several_errors(&d);
    char *text = print_format(PC_FORMAT_SARIF, &d);
    json_error_t err;
    json_t *doc = json_loads(text, 0, &err);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "version")), "2.1.0");
    json_t *run = json_array_get(json_object_get(doc, "runs"), 0);
    assert_non_null(run);
    json_t *rules = json_object_get(json_object_get(json_object_get(run, "tool"), "driver"), "rules");
    size_t ncodes;
    pc_code_all(&ncodes);
    assert_int_equal(json_array_size(rules), ncodes);
    json_t *results = json_object_get(run, "results");
    assert_int_equal(json_array_size(results), d.count);
    for (size_t i = 0; i < json_array_size(results); i++) {
        json_t *r = json_array_get(results, i);
        /* ruleIndex must point at the rule with the same id. */
        size_t idx = (size_t)json_integer_value(json_object_get(r, "ruleIndex"));
        assert_string_equal(json_string_value(json_object_get(json_array_get(rules, idx), "id")),
                            json_string_value(json_object_get(r, "ruleId")));
        json_t *region = json_object_get(
            json_object_get(json_array_get(json_object_get(r, "locations"), 0), "physicalLocation"),
            "region");
        assert_true(json_integer_value(json_object_get(region, "startLine")) >= 1);
        assert_true(json_integer_value(json_object_get(region, "startColumn")) >= 1);
    }
    json_decref(doc);
    free(text);
    pc_diagnostics_free(&d);
}

static void test_github_escapes_properties_and_data(void **s)
{
    (void)s;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_diagnostics_add(&d, PC_E_YAML_SYNTAX, "dir,with:odd%name.yaml", 3, 4, NULL, "line\nbreak",
                       "100%% sure: a, b");
    char *text = print_format(PC_FORMAT_GITHUB, &d);
    assert_string_equal(text, "::error file=dir%2Cwith%3Aodd%25name.yaml,line=3,col=4,title=PC004::"
                              "100%25 sure: a, b%0Ahelp: line%0Abreak\n");
    free(text);
    pc_diagnostics_free(&d);
}

static void test_werror_turns_warnings_into_errors(void **s)
{
    (void)s;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_diagnostics_add(&d, PC_W_DUPLICATE_RULE, "f.yaml", 2, 1, NULL, NULL, "dup");
    assert_int_equal(d.items[0].severity, PC_SEV_WARNING);
    pc_diagnostics_promote_warnings(&d);
    assert_int_equal(d.errors, 1);
    assert_int_equal(d.warnings, 0);
    char *text = print_format(PC_FORMAT_TEXT, &d);
    assert_string_equal(text, "f.yaml:2:1: error[PC101]: dup\n");
    free(text);
    pc_diagnostics_free(&d);
}

static void test_order_is_file_line_col_code(void **s)
{
    (void)s;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_diagnostics_add(&d, PC_E_TAG, "b.yaml", 1, 1, NULL, NULL, "x");
    pc_diagnostics_add(&d, PC_E_TAG, "a.yaml", 9, 2, NULL, NULL, "x");
    pc_diagnostics_add(&d, PC_E_ANCHOR, "a.yaml", 9, 2, NULL, NULL, "x");
    pc_diagnostics_add(&d, PC_E_TAG, "a.yaml", 9, 1, NULL, NULL, "x");
    pc_diagnostics_add(&d, PC_E_TAG, "a.yaml", 2, 7, NULL, NULL, "x");
    pc_diagnostics_sort(&d);
    const struct {
        const char *file;
        uint32_t line, col;
        pc_code code;
    } want[] = {{"a.yaml", 2, 7, PC_E_TAG}, {"a.yaml", 9, 1, PC_E_TAG}, {"a.yaml", 9, 2, PC_E_ANCHOR},
                {"a.yaml", 9, 2, PC_E_TAG}, {"b.yaml", 1, 1, PC_E_TAG}};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(d.items[i].file, want[i].file);
        assert_int_equal(d.items[i].line, want[i].line);
        assert_int_equal(d.items[i].col, want[i].col);
        assert_int_equal(d.items[i].code, want[i].code);
    }
    pc_diagnostics_free(&d);
}

static void test_storage_is_capped_but_counts_are_exact(void **s)
{
    (void)s;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    for (unsigned i = 0; i < PC_MAX_STORED_DIAGNOSTICS + 5; i++)
        pc_diagnostics_add(&d, PC_E_TAG, "f", i + 1, 1, NULL, NULL, "x");
    assert_int_equal(d.count, PC_MAX_STORED_DIAGNOSTICS);
    assert_int_equal(d.errors, PC_MAX_STORED_DIAGNOSTICS + 5);
    assert_int_equal(d.dropped, 5);
    pc_diagnostics_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_golden),
        cmocka_unit_test(test_json_golden),
        cmocka_unit_test(test_sarif_golden),
        cmocka_unit_test(test_github_golden),
        cmocka_unit_test(test_unknown_format_is_refused),
        cmocka_unit_test(test_json_counts_and_fields),
        cmocka_unit_test(test_sarif_structure),
        cmocka_unit_test(test_github_escapes_properties_and_data),
        cmocka_unit_test(test_werror_turns_warnings_into_errors),
        cmocka_unit_test(test_order_is_file_line_col_code),
        cmocka_unit_test(test_storage_is_capped_but_counts_are_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
