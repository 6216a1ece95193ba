/* test_tool_schemas.c - the builtin tools' contracts are the same as files
 * and as constants, parse as JSON, and run_command's description is the
 * one the model is shown (decision 1: the workspace is not durable). Their
 * validity against what the service returns is execd.tool_schemas. */
#include "sandbox_test_util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static void check(const char *constant, const char *file, const char *name)
{
    size_t len;
    char *text = ph_test_read_file(ph_test_source_path(file), &len);
    assert_non_null(text);
    assert_int_equal(strlen(constant), len);
    assert_memory_equal(constant, text, len);
    free(text);
    json_t *o = json_loads(constant, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "name")), name);
    assert_true(json_is_object(json_object_get(o, "input_schema")));
    assert_true(json_is_object(json_object_get(o, "output_schema")));
    const char *desc = json_string_value(json_object_get(o, "description"));
    assert_non_null(desc);
    assert_non_null(strstr(desc, "not durable") ? strstr(desc, "not durable")
                                                : strstr(desc, "NOT durable"));
    if (strcmp(name, "sandbox.run_command") == 0) {
        assert_string_equal(desc, ph_sandbox_tool_description);
        /* argv is an array of strings: never a shell string. */
        json_t *argv = json_object_get(json_object_get(json_object_get(o, "input_schema"),
                                                       "properties"), "argv");
        assert_string_equal(json_string_value(json_object_get(argv, "type")), "array");
    }
    json_decref(o);
}

static void test_files_and_constants_agree(void **state)
{
    (void)state;
    check(ph_tool_schema_run_command, "sandbox/schemas/sandbox.run_command.json",
          "sandbox.run_command");
    check(ph_tool_schema_artifact_export, "sandbox/schemas/artifact.export.json",
          "artifact.export");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_and_constants_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
