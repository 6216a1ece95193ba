/* test_lease_rules.c - the lease's rules at their edges: nothing before the
 * first call, a hold ending just under approval_hold_seconds keeps the
 * sandbox, ticks outside a hold do nothing, bad arguments are refused. */
#include "sandbox_test_util.h"

#include <stdint.h>

static void test_edges(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec spec = sbx_spec(&f);
    ph_sandbox_lease *lease = NULL;
    assert_int_equal(ph_sandbox_lease_open(f.svc, &spec, 0, &lease, NULL), PH_E_INVAL);
    assert_null(lease);
    assert_int_equal(ph_sandbox_lease_open(f.svc, &spec, 10, &lease, NULL), PH_OK);
    /* Holds and ticks with no sandbox yet destroy nothing and create nothing. */
    ph_sandbox_lease_hold_begin(lease, 0);
    assert_false(ph_sandbox_lease_hold_tick(lease, 100));
    assert_false(ph_sandbox_lease_hold_end(lease, 100));
    assert_false(ph_sandbox_lease_has_sandbox(lease));

    ph_environment *env = NULL, *again = NULL;
    assert_int_equal(ph_sandbox_lease_environment(lease, &env, NULL), PH_OK);
    assert_int_equal(ph_sandbox_lease_environment(lease, &again, NULL), PH_OK);
    assert_ptr_equal(env, again); /* kept across steps */
    assert_false(ph_sandbox_lease_hold_tick(lease, 5)); /* not held */
    ph_sandbox_lease_hold_begin(lease, 100);
    ph_sandbox_lease_hold_begin(lease, 105); /* a second begin does not restart the hold */
    assert_false(ph_sandbox_lease_hold_tick(lease, 109));
    assert_true(ph_sandbox_lease_hold_end(lease, 110));
    assert_false(ph_sandbox_lease_has_sandbox(lease));
    /* Times at int64's ends: the hold's length saturates instead of
     * overflowing (which wrapped INT64_MAX - INT64_MIN to -1: kept). */
    assert_int_equal(ph_sandbox_lease_environment(lease, &env, NULL), PH_OK);
    ph_sandbox_lease_hold_begin(lease, INT64_MAX);
    assert_false(ph_sandbox_lease_hold_end(lease, INT64_MIN)); /* backwards: no time held */
    ph_sandbox_lease_hold_begin(lease, INT64_MIN);
    assert_true(ph_sandbox_lease_hold_tick(lease, INT64_MAX));
    assert_false(ph_sandbox_lease_has_sandbox(lease));
    ph_sandbox_lease_end(&lease);
    assert_null(lease);
    ph_sandbox_lease_end(&lease); /* NULL is fine */
    sbx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
