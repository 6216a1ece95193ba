/* test_docker_top.c - the docker mechanism's leftover check reads
 * `docker top <container> -o pid,nlwp` (ph_docker_top_leftovers): the init
 * alone with one thread is nothing left; a second process, or a second
 * thread in the init (planted by ptrace injection), is a leftover. */
#include "test_support.h"

#include <stdio.h>
#include <string.h>

#include "sandbox-int.h"

static ph_leftovers ask(const char *out)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", out);
    return ph_docker_top_leftovers(buf, sizeof buf);
}

static void init_alone(void **state)
{
    (void)state;
    assert_int_equal(ask("PID                 NLWP\n7519                1\n"), PH_LEFT_NOTHING);
    assert_int_equal(ask("PID NLWP\n7519 1"), PH_LEFT_NOTHING);
    assert_int_equal(ask("PID NLWP\n7519 1  \n"), PH_LEFT_NOTHING);
}

static void thread_in_init(void **state)
{
    (void)state;
    ph_leftovers left = ask("PID                 NLWP\n7519                2\n");
    printf("  init with 2 threads: %s\n", left == PH_LEFT_SOME ? "leftover" : "nothing left");
    assert_int_equal(left, PH_LEFT_SOME);
}

static void second_process(void **state)
{
    (void)state;
    assert_int_equal(ask("PID NLWP\n7519 1\n7600 1\n"), PH_LEFT_SOME);
}

static void unreadable(void **state)
{
    (void)state;
    assert_int_equal(ask(""), PH_LEFT_UNKNOWN);
    assert_int_equal(ask("PID NLWP\n"), PH_LEFT_UNKNOWN);
    assert_int_equal(ask("PID NLWP\n7519\n"), PH_LEFT_UNKNOWN);
    assert_int_equal(ask("PID NLWP\n7519 x\n"), PH_LEFT_UNKNOWN);
    char full[512];
    memset(full, '1', sizeof full - 1);
    full[sizeof full - 1] = '\0';
    assert_int_equal(ph_docker_top_leftovers(full, sizeof full), PH_LEFT_SOME);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(init_alone),
        cmocka_unit_test(thread_in_init),
        cmocka_unit_test(second_process),
        cmocka_unit_test(unreadable),
    };
    return cmocka_run_group_tests_name("docker top leftovers", tests, NULL, NULL);
}
