/* test_store_crash.c - a put killed with SIGKILL at a random point leaves the
 * whole artifact or none of it, and the sweeper removes what the dead writer
 * left in staging. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_store.h"
#include "test_support.h"

#define CHUNKS 40
#define CHUNK (16 * 1024)
#define ITERATIONS 20

static unsigned char pattern(size_t pos, int run)
{
    return (unsigned char)(pos * 31 + (size_t)run);
}

typedef struct slow_source {
    size_t pos;
    int run;
} slow_source;

static ph_status slow_read(void *ctx, void *buf, size_t cap, size_t *got, ph_diag *diag)
{
    (void)diag;
    slow_source *s = ctx;
    size_t left = (size_t)CHUNKS * CHUNK - s->pos, n = cap < CHUNK ? cap : CHUNK;
    if (n > left)
        n = left;
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        p[i] = pattern(s->pos + i, s->run);
    s->pos += n;
    *got = n;
    usleep(1500);
    return PH_OK;
}

static void child_put(const char *root, int run)
{
    ph_artifact_store *s = NULL;
    if (ph_artifact_store_open_fs(root, NULL, &s, NULL) != PH_OK)
        _exit(3);
    char run_id[16];
    snprintf(run_id, sizeof run_id, "%d", run);
    slow_source src = {.run = run};
    ph_artifact_source source = {.read = slow_read, .ctx = &src};
    ph_artifact_spec spec = {.tenant_id = "crash", .tenant_id_len = 5, .run_id = run_id};
    ph_artifact_metadata *m = NULL;
    _exit(ph_artifact_put(s, &spec, &source, &m, NULL) == PH_OK ? 0 : 4);
}

typedef struct check {
    ph_artifact_store *store;
    int intact, broken;
} check;

static bool verify_one(void *arg, const ph_artifact_metadata *m)
{
    check *c = arg;
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    unsigned char *data = NULL;
    size_t len = 0;
    int run = atoi(m->run_id);
    bool ok = get_bytes(c->store, &ref, &data, &len, NULL) == PH_OK &&
              len == (size_t)CHUNKS * CHUNK && m->size == len;
    for (size_t i = 0; ok && i < len; i++)
        ok = data[i] == pattern(i, run);
    free(data);
    if (ok)
        c->intact++;
    else
        c->broken++;
    return true;
}

static int count_staging(const char *root, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/staging", root);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, suffix) != NULL)
            n++;
    if (d)
        closedir(d);
    return n;
}

static void test_sigkill_at_random_points(void **state)
{
    (void)state;
    char *root = ph_test_mkdtemp();
    ph_artifact_store *s = NULL;
    assert_int_equal(ph_artifact_store_open_fs(root, NULL, &s, NULL), PH_OK);
    srand((unsigned)time(NULL));
    int completed = 0, killed = 0;
    for (int run = 0; run < ITERATIONS; run++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child_put(root, run);
        /* A put takes ~70 ms: kill anywhere from the start to past its end. */
        usleep((useconds_t)(rand() % 100000));
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFEXITED(status)) {
            assert_int_equal(WEXITSTATUS(status), 0);
            completed++;
        } else {
            killed++;
        }
    }
    check c = {.store = s};
    assert_int_equal(ph_artifact_list(s, verify_one, &c, NULL), PH_OK);
    print_message("completed %d, killed %d, intact artifacts %d\n", completed, killed, c.intact);
    assert_int_equal(c.broken, 0);
    assert_true(c.intact >= completed && c.intact <= ITERATIONS);

    int stray = count_staging(root, ".put");
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(s, (int64_t)time(NULL), &st, NULL), PH_OK);
    print_message("stray staging entries of dead writers: %d, removed %llu\n", stray,
                  (unsigned long long)st.staging_removed);
    assert_true(st.staging_removed >= (uint64_t)stray);
    assert_int_equal(st.unreadable, 0);       /* no half-published object */
    assert_int_equal(st.expired, 0);
    assert_int_equal(count_staging(root, ".put"), 0); /* dead writers cleaned */
    assert_int_equal(count_staging(root, ".del"), 0);
    /* A writer killed between mkdir and lock (microseconds) leaves a young
     * ".new", removed after its grace period; never more than the kills. */
    assert_true(count_staging(root, ".new") <= killed);
    ph_artifact_store_close(&s);
    ph_test_rmtree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_at_random_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
