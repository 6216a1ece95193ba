/* test_store_concurrency.c - puts, opens, deletes and sweeps at the same time
 * from several threads and a second process on one store: no put fails, no
 * open returns wrong bytes, nothing is half-visible, nothing is left over.
 * Runs against the filesystem backend and, as artifacts.test_store_concurrency_s3,
 * against the S3 backend on a local Ceph RGW (artifact_test_util.h). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_store.h"
#include "test_support.h"

#define PUTTERS 3
#define PUTS_EACH 30
#define MAX_REFS (PUTTERS * PUTS_EACH)

typedef struct entry {
    char id[33];
    unsigned seed;
    size_t size;
    bool short_ttl;        /* the sweeper may take it */
    atomic_bool deleting;  /* the deleter may take it */
} entry;

typedef struct shared {
    ph_artifact_store *store;
    pthread_mutex_t lock;
    entry entries[MAX_REFS];
    int count;
    atomic_int putters_left;
    atomic_int failures;
    atomic_int opens_ok;
    char first_failure[512]; /* what failed first, for the report */
} shared;

static void record_failure(shared *sh, const char *what, ph_status st, const ph_diag *d)
{
    pthread_mutex_lock(&sh->lock);
    if (sh->first_failure[0] == '\0')
        snprintf(sh->first_failure, sizeof sh->first_failure, "%s: status %d: %s", what, (int)st,
                 d ? d->message : "");
    pthread_mutex_unlock(&sh->lock);
    atomic_fetch_add(&sh->failures, 1);
}

static unsigned char byte_at(unsigned seed, size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13 ^ seed);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = byte_at(seed, i);
}

static void *putter(void *arg)
{
    shared *sh = arg;
    unsigned rnd = (unsigned)(uintptr_t)pthread_self();
    unsigned char *buf = malloc(300 * 1024);
    for (int i = 0; i < PUTS_EACH; i++) {
        unsigned seed = rand_r(&rnd);
        size_t size = (size_t)rand_r(&rnd) % (300 * 1024);
        fill(buf, size, seed);
        mem_source src = {.data = buf, .len = size};
        ph_artifact_source s = {.read = mem_read, .ctx = &src};
        bool short_ttl = i % 3 == 0;
        ph_artifact_spec spec = {.tenant_id = "conc", .tenant_id_len = 4,
                                 .ttl_seconds = short_ttl ? 3600 : 0};
        ph_artifact_metadata *m = NULL;
        ph_diag d = {0};
        ph_status st = ph_artifact_put(sh->store, &spec, &s, &m, &d);
        if (st != PH_OK) {
            record_failure(sh, "put", st, &d);
            continue;
        }
        pthread_mutex_lock(&sh->lock);
        entry *e = &sh->entries[sh->count];
        memcpy(e->id, m->artifact_id, 33);
        e->seed = seed;
        e->size = size;
        e->short_ttl = short_ttl;
        sh->count++;
        pthread_mutex_unlock(&sh->lock);
        ph_artifact_metadata_free(&m);
    }
    free(buf);
    atomic_fetch_sub(&sh->putters_left, 1);
    return NULL;
}

static bool pick(shared *sh, unsigned *rnd, entry **out)
{
    pthread_mutex_lock(&sh->lock);
    int n = sh->count;
    pthread_mutex_unlock(&sh->lock);
    if (n == 0)
        return false;
    *out = &sh->entries[rand_r(rnd) % (unsigned)n];
    return true;
}

static void *opener(void *arg)
{
    shared *sh = arg;
    unsigned rnd = 7;
    while (atomic_load(&sh->putters_left) > 0) {
        entry *e;
        if (!pick(sh, &rnd, &e))
            continue;
        ph_artifact_ref ref;
        ph_artifact_ref_make(&ref, "conc", 4, e->id, 32, NULL);
        unsigned char *data = NULL;
        size_t len = 0;
        ph_diag d = {0};
        ph_status st = get_bytes(sh->store, &ref, &data, &len, &d);
        bool ok = st == PH_OK && len == e->size;
        for (size_t i = 0; ok && i < len; i++)
            ok = data[i] == byte_at(e->seed, i);
        bool may_be_gone = e->short_ttl || atomic_load(&e->deleting);
        if (ok)
            atomic_fetch_add(&sh->opens_ok, 1);
        else if (!(st == PH_E_NOT_FOUND && may_be_gone))
            record_failure(sh, "open", st, &d);
        free(data);
    }
    return NULL;
}

static void *deleter(void *arg)
{
    shared *sh = arg;
    unsigned rnd = 11;
    while (atomic_load(&sh->putters_left) > 0) {
        entry *e;
        if (!pick(sh, &rnd, &e) || rand_r(&rnd) % 4 != 0) {
            usleep(1000);
            continue;
        }
        atomic_store(&e->deleting, true);
        ph_artifact_ref ref;
        ph_artifact_ref_make(&ref, "conc", 4, e->id, 32, NULL);
        ph_diag d = {0};
        ph_status st = ph_artifact_delete(sh->store, &ref, &d);
        if (st != PH_OK && st != PH_E_NOT_FOUND)
            record_failure(sh, "delete", st, &d);
    }
    return NULL;
}

static void *sweeper(void *arg)
{
    shared *sh = arg;
    while (atomic_load(&sh->putters_left) > 0) {
        /* A day ahead: takes the short-TTL artifacts, and races every put. */
        ph_diag d = {0};
        ph_status st = ph_artifact_sweep(sh->store, (int64_t)time(NULL) + 86400, NULL, &d);
        if (st != PH_OK)
            record_failure(sh, "sweep", st, &d);
    }
    return NULL;
}

