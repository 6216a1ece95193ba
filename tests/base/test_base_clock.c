/* The monotonic clock: never goes back, the three units agree, and it
 * measures a sleep. */
#include "test_support.h"

#include <time.h>

#include "pinhole/clock.h"

static void test_never_decreases(void **state)
{
    (void)state;
    int64_t prev = ph_monotonic_ns();
    for (int i = 0; i < 100000; i++) {
        int64_t now = ph_monotonic_ns();
        assert_true(now >= prev);
        prev = now;
    }
}

static void test_units_agree_and_measure_a_sleep(void **state)
{
    (void)state;
    int64_t ns0 = ph_monotonic_ns(), us0 = ph_monotonic_us(), ms0 = ph_monotonic_ms();
    assert_true(us0 >= ns0 / 1000 && us0 - ns0 / 1000 < 1000000);
    assert_true(ms0 >= ns0 / 1000000 && ms0 - ns0 / 1000000 < 1000);
    struct timespec d = {0, 50 * 1000000};
    while (nanosleep(&d, &d) != 0) {
    }
    int64_t ms1 = ph_monotonic_ms(), us1 = ph_monotonic_us();
    assert_true(ms1 - ms0 >= 50);
    assert_true(us1 - us0 >= 50000);
    assert_true(ms1 - ms0 < 10000); /* a sleep, not a wall-clock jump */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_never_decreases),
        cmocka_unit_test(test_units_agree_and_measure_a_sleep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
