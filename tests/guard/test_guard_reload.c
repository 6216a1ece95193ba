/* test_guard_reload.c - reloading under load: reader threads check URLs
 * without pause while the table file is atomically replaced many times
 * (alternating two policies, with corrupt files in between). Every lookup
 * must succeed and be consistent with exactly one table version: never a
 * failed call, never a verdict mixing two versions. */
#include "test_support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile.h"
#include "guard_fixture.h"
#include "pinhole/guard.h"
#include "pinhole/file_atomic.h"

/* Version A allows a.example.com, version B b.example.com; each names its
 * own provenance file, so a torn verdict (A's answer, B's rule) shows. */
static const char POLICY_A[] = "version: 1\n"
                               "lists:\n"
                               "  default:\n"
                               "    rules:\n"
                               "      - host: a.example.com\n"
                               "        ports: [443]\n";
static const char POLICY_B[] = "version: 1\n"
                               "lists:\n"
                               "  default:\n"
                               "    rules:\n"
                               "      - host: other.example.org\n"
                               "        ports: [80]\n"
                               "      - host: b.example.com\n"
                               "        ports: [443]\n";

#define READERS 4
#define REPLACEMENTS 300

typedef struct shared {
    ph_guard *g;
    char id_a[PH_TABLE_ID_HEX_LEN + 1], id_b[PH_TABLE_ID_HEX_LEN + 1];
    atomic_bool stop;
    atomic_ulong lookups, failures, seen_a, seen_b;
    char first_failure[256];
    pthread_mutex_t lock;
} shared;

static void record_failure(shared *s, const char *what)
{
    atomic_fetch_add(&s->failures, 1);
    pthread_mutex_lock(&s->lock);
    if (s->first_failure[0] == '\0')
        snprintf(s->first_failure, sizeof s->first_failure, "%s", what);
    pthread_mutex_unlock(&s->lock);
}

/* The worker's decision on url (the list named); *v its verdict. */
static ph_status decide(ph_guard *g, const char *url, ph_verdict *v)
{
    ph_url_request req = {.url = url, .url_len = strlen(url), .list = "default"};
    ph_decision d;
    ph_status st = ph_decide_url(g, &req, &d);
    *v = d.verdict;
    return st;
}

/* One verdict must be explained by one version. */
static void check_one(shared *s, const char *url, bool is_a)
{
    ph_verdict v;
    ph_status st = decide(s->g, url, &v);
    atomic_fetch_add(&s->lookups, 1);
    bool from_a = strcmp(v.policy_id, s->id_a) == 0;
    bool from_b = strcmp(v.policy_id, s->id_b) == 0;
    if (st != PH_OK && st != PH_E_DENIED) {
        record_failure(s, "a check failed");
        return;
    }
    if (!from_a && !from_b) {
        record_failure(s, "a verdict from no known table");
        return;
    }
    bool want_allowed = is_a ? from_a : from_b;
    if (v.allowed != want_allowed ||
        (v.allowed && strcmp(v.rule_file, from_a ? "a.yaml" : "b.yaml") != 0) ||
        (!v.allowed && v.reason != PH_REASON_NOT_ALLOWLISTED)) {
        record_failure(s, "a torn verdict");
        return;
    }
    atomic_fetch_add(from_a ? &s->seen_a : &s->seen_b, 1);
}

static void *reader(void *arg)
{
    shared *s = arg;
    while (!atomic_load(&s->stop)) {
        check_one(s, "https://a.example.com/", true);
        check_one(s, "https://b.example.com/x", false);
        /* Several lookups against one pinned version agree with each other. */
        ph_guard_snapshot *snap = ph_guard_snapshot_acquire(s->g);
        const ph_table *t = ph_guard_snapshot_table(snap);
        ph_table_result ra, rb;
        if (ph_table_lookup(t, "default", "a.example.com", 13, 443, &ra) != PH_OK ||
            ph_table_lookup(t, "default", "b.example.com", 13, 443, &rb) != PH_OK ||
            ra.allowed == rb.allowed)
            record_failure(s, "a snapshot answered for two versions");
        ph_guard_snapshot_release(&snap);
    }
    return NULL;
}

