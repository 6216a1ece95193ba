/* gate_sandbox_startup_refusal.c - gate sandbox.startup_refuses_unsafe_mechanism
 * (ADR-0029 decision 13, Milestone 1): production refuses docker and fake,
 * with a clear error, before anything is created. */
#include "sandbox_test_util.h"

#include <stdlib.h>
#include <string.h>

static void test_matrix(void **state)
{
    (void)state;
    ph_diag diag = {0};
    assert_int_equal(ph_sandbox_startup_check(PH_SERVICE_MODE_PRODUCTION, PH_MECHANISM_GVISOR,
                                              &diag), PH_OK);
    assert_int_equal(ph_sandbox_startup_check(PH_SERVICE_MODE_PRODUCTION, PH_MECHANISM_DOCKER,
                                              &diag), PH_E_DENIED);
    assert_non_null(strstr(diag.message, "mechanism_refused_in_production"));
    assert_non_null(strstr(diag.message, "docker"));
    assert_int_equal(ph_sandbox_startup_check(PH_SERVICE_MODE_PRODUCTION, PH_MECHANISM_FAKE,
                                              &diag), PH_E_DENIED);
    assert_non_null(strstr(diag.message, "mechanism_refused_in_production: fake"));
    assert_non_null(strstr(diag.message, "gvisor"));
    for (int m = PH_MECHANISM_GVISOR; m <= PH_MECHANISM_FAKE; m++)
        assert_int_equal(ph_sandbox_startup_check(PH_SERVICE_MODE_DEVELOPMENT,
                                                  (ph_sandbox_mechanism)m, NULL), PH_OK);
    /* Out-of-range values are refused, never taken as "safe". */
    assert_int_equal(ph_sandbox_startup_check(PH_SERVICE_MODE_PRODUCTION,
                                              (ph_sandbox_mechanism)7, NULL), PH_E_INVAL);
    assert_int_equal(ph_sandbox_startup_check((ph_service_mode)5, PH_MECHANISM_GVISOR, NULL),
                     PH_E_INVAL);
}

static void test_service_open_refuses_in_production(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_PRODUCTION,
                             .mechanism = PH_MECHANISM_FAKE,
                             .hard_cap_ms = 1000,
                             .state_dir = dir};
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_execution_service_open(&cfg, &svc, &diag), PH_E_DENIED);
    assert_null(svc);
    assert_non_null(strstr(diag.message, "mechanism_refused_in_production"));
    cfg.mechanism = PH_MECHANISM_DOCKER;
    assert_int_equal(ph_execution_service_open(&cfg, &svc, &diag), PH_E_DENIED);
    cfg.mode = PH_SERVICE_MODE_DEVELOPMENT;
    cfg.mechanism = PH_MECHANISM_FAKE;
    assert_int_equal(ph_execution_service_open(&cfg, &svc, &diag), PH_OK);
    ph_execution_service_close(&svc);
    assert_null(svc);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_names_parse_strictly(void **state)
{
    (void)state;
    ph_sandbox_mechanism m;
    ph_service_mode mode;
    assert_int_equal(ph_sandbox_mechanism_from_name("fake", &m, NULL), PH_OK);
    assert_int_equal(m, PH_MECHANISM_FAKE);
    assert_int_equal(ph_sandbox_mechanism_from_name("Fake", &m, NULL), PH_E_INVAL);
    assert_int_equal(ph_sandbox_mechanism_from_name("", &m, NULL), PH_E_INVAL);
    assert_int_equal(ph_service_mode_from_name("production", &mode, NULL), PH_OK);
    assert_int_equal(mode, PH_SERVICE_MODE_PRODUCTION);
    assert_int_equal(ph_service_mode_from_name("prod", &mode, NULL), PH_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_service_open_refuses_in_production),
        cmocka_unit_test(test_names_parse_strictly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