static void other_process(const char *root)
{
    ph_artifact_store *s = NULL;
    if (test_store_open(root, NULL, &s, NULL) != PH_OK)
        _exit(3);
    unsigned char buf[50000];
    for (int i = 0; i < 20; i++) {
        fill(buf, sizeof buf, (unsigned)i);
        ph_artifact_metadata *m = NULL;
        if (put_bytes(s, "proc", "p", buf, sizeof buf, &m, NULL) != PH_OK)
            _exit(4);
        ph_artifact_ref ref = ph_artifact_metadata_ref(m);
        unsigned char *got = NULL;
        size_t len = 0;
        if (get_bytes(s, &ref, &got, &len, NULL) != PH_OK || len != sizeof buf ||
            memcmp(got, buf, len) != 0)
            _exit(5);
        free(got);
        ph_artifact_metadata_free(&m);
        ph_artifact_sweep(s, (int64_t)time(NULL), NULL, NULL);
    }
    ph_artifact_store_close(&s);
    _exit(0);
}

static bool count_tenant(void *arg, const ph_artifact_metadata *m)
{
    if (m->tenant_id_len == 4 && memcmp(m->tenant_id, "proc", 4) == 0)
        ++*(int *)arg;
    return true;
}

static void test_concurrent_puts_opens_deletes_sweeps(void **state)
{
    (void)state;
    char *root = ph_test_mkdtemp();
    static shared sh;
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.lock, NULL);
    assert_int_equal(test_store_open(root, NULL, &sh.store, NULL), PH_OK);
    atomic_store(&sh.putters_left, PUTTERS);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        other_process(root);

    pthread_t t[PUTTERS + 3];
    for (int i = 0; i < PUTTERS; i++)
        pthread_create(&t[i], NULL, putter, &sh);
    pthread_create(&t[PUTTERS], NULL, opener, &sh);
    pthread_create(&t[PUTTERS + 1], NULL, deleter, &sh);
    pthread_create(&t[PUTTERS + 2], NULL, sweeper, &sh);
    for (int i = 0; i < PUTTERS + 3; i++)
        pthread_join(t[i], NULL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    print_message("puts %d, verified opens %d\n", sh.count, atomic_load(&sh.opens_ok));
    if (sh.first_failure[0])
        print_message("first failure: %s\n", sh.first_failure);
    assert_int_equal(atomic_load(&sh.failures), 0);
    assert_int_equal(sh.count, MAX_REFS);
    int proc = 0;
    assert_int_equal(ph_artifact_list(sh.store, count_tenant, &proc, NULL), PH_OK);
    assert_int_equal(proc, 20);

    /* Every surviving long-lived artifact is intact. */
    for (int i = 0; i < sh.count; i++) {
        entry *e = &sh.entries[i];
        ph_artifact_ref ref;
        ph_artifact_ref_make(&ref, "conc", 4, e->id, 32, NULL);
        unsigned char *data = NULL;
        size_t len = 0;
        ph_status st = get_bytes(sh.store, &ref, &data, &len, NULL);
        if (!e->short_ttl && !atomic_load(&e->deleting)) {
            assert_int_equal(st, PH_OK);
            assert_int_equal(len, e->size);
            for (size_t j = 0; j < len; j++)
                assert_int_equal(data[j], byte_at(e->seed, j));
        }
        free(data);
    }
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(sh.store, (int64_t)time(NULL), &st, NULL), PH_OK);
    assert_int_equal(st.unreadable, 0);
    ph_artifact_store_close(&sh.store);
    pthread_mutex_destroy(&sh.lock);
    ph_test_rmtree(root);
    free(root);
}

typedef struct lister {
    ph_artifact_store *store;
    int expected;
    atomic_int *short_counts;
} lister;

static bool count_all(void *arg, const ph_artifact_metadata *m)
{
    (void)m;
    ++*(int *)arg;
    return true;
}

static void *list_many(void *arg)
{
    lister *l = arg;
    for (int i = 0; i < 10; i++) {
        int n = 0;
        ph_artifact_list(l->store, count_all, &n, NULL);
        if (n != l->expected)
            atomic_fetch_add(l->short_counts, 1);
    }
    return NULL;
}

/* Walks of one store from several threads never disturb each other. */
static void test_concurrent_listings_each_see_everything(void **state)
{
    (void)state;
    char *root = ph_test_mkdtemp();
    ph_artifact_store *s = NULL;
    assert_int_equal(test_store_open(root, NULL, &s, NULL), PH_OK);
    enum { N = 60, THREADS = 4 };
    for (int i = 0; i < N; i++) {
        ph_artifact_metadata *m = NULL;
        assert_int_equal(put_bytes(s, "list", "f", "x", 1, &m, NULL), PH_OK);
        ph_artifact_metadata_free(&m);
    }
    atomic_int short_counts = 0;
    lister l = {.store = s, .expected = N, .short_counts = &short_counts};
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, list_many, &l);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&short_counts), 0);
    ph_artifact_store_close(&s);
    ph_test_rmtree(root);
    free(root);
}

int main(void)
{
    if (!test_backend_available())
        return 77; /* the S3 run without its RGW fixture */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_puts_opens_deletes_sweeps),
        cmocka_unit_test(test_concurrent_listings_each_see_everything),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
