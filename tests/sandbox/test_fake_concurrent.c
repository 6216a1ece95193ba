/* test_fake_concurrent.c - the fake mechanism runs commands from several
 * threads at once, each in its own environment, and every result is the
 * command's own: a command that exits 0 is reported as exited 0, never as
 * killed, timed out or failed to start, however the threads' clones
 * interleave with each other and with a thread busy in malloc (a lock
 * another thread holds at the clone must not hang the child); and a short
 * command is not held back by a long one started beside it (the long one's
 * namespace init must not keep the short one's pipes open). */
#include "sandbox_test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-int.h"

#define THREADS 4
#define RUNS 60

/* The long command, and the time a short one may take before it counts as
 * having waited for the long one. A short command held back waits for the
 * rest of a LONG_S run: over half of them would take longer than SHORT_MS.
 * A short command that only lost the CPU to a busy machine takes about 2 s
 * with both cores loaded, far from either. */
#define LONG_S "10"
#define SHORT_MS 5000

typedef struct worker {
    ph_environment *env;
    int wrong;
    int slow;
    char first[512];
} worker;

static atomic_bool g_stop;

static void *churn_malloc(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        void *p[64];
        for (int i = 0; i < 64; i++)
            p[i] = malloc((size_t)(16 + i * 40));
        for (int i = 0; i < 64; i++)
            free(p[i]);
    }
    return NULL;
}

static void *run_long(void *arg)
{
    ph_environment *env = arg;
    const char *argv[] = {"sleep", LONG_S, NULL};
    while (!atomic_load(&g_stop)) {
        ph_execution_command cmd = {.argv = argv, .timeout_seconds = PH_SANDBOX_UNSET,
                                    .run_budget_ms = PH_SANDBOX_UNSET};
        ph_execution_result *r = NULL;
        (void)ph_environment_execute(env, &cmd, &r, NULL);
        ph_execution_result_free(&r);
    }
    return NULL;
}

static void *run_many(void *arg)
{
    worker *w = arg;
    const char *argv[] = {"true", NULL};
    const char *echo[] = {"sh", "-c", "echo out; echo err >&2", NULL};
    for (int i = 0; i < RUNS; i++) {
        bool talk = i % 3 == 0;
        ph_execution_command cmd = {.argv = talk ? echo : argv,
                                    .timeout_seconds = PH_SANDBOX_UNSET,
                                    .run_budget_ms = PH_SANDBOX_UNSET};
        ph_execution_result *r = NULL;
        ph_diag d = {0};
        int64_t t0 = ph_monotonic_ms();
        ph_status st = ph_environment_execute(w->env, &cmd, &r, &d);
        if (ph_monotonic_ms() - t0 > SHORT_MS && w->slow++ == 0 && w->wrong == 0)
            snprintf(w->first, sizeof w->first, "run %d took %lld ms", i,
                     (long long)(ph_monotonic_ms() - t0));
        bool ok = st == PH_OK && r->exited && r->exit_code == 0 && !r->timed_out;
        if (ok && talk)
            ok = r->out.len == 4 && memcmp(r->out.data, "out\n", 4) == 0 && r->err.len == 4 &&
                 memcmp(r->err.data, "err\n", 4) == 0;
        if (!ok) {
            if (w->wrong++ == 0)
                snprintf(w->first, sizeof w->first,
                         "run %d: status %d (%s) exited %d code %d signal %d timed_out %d "
                         "duration %lld ms out %zu err %zu",
                         i, (int)st, d.message, r ? r->exited : -1, r ? r->exit_code : -1,
                         r ? r->term_signal : -1, r ? r->timed_out : -1,
                         r ? (long long)r->duration_ms : -1LL, r ? r->out.len : 0,
                         r ? r->err.len : 0);
        }
        ph_execution_result_free(&r);
    }
    return NULL;
}

static void test_concurrent_executes_report_their_own_result(void **state)
{
    (void)state;
    sbx_fixture f;
    assert_true(sbx_open(&f, PH_MECHANISM_FAKE, 5000));
    worker w[THREADS];
    memset(w, 0, sizeof w);
    char lease[THREADS][32];
    ph_environment_spec long_spec = sbx_spec(&f);
    long_spec.lease = "lease-long";
    ph_environment *long_env = sbx_create(&f, &long_spec);
    atomic_store(&g_stop, false);
    pthread_t churn, longer;
    assert_int_equal(pthread_create(&churn, NULL, churn_malloc, NULL), 0);
    assert_int_equal(pthread_create(&longer, NULL, run_long, long_env), 0);
    for (int t = 0; t < THREADS; t++) {
        ph_environment_spec spec = sbx_spec(&f);
        snprintf(lease[t], sizeof lease[t], "lease-%d", t);
        spec.lease = lease[t];
        w[t].env = sbx_create(&f, &spec);
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, run_many, &w[t]), 0);
    int wrong = 0, slow = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        if (w[t].wrong > 0 || w[t].slow > 0)
            fprintf(stderr, "thread %d: %d of %d wrong, %d slower than %d ms; first: %s\n", t,
                    w[t].wrong, RUNS, w[t].slow, SHORT_MS, w[t].first);
        wrong += w[t].wrong;
        slow += w[t].slow;
    }
    atomic_store(&g_stop, true);
    pthread_join(churn, NULL);
    pthread_join(longer, NULL);
    for (int t = 0; t < THREADS; t++)
        ph_environment_destroy(&w[t].env);
    ph_environment_destroy(&long_env);
    sbx_close(&f);
    assert_int_equal(wrong, 0);
    assert_int_equal(slow, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_executes_report_their_own_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
