/*
 * test_parse_positions.c - 1-based line and column numbers, in characters,
 * whether they come from libyaml marks (which count characters) or from a
 * reader error's byte offset (which we convert ourselves), including after
 * multi-byte UTF-8, invalid bytes and every line break libyaml knows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load-int.h"
#include "source_map.h"
#include "test_support.h"

static pc_pos pos_at(const char *data, size_t len, size_t offset)
{
    pc_source src;
    pc_source_init(&src, data, len);
    pc_pos p = pc_source_pos_of_offset(&src, offset);
    pc_source_free(&src);
    return p;
}

static void test_offsets_count_characters_not_bytes(void **s)
{
    (void)s;
    const char text[] = "ab\nc\xc3\xa9\xe2\x98\x95\xf0\x9f\x98\x80X";
    /* c=1, é=2, ☕=3, 😀=4, X=5 */
    pc_pos p = pos_at(text, sizeof text - 1, sizeof text - 2);
    assert_int_equal(p.line, 2);
    assert_int_equal(p.col, 5);
    p = pos_at(text, sizeof text - 1, 0);
    assert_int_equal(p.line, 1);
    assert_int_equal(p.col, 1);
}

static void test_invalid_bytes_count_one_column_each(void **s)
{
    (void)s;
    const char text[] = "\xff\xfe\xc3X"; /* two invalid bytes, a truncated sequence, X */
    pc_pos p = pos_at(text, 4, 3);
    assert_int_equal(p.line, 1);
    assert_int_equal(p.col, 4);
}

static void test_every_libyaml_line_break(void **s)
{
    (void)s;
    /* \r\n, \r, \n, NEL, LS, PS: six breaks, X on line 7, column 1. */
    const char text[] = "a\r\nb\rc\nd\xc2\x85" "e\xe2\x80\xa8" "f\xe2\x80\xa9X";
    pc_pos p = pos_at(text, sizeof text - 1, sizeof text - 2);
    assert_int_equal(p.line, 7);
    assert_int_equal(p.col, 1);
}

static void test_offset_past_end_is_clamped(void **s)
{
    (void)s;
    pc_pos p = pos_at("ab", 2, 99);
    assert_int_equal(p.line, 1);
    assert_int_equal(p.col, 3);
}

static void test_line_text_is_printable_and_keeps_columns(void **s)
{
    (void)s;
    const char text[] = "one\r\n\tt\x01w\xffo\xc3\xa9\nthree";
    pc_source src;
    pc_source_init(&src, text, sizeof text - 1);
    char *l1 = pc_source_line_text(&src, 1), *l2 = pc_source_line_text(&src, 2),
         *l3 = pc_source_line_text(&src, 3), *l4 = pc_source_line_text(&src, 4);
    assert_string_equal(l1, "one");
    assert_string_equal(l2, "\tt?w?o\xc3\xa9");
    assert_string_equal(l3, "three");
    assert_null(l4);
    free(l1);
    free(l2);
    free(l3);
    pc_source_free(&src);
}

/* Loads text and returns the first diagnostic (the collection is returned
 * in *d for the caller to free). */
static const pc_diagnostic *first_diag(const char *text, size_t len, pc_diagnostics *d)
{
    pc_diagnostics_init(d);
    pc_policy *p = NULL;
    pc_policy_load_buffer(text, len, "t.yaml", &p, d);
    pc_policy_free(&p);
    assert_true(d->count > 0);
    return &d->items[0];
}

static void test_reader_error_after_multibyte(void **s)
{
    (void)s;
    const char text[] = "version: 1 # \xc3\xa9\xc3\xa9\xc3\xa9\xff\n";
    pc_diagnostics d;
    const pc_diagnostic *x = first_diag(text, sizeof text - 1, &d);
    assert_int_equal(x->code, PC_E_ENCODING);
    assert_int_equal(x->line, 1);
    assert_int_equal(x->col, 17);
    pc_diagnostics_free(&d);
}

static void test_nul_byte_is_a_positioned_error(void **s)
{
    (void)s;
    const char text[] = "version: 1\nlists: \0\n";
    pc_diagnostics d;
    const pc_diagnostic *x = first_diag(text, sizeof text - 1, &d);
    assert_int_equal(x->code, PC_E_ENCODING);
    assert_int_equal(x->line, 2);
    assert_int_equal(x->col, 8);
    pc_diagnostics_free(&d);
}

/* libyaml points at the bad trailing byte; we point at the sequence's start. */
static void test_reader_error_on_a_later_line_after_crlf(void **s)
{
    (void)s;
    const char text[] = "version: 1\r\n\xe2\x98\x95\r\n  \xc3\x28\n";
    pc_diagnostics d;
    const pc_diagnostic *x = first_diag(text, sizeof text - 1, &d);
    assert_int_equal(x->code, PC_E_ENCODING);
    assert_int_equal(x->line, 3);
    assert_int_equal(x->col, 3);
    pc_diagnostics_free(&d);
}

static void test_mark_column_after_multibyte_matches_ours(void **s)
{
    (void)s;
    /* The quoted port's column comes from a libyaml mark; ü counts once. */
    const char text[] = "version: 1\nlists:\n  default:\n    rules:\n"
                        "      - {reason: \"\xc3\xbc\xc3\xbc\", host: a.example.com, ports: [\"443\"]}\n";
    pc_diagnostics d;
    const pc_diagnostic *x = first_diag(text, sizeof text - 1, &d);
    assert_int_equal(x->code, PC_E_PORT_QUOTED);
    assert_int_equal(x->line, 5);
    assert_int_equal(x->col, 53); /* 8 + {reason: "üü", host: a.example.com, ports: [ */
    /* The caret line puts the caret under that character. */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    pc_diagnostics_print(f, &d, PC_FORMAT_TEXT);
    fclose(f);
    const char *caret = strstr(out, "       | ");
    assert_non_null(caret);
    caret += strlen("       | ");
    assert_int_equal(strspn(caret, " "), 52);
    assert_int_equal(caret[52], '^');
    free(out);
    pc_diagnostics_free(&d);
}

static void test_caret_keeps_tabs(void **s)
{
    (void)s;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_diagnostics_add(&d, PC_E_TAG, "f", 1, 4, "\t\tx!", NULL, "m");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    pc_diagnostics_print(f, &d, PC_FORMAT_TEXT);
    fclose(f);
    assert_non_null(strstr(out, "       | \t\t ^\n"));
    free(out);
    pc_diagnostics_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_offsets_count_characters_not_bytes),
        cmocka_unit_test(test_invalid_bytes_count_one_column_each),
        cmocka_unit_test(test_every_libyaml_line_break),
        cmocka_unit_test(test_offset_past_end_is_clamped),
        cmocka_unit_test(test_line_text_is_printable_and_keeps_columns),
        cmocka_unit_test(test_reader_error_after_multibyte),
        cmocka_unit_test(test_nul_byte_is_a_positioned_error),
        cmocka_unit_test(test_reader_error_on_a_later_line_after_crlf),
        cmocka_unit_test(test_mark_column_after_multibyte_matches_ours),
        cmocka_unit_test(test_caret_keeps_tabs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