static void test_reload_hammered(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/allow.ptab", dir);
    size_t len_a, len_b;
    uint8_t *img_a = ph_fixture_compile(POLICY_A, "a.yaml", &len_a);
    uint8_t *img_b = ph_fixture_compile(POLICY_B, "b.yaml", &len_b);
    ph_diag d;
    assert_int_equal(ph_file_write_atomic(path, img_a, len_a, 0644, PH_WRITE_REPLACE, &d), PH_OK);

    shared s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.lock, NULL);
    ph_guard_options opts = {.reload_interval_ms = 1}; /* readers reload too */
    assert_int_equal(ph_guard_open(path, &opts, &s.g, &d), PH_OK);
    ph_guard_policy_id(s.g, s.id_a);
    ph_table *tb = NULL;
    assert_int_equal(ph_table_open_buffer(img_b, len_b, &tb, NULL), PH_OK);
    snprintf(s.id_b, sizeof s.id_b, "%s", ph_table_policy_id_hex(tb));
    ph_table_close(&tb);
    assert_string_not_equal(s.id_a, s.id_b);

    pthread_t th[READERS];
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &s), 0);

    unsigned reloads = 0, refused = 0;
    static const char garbage[] = "this is not a table";
    for (int i = 0; i < REPLACEMENTS; i++) {
        bool corrupt = i % 10 == 9;
        const uint8_t *img = corrupt ? (const uint8_t *)garbage : (i % 2 ? img_b : img_a);
        size_t len = corrupt ? sizeof garbage : (i % 2 ? len_b : len_a);
        assert_int_equal(ph_file_write_atomic(path, img, len, 0644, PH_WRITE_REPLACE, &d), PH_OK);
        bool reloaded = false;
        ph_status st = ph_guard_reload(s.g, &reloaded, &d);
        if (corrupt) {
            /* Refused whole, reported; the old table keeps serving. */
            assert_int_not_equal(st, PH_OK);
            assert_false(reloaded);
            assert_int_not_equal(ph_guard_last_reload_error(s.g, &d), PH_OK);
            refused++;
        } else {
            assert_int_equal(st, PH_OK);
            reloads++;
        }
    }
    atomic_store(&s.stop, true);
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);

    unsigned long lookups = atomic_load(&s.lookups);
    print_message("lookups %lu, from A %lu, from B %lu, reloads %u, corrupt files refused %u\n",
                  lookups, atomic_load(&s.seen_a), atomic_load(&s.seen_b), reloads, refused);
    if (atomic_load(&s.failures) != 0)
        fail_msg("%lu bad lookups; first: %s", atomic_load(&s.failures), s.first_failure);
    assert_true(lookups > 1000);
    assert_true(atomic_load(&s.seen_a) > 0 && atomic_load(&s.seen_b) > 0);
    ph_guard_close(&s.g);
    pthread_mutex_destroy(&s.lock);
    free(img_a);
    free(img_b);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_bad_new_file_keeps_old_table(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/allow.ptab", dir);
    ph_fixture_write_table(path, POLICY_A, "a.yaml");
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_open(path, NULL, &g, NULL), PH_OK);
    bool reloaded = true;
    /* Unchanged file: nothing to do. */
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_OK);
    assert_false(reloaded);
    assert_int_equal(ph_guard_last_reload_error(g, NULL), PH_OK);

    /* Truncated copy of a real table. */
    size_t len = 0;
    uint8_t *img = ph_fixture_compile(POLICY_B, "b.yaml", &len);
    ph_diag d;
    assert_int_equal(ph_file_write_atomic(path, img, len / 2, 0644, PH_WRITE_REPLACE, &d), PH_OK);
    memset(&d, 0, sizeof d);
    assert_int_not_equal(ph_guard_reload(g, &reloaded, &d), PH_OK);
    assert_false(reloaded);
    assert_true(d.message[0] != '\0');
    ph_diag last;
    assert_int_not_equal(ph_guard_last_reload_error(g, &last), PH_OK);
    assert_string_equal(last.message, d.message);
    ph_verdict v;
    assert_int_equal(decide(g, "https://a.example.com/", &v), PH_OK);

    /* A missing file is the same: keep serving. */
    unlink(path);
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_E_NOT_FOUND);
    assert_int_equal(decide(g, "https://a.example.com/", &v), PH_OK);

    /* A good file again: swapped, error cleared. */
    assert_int_equal(ph_file_write_atomic(path, img, len, 0644, PH_WRITE_REPLACE, &d), PH_OK);
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_OK);
    assert_true(reloaded);
    assert_int_equal(ph_guard_last_reload_error(g, NULL), PH_OK);
    assert_int_equal(decide(g, "https://b.example.com/", &v), PH_OK);
    assert_string_equal(v.rule_file, "b.yaml");

    /* A snapshot taken before a reload outlives it. */
    ph_guard_snapshot *snap = ph_guard_snapshot_acquire(g);
    ph_fixture_write_table(path, POLICY_A, "a.yaml");
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_OK);
    assert_true(reloaded);
    ph_table_result r;
    assert_int_equal(ph_table_lookup(ph_guard_snapshot_table(snap), "default", "b.example.com",
                                     13, 443, &r),
                     PH_OK);
    assert_true(r.allowed);
    ph_guard_snapshot_release(&snap);
    free(img);
    ph_guard_close(&g);
    ph_test_rmtree(dir);
    free(dir);
}

static void test_open_refuses_a_bad_file(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/allow.ptab", dir);
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_open(path, NULL, &g, NULL), PH_E_NOT_FOUND);
    assert_null(g);
    assert_int_equal(ph_test_write_file(path, "garbage", 7), 0);
    ph_diag d;
    memset(&d, 0, sizeof d);
    assert_int_not_equal(ph_guard_open(path, NULL, &g, &d), PH_OK);
    assert_null(g);
    assert_true(d.message[0] != '\0');
    ph_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reload_hammered),
        cmocka_unit_test(test_bad_new_file_keeps_old_table),
        cmocka_unit_test(test_open_refuses_a_bad_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
