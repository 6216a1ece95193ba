/* ph_version() is the project's version and pinhole/version.h agrees. */
#include "test_support.h"

#include <stdio.h>
#include <string.h>

#include "pinhole/version.h"

static void test_version_matches_the_header(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", PH_VERSION_MAJOR, PH_VERSION_MINOR, PH_VERSION_PATCH);
    assert_string_equal(PH_VERSION_STRING, want);
    assert_string_equal(ph_version(), PH_VERSION_STRING);
    assert_int_equal(PH_VERSION_NUMBER,
                     (PH_VERSION_MAJOR << 16) | (PH_VERSION_MINOR << 8) | PH_VERSION_PATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_matches_the_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
