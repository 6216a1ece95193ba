/* gate_sandbox_timeout_minimum.c - gate sandbox.timeout_by_minimum (ADR-0029
 * decision 7): min(service cap, wall clock, run budget, clamp(model, 1 s,
 * cap)); the cap applies when nothing else is supplied; the model lowers the
 * bound and never raises it; the result names the bound that won. */
#include "sandbox_test_util.h"

#include "sandbox-int.h"

#define U PH_SANDBOX_UNSET

static void expect(int64_t cap, int64_t wall, int64_t budget, int64_t model, int64_t ms,
                   ph_timeout_bound bound)
{
    ph_timeout_choice c = ph_timeout_compose(cap, wall, budget, model);
    if (c.ms != ms || c.bound != bound)
        fail_msg("compose(%lld, %lld, %lld, %lld) = %lld/%s, want %lld/%s", (long long)cap,
                 (long long)wall, (long long)budget, (long long)model, (long long)c.ms,
                 ph_timeout_bound_code(c.bound), (long long)ms, ph_timeout_bound_code(bound));
}

static void test_each_bound_wins_in_turn(void **state)
{
    (void)state;
    expect(60000, U, U, U, 60000, PH_TIMEOUT_BOUND_SERVICE_CAP);       /* nothing else */
    expect(60000, 30000, U, U, 30000, PH_TIMEOUT_BOUND_WALL_CLOCK);
    expect(60000, 30000, 20000, U, 20000, PH_TIMEOUT_BOUND_RUN_BUDGET);
    expect(60000, 30000, 20000, 10, 10000, PH_TIMEOUT_BOUND_MODEL);
    expect(60000, 30000, 20000, 25, 20000, PH_TIMEOUT_BOUND_RUN_BUDGET);
    expect(60000, 90000, U, U, 60000, PH_TIMEOUT_BOUND_SERVICE_CAP);   /* wall clock above cap */
    expect(60000, U, 120000, U, 60000, PH_TIMEOUT_BOUND_SERVICE_CAP);  /* budget above cap */
}

static void test_model_is_clamped(void **state)
{
    (void)state;
    expect(60000, U, U, 3600, 60000, PH_TIMEOUT_BOUND_SERVICE_CAP); /* cannot raise */
    expect(60000, U, U, 60, 60000, PH_TIMEOUT_BOUND_SERVICE_CAP);   /* equal: the cap */
    expect(60000, U, U, 0, 1000, PH_TIMEOUT_BOUND_MODEL);           /* up to 1 s */
    expect(60000, U, U, -5, 1000, PH_TIMEOUT_BOUND_MODEL);
    expect(60000, U, U, INT64_MAX, 60000, PH_TIMEOUT_BOUND_SERVICE_CAP);
    expect(60000, 500, U, 1, 500, PH_TIMEOUT_BOUND_WALL_CLOCK);     /* 1 s is not a floor of the rest */
}

static void test_spent_budget_is_zero(void **state)
{
    (void)state;
    expect(60000, U, 0, U, 0, PH_TIMEOUT_BOUND_RUN_BUDGET);
    expect(60000, U, -10, 5, 0, PH_TIMEOUT_BOUND_RUN_BUDGET);
}

static void test_execute_reports_the_winner(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    ph_environment_spec spec = sbx_spec(&f);
    spec.limits.wall_clock_ms = 300;
    ph_environment *env = sbx_create(&f, &spec);
    const char *argv[] = {"sleep", "20", NULL};
    ph_execution_command cmd = {.argv = argv, .timeout_seconds = 60, .run_budget_ms = 4000};
    ph_execution_result *r = NULL;
    assert_int_equal(ph_environment_execute(env, &cmd, &r, NULL), PH_OK);
    assert_true(r->timed_out);
    assert_int_equal(r->timeout_bound, PH_TIMEOUT_BOUND_WALL_CLOCK);
    assert_int_equal(r->timeout_ms, 300);
    assert_true(r->duration_ms < 3000);
    ph_execution_result_free(&r);
    ph_environment_destroy(&env);
    sbx_close(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_bound_wins_in_turn),
        cmocka_unit_test(test_model_is_clamped),
        cmocka_unit_test(test_spent_budget_is_zero),
        cmocka_unit_test(test_execute_reports_the_winner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
