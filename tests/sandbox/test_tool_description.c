/* test_tool_description.c - the text the model sees for sandbox.run_command
 * says what decision 1 requires it to say. */
#include "sandbox_test_util.h"

#include <string.h>

static void test_says_the_workspace_is_not_durable(void **state)
{
    (void)state;
    const char *d = ph_sandbox_tool_description;
    assert_non_null(strstr(d, "NOT durable"));
    assert_non_null(strstr(d, "resumed run always starts with an empty workspace"));
    assert_non_null(strstr(d, "exported as an artifact"));
    assert_non_null(strstr(d, "/workspace"));
    assert_non_null(strstr(d, "argv"));
    assert_true(strlen(d) < 2048); /* a tool description, not a manual */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_says_the_workspace_is_not_durable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
