/* test_compile_determinism.c - the same policy gives the same bytes; the
 * policy id follows what is allowed, not where it was written; and
 * compile(dump(T)) reproduces T byte for byte. */
#include <stdio.h>
#include <string.h>

#include "dump.h"
#include "table_fixture.h"

static const char *const POLICY =
    "version: 1\n"
    "lists:\n"
    "  zeta:\n"
    "    include: [common]\n"
    "    rules:\n"
    "      - host: \"*.zeta.example\"\n"
    "        ports: [\"9000-9100\", 443, 444, \"445-450\"]\n"
    "        reason: \"quotes \\\" and \\\\ backslash, caf\\u00e9\"\n"
    "  default:\n"
    "    include: [common, zeta]\n"
    "    rules:\n"
    "      - host: api.github.com\n"
    "        ports: [443]\n"
    "        reason: GitHub API\n"
    "      - host: api.github.com\n"
    "        ports: [443]\n"
    "      - host: \"*.cdn.example.net\"\n"
    "        ports: [443, \"8000-8010\"]\n"
    "  common:\n"
    "    rules:\n"
    "      - host: pypi.org\n"
    "        ports: [443]\n"
    "      - host: files.pythonhosted.org\n"
    "        ports: [443, 80]\n";

/* The same rules, lists and includes in another order and on other lines. */
static const char *const REORDERED =
    "version: 1\n"
    "lists:\n"
    "  common:\n"
    "    rules:\n"
    "      - host: files.pythonhosted.org\n"
    "        ports: [80, 443]\n"
    "      - host: pypi.org\n"
    "        ports: [443]\n"
    "  default:\n"
    "    include: [zeta, common]\n"
    "    rules:\n"
    "      - host: \"*.cdn.example.net\"\n"
    "        ports: [\"8000-8010\", 443]\n"
    "      - host: api.github.com\n"
    "        ports: [443]\n"
    "      - host: api.github.com\n"
    "        ports: [443]\n"
    "        reason: GitHub API\n"
    "  zeta:\n"
    "    include: [common]\n"
    "    rules:\n"
    "      - host: \"*.zeta.example\"\n"
    "        ports: [443, \"444-450\", \"9000-9100\"]\n"
    "        reason: \"quotes \\\" and \\\\ backslash, caf\\u00e9\"\n";

static void same_input_gives_identical_bytes(void **state)
{
    (void)state;
    uint8_t *a, *b;
    size_t la, lb;
    fx_compile(POLICY, &a, &la);
    fx_compile(POLICY, &b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

static void policy_id_ignores_order_and_lines(void **state)
{
    (void)state;
    ph_table *a = fx_open(POLICY), *b = fx_open(REORDERED);
    assert_string_equal(ph_table_policy_id_hex(a), ph_table_policy_id_hex(b));
    ph_table_close(&a);
    ph_table_close(&b);
    /* ... but not what is allowed. */
    char *changed = strdup(POLICY);
    char *p = strstr(changed, "[443, 80]");
    p[6] = '1'; /* 80 -> 81 */
    a = fx_open(POLICY);
    b = fx_open(changed);
    assert_string_not_equal(ph_table_policy_id_hex(a), ph_table_policy_id_hex(b));
    ph_table_close(&a);
    ph_table_close(&b);
    free(changed);
}

static void display_name_directory_never_enters_the_table(void **state)
{
    (void)state;
    uint8_t *a, *b;
    size_t la, lb;
    fx_compile_named(POLICY, "/some/where/allow.yaml", &a, &la);
    fx_compile_named(POLICY, "elsewhere/allow.yaml", &b, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    assert_null(memmem(a, la, "some/where", 10));
    free(a);
    free(b);
}

/* dump -> load -> compile, in memory, compared with the original bytes. */
static void assert_round_trip(const char *yaml)
{
    uint8_t *image, *again;
    size_t len, len2;
    fx_compile(yaml, &image, &len);
    ph_table *t = NULL;
    assert_int_equal(ph_table_open_buffer(image, len, &t, NULL), PH_OK);
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    assert_non_null(f);
    assert_int_equal(pc_dump_table(f, t), 0);
    fclose(f);
    fx_compile_named(text, "dumped.yaml", &again, &len2);
    if (len != len2 || memcmp(image, again, len) != 0)
        fail_msg("compile(dump(T)) differs from T; dump was:\n%s", text);
    /* Dumping the recompiled table gives the same text again. */
    ph_table *t2 = NULL;
    assert_int_equal(ph_table_open_buffer(again, len2, &t2, NULL), PH_OK);
    char *text2 = NULL;
    size_t tlen2 = 0;
    f = open_memstream(&text2, &tlen2);
    assert_int_equal(pc_dump_table(f, t2), 0);
    fclose(f);
    assert_string_equal(text, text2);
    free(text);
    free(text2);
    free(image);
    free(again);
    ph_table_close(&t);
    ph_table_close(&t2);
}

static void dump_round_trips_byte_for_byte(void **state)
{
    (void)state;
    assert_round_trip(POLICY);
    assert_round_trip(REORDERED);
    assert_round_trip("version: 1\nlists:\n  default:\n    rules:\n"
                      "      - host: a.example.org\n        ports: [1, 65535, \"2-1025\"]\n");
}

static void dump_is_flattened_and_carries_provenance(void **state)
{
    (void)state;
    ph_table *t = fx_open(POLICY);
    char *text = NULL;
    size_t tlen = 0;
    FILE *f = open_memstream(&text, &tlen);
    assert_int_equal(pc_dump_table(f, t), 0);
    fclose(f);
    assert_null(strstr(text, "include"));
    assert_non_null(strstr(text, "source: \"allow.yaml:21\""));
    assert_non_null(strstr(text, "ports: [\"443-450\", \"9000-9100\"]")); /* merged */
    /* lists sorted: common, default, zeta */
    char *c = strstr(text, "common"), *d = strstr(text, "\"default\"");
    char *z = strstr(text, "\"zeta\"");
    assert_true(c && d && z && c < d && d < z);
    free(text);
    ph_table_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_input_gives_identical_bytes),
        cmocka_unit_test(policy_id_ignores_order_and_lines),
        cmocka_unit_test(display_name_directory_never_enters_the_table),
        cmocka_unit_test(dump_round_trips_byte_for_byte),
        cmocka_unit_test(dump_is_flattened_and_carries_provenance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
