/* test_env_tier1_supplied.c - tier 1 handed to the builder whole
 * (ph_env_tier1_supplied, what pinhole-execd does with the worker's
 * variables) goes through exactly the refusals a passthrough list does:
 * tier-0 names, credential values, synthesized names and oversized values
 * are dropped with their warnings; the list file and getenv are not read. */
#include "sandbox_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-int.h"

static char g_warnings[4096];

static void collect(void *ctx, const char *line)
{
    (void)ctx;
    size_t u = strlen(g_warnings);
    snprintf(g_warnings + u, sizeof g_warnings - u, "%s\n", line);
}

static const char *never_getenv(const char *name)
{
    (void)name;
    fail_msg("getenv must not be consulted when tier 1 is supplied");
    return NULL;
}

static void test_supplied_tier1_goes_through_the_refusals(void **state)
{
    (void)state;
    ph_env_block supplied = {0};
    char *big = malloc(40000);
    memset(big, 'v', 39999);
    big[39999] = '\0';
    assert_int_equal(ph_env_set(&supplied, "PIP_INDEX_URL", "https://pypi.example/simple"),
                     PH_OK);
    assert_int_equal(ph_env_set(&supplied, "OPENAI_API_KEY", "canary-5a1"), PH_OK);
    assert_int_equal(ph_env_set(&supplied, "MIRROR", "https://bob:canary-5a2@m.example/"), PH_OK);
    assert_int_equal(ph_env_set(&supplied, "HOME", "/root"), PH_OK);
    assert_int_equal(ph_env_set(&supplied, "HUGE", big), PH_OK);
    free(big);
    ph_env_inputs in = {.lease = "L1", .passthrough_file = "/nonexistent/list",
                        .getenv_fn = never_getenv, .log = collect};
    ph_env_block out = {0};
    g_warnings[0] = '\0';
    ph_env_tier1_supplied = &supplied;
    assert_int_equal(ph_env_build(&in, &out, NULL), PH_OK);
    ph_env_tier1_supplied = NULL;
    assert_string_equal(ph_env_get(&out, "PIP_INDEX_URL"), "https://pypi.example/simple");
    assert_null(ph_env_get(&out, "OPENAI_API_KEY"));
    assert_null(ph_env_get(&out, "MIRROR"));
    assert_null(ph_env_get(&out, "HUGE"));
    assert_string_equal(ph_env_get(&out, "HOME"), "/workspace"); /* tier 2 wins */
    for (size_t i = 0; i < out.count; i++)
        assert_null(strstr(out.vars[i], "canary-5a"));
    assert_non_null(strstr(g_warnings, "passthrough_credential_refused"));
    assert_non_null(strstr(g_warnings, "passthrough_credential_value_refused"));
    assert_non_null(strstr(g_warnings, "passthrough_synthesized_refused"));
    assert_non_null(strstr(g_warnings, "passthrough_value_too_long"));
    assert_null(strstr(g_warnings, "passthrough_unreadable")); /* the file was not read */
    ph_env_block_clear(&out);
    ph_env_block_clear(&supplied);
}

/* An entry with no name, or no '=' at all, may be a value alone: the
 * warning gives the length of its name part, never the entry. */
static void test_invalid_entry_is_never_echoed(void **state)
{
    (void)state;
    ph_env_block supplied = {0};
    assert_int_equal(ph_env_set(&supplied, "", "canary-5a3"), PH_OK); /* "=canary-5a3" */
    assert_int_equal(ph_env_set(&supplied, "OK_NAME", "1"), PH_OK);
    free(supplied.vars[1]);
    supplied.vars[1] = strdup("canary-5a4"); /* no '=' */
    char big[200];
    memset(big, 'N', 150);
    memcpy(big + 150, "canary-5a5", 11);
    assert_int_equal(ph_env_set(&supplied, big, "v"), PH_OK); /* name over 128 bytes */
    ph_env_inputs in = {.lease = "L1", .getenv_fn = never_getenv, .log = collect};
    ph_env_block out = {0};
    g_warnings[0] = '\0';
    ph_env_tier1_supplied = &supplied;
    assert_int_equal(ph_env_build(&in, &out, NULL), PH_OK);
    ph_env_tier1_supplied = NULL;
    for (size_t i = 0; i < out.count; i++)
        assert_null(strstr(out.vars[i], "canary-5a"));
    if (strstr(g_warnings, "canary-5a") != NULL)
        fail_msg("a warning echoes an entry: %s", g_warnings);
    assert_non_null(strstr(g_warnings, "\"event\":\"passthrough_name_invalid\",\"name_bytes\":\"0\""));
    assert_non_null(strstr(g_warnings, "\"name_bytes\":\"10\""));
    assert_non_null(strstr(g_warnings, "\"name_bytes\":\"160\""));
    ph_env_block_clear(&out);
    ph_env_block_clear(&supplied);
}

/* Names are checked as a passthrough list's are (letters, digits and
 * '_', not starting with a digit): a bad one is dropped with a warning
 * naming it, never passed and never dropped silently. */
static void test_supplied_names_are_validated(void **state)
{
    (void)state;
    ph_env_block supplied = {0};
    assert_int_equal(ph_env_set(&supplied, "1X", "digit-first"), PH_OK);
    assert_int_equal(ph_env_set(&supplied, "X\nY", "newline"), PH_OK);
    assert_int_equal(ph_env_set(&supplied, "A-B", "dash"), PH_OK);
    assert_int_equal(ph_env_set(&supplied, "GOOD_1", "kept"), PH_OK);
    ph_env_inputs in = {.lease = "L1", .getenv_fn = never_getenv, .log = collect};
    ph_env_block out = {0};
    g_warnings[0] = '\0';
    ph_env_tier1_supplied = &supplied;
    assert_int_equal(ph_env_build(&in, &out, NULL), PH_OK);
    ph_env_tier1_supplied = NULL;
    assert_string_equal(ph_env_get(&out, "GOOD_1"), "kept");
    for (size_t i = 0; i < out.count; i++) {
        assert_null(strstr(out.vars[i], "digit-first"));
        assert_null(strstr(out.vars[i], "newline"));
        assert_null(strstr(out.vars[i], "dash"));
    }
    assert_non_null(strstr(g_warnings, "\"event\":\"passthrough_name_invalid\",\"name\":\"1X\""));
    assert_non_null(strstr(g_warnings, "\"name\":\"X\\nY\""));
    assert_non_null(strstr(g_warnings, "\"name\":\"A-B\""));
    ph_env_block_clear(&out);
    ph_env_block_clear(&supplied);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_supplied_tier1_goes_through_the_refusals),
        cmocka_unit_test(test_supplied_names_are_validated),
        cmocka_unit_test(test_invalid_entry_is_never_echoed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
