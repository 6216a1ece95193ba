/* test_store_s3.c - the S3 backend on a real object store: a single-node
 * Ceph RADOS Gateway started once by the ctest fixture (rgw_fixture.sh;
 * PH_RGW_DIR names its directory, PH_TEST_S3_CONFIG its configuration).
 * The port's cases the filesystem passes (round trip, corruption, expiry
 * boundary, other tenant, whole-or-nothing), then what only an object store
 * has: SigV4 refused with a wrong secret, a 200 MiB multipart put, a put
 * killed midway, the gateway restarted in a put and in a get, a get closed
 * mid-stream (its read-ahead interrupted), a sweep over 2,000 objects.
 * Exits 77 when the fixture did not run (ceph not installed). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "artifact_test_util.h"
#include "pinhole/clock.h"
#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "pinhole/artifact_metadata.h"
#include "s3-int.h"
#include "store-int.h"
#include "test_support.h"

static const char *rgw_dir;
static int store_seq;
static char last_prefix[128]; /* the prefix of the store opened last */

/* A store on its own fresh prefix, with a few settings changed. */
typedef struct tweak {
    const char *secret;        /* NULL: the right one */
    int64_t grace;             /* staging_grace_seconds; -1: default */
    uint64_t part, threshold;  /* 0: the fixture's */
    bool sign_content;         /* sign_content = always (else the fixture's auto) */
    long retry_base_ms;        /* 0: the fixture's */
} tweak;

static ph_status open_store(const tweak *t, ph_artifact_store_options *o, ph_artifact_store **s,
                            ph_artifact_backend **backend, ph_diag *d)
{
    ph_s3_config cfg;
    ph_status st = ph_s3_config_load(getenv("PH_TEST_S3_CONFIG"), &cfg, d);
    if (st != PH_OK)
        return st;
    snprintf(cfg.prefix, sizeof cfg.prefix, "s3test/%d-%d-%ld", (int)getpid(), ++store_seq,
             (long)time(NULL));
    snprintf(last_prefix, sizeof last_prefix, "%s", cfg.prefix);
    if (t && t->secret)
        snprintf(cfg.secret_key, sizeof cfg.secret_key, "%s", t->secret);
    if (t && t->grace >= 0)
        cfg.staging_grace_seconds = t->grace;
    if (t && t->part)
        cfg.part_size = t->part;
    if (t && t->threshold)
        cfg.multipart_threshold = t->threshold;
    if (t && t->sign_content)
        cfg.sign_content = PH_S3_SIGN_ALWAYS;
    if (t && t->retry_base_ms)
        cfg.retry_base_ms = t->retry_base_ms;
    ph_artifact_backend *b = NULL;
    st = ph_s3_backend_open_config(&cfg, &b, d);
    if (st != PH_OK)
        return st;
    if (backend)
        *backend = b;
    return ph_artifact_store_new(b, o, s, d);
}

static const tweak defaults = {.grace = -1};

static unsigned char byte_at(unsigned seed, uint64_t i)
{
    return (unsigned char)((i * 2654435761u) >> 11 ^ seed ^ (i >> 20));
}

/* A generated source: len bytes of byte_at(seed, i); optionally a hook
 * runs once when `at` bytes have been produced. */
typedef struct gen {
    unsigned seed;
    uint64_t len, pos, at;
    void (*hook)(struct gen *);
    bool fired;
    bool fail_at; /* fail instead of calling the hook */
    int fd;       /* for hooks */
} gen;

static ph_status gen_read(void *ctx, void *buf, size_t cap, size_t *got, ph_diag *diag)
{
    gen *g = ctx;
    if (g->at && !g->fired && g->pos >= g->at) {
        g->fired = true;
        if (g->fail_at)
            return ph_diag_set(diag, PH_E_IO, 0, "source failed on purpose");
        if (g->hook)
            g->hook(g);
    }
    uint64_t n = g->len - g->pos;
    if (n > cap)
        n = cap;
    unsigned char *p = buf;
    for (uint64_t i = 0; i < n; i++)
        p[i] = byte_at(g->seed, g->pos + i);
    g->pos += n;
    *got = (size_t)n;
    return PH_OK;
}

static ph_status put_gen(ph_artifact_store *s, const char *tenant, gen *g,
                         ph_artifact_metadata **m, ph_diag *d)
{
    ph_artifact_source src = {.read = gen_read, .ctx = g};
    ph_artifact_spec spec = {.tenant_id = tenant, .tenant_id_len = strlen(tenant),
                             .filename = "gen.bin", .filename_len = 7};
    return ph_artifact_put(s, &spec, &src, m, d);
}

/* Reads ref whole, checking every byte against the generator; returns
 * the status and the count of bytes read. */
static ph_status check_gen(ph_artifact_store *s, const ph_artifact_ref *ref, unsigned seed,
                           uint64_t *count, ph_diag *d)
{
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *st = NULL;
    *count = 0;
    ph_status rc = ph_artifact_open(s, ref, &m, &st, d);
    unsigned char *buf = malloc(1 << 20);
    while (rc == PH_OK) {
        size_t got = 0;
        rc = ph_artifact_stream_read(st, buf, 1 << 20, &got, d);
        if (rc != PH_OK || got == 0)
            break;
        for (size_t i = 0; i < got; i++)
            if (buf[i] != byte_at(seed, *count + i)) {
                rc = ph_diag_set(d, PH_E_INTERNAL, 0, "byte %llu differs",
                                 (unsigned long long)(*count + i));
                break;
            }
        *count += got;
    }
    free(buf);
    ph_artifact_stream_close(&st);
    ph_artifact_metadata_free(&m);
    return rc;
}

static bool count_all(void *arg, const ph_artifact_metadata *m)
{
    (void)m;
    ++*(int *)arg;
    return true;
}

static int listed(ph_artifact_store *s)
{
    int n = 0;
    assert_int_equal(ph_artifact_list(s, count_all, &n, NULL), PH_OK);
    return n;
}

static uint64_t uploads(ph_artifact_backend *b)
{
    uint64_t n = 0;
    assert_int_equal(ph_s3_backend_count_uploads(b, &n, NULL), PH_OK);
    return n;
}

/* The object name of content (suffix "") or metadata (".meta") of a ref. */
static void object_name(const char *prefix, const ph_artifact_metadata *m, const char *suffix,
                        char *out, size_t cap)
{
    char key[PH_ARTIFACT_KEY_LEN + 1];
    assert_int_equal(ph_artifact_key(m->tenant_id, m->tenant_id_len, m->artifact_id,
                                     PH_ARTIFACT_ID_LEN, key, NULL),
                     PH_OK);
    snprintf(out, cap, "%s/%.2s/%s%s", prefix, key, key, suffix);
}

static const char *prefix_of(void)
{
    return last_prefix;
}

/* ---- the port's cases ---- */

static void test_round_trip_small_and_multipart(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    ph_diag d = {0};
    assert_int_equal(open_store(&defaults, NULL, &s, NULL, &d), PH_OK);
    const char text[] = "hello, object store";
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(s, "tenant-a", "a.txt", text, strlen(text), &m, &d), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    unsigned char *got = NULL;
    size_t len = 0;
    assert_int_equal(get_bytes(s, &ref, &got, &len, &d), PH_OK);
    assert_int_equal(len, strlen(text));
    assert_memory_equal(got, text, len);
    free(got);
    ph_artifact_metadata *st = NULL;
    assert_int_equal(ph_artifact_open(s, &ref, &st, NULL, &d), PH_OK);
    assert_string_equal(st->artifact_id, m->artifact_id);
    assert_int_equal(st->size, strlen(text));
    ph_artifact_metadata_free(&st);
    ph_artifact_metadata_free(&m);

    /* 12 MiB + 7 over 5 MiB parts: three parts, the last one short. */
    gen g = {.seed = 7, .len = ((uint64_t)12 << 20) + 7};
    assert_int_equal(put_gen(s, "tenant-a", &g, &m, &d), PH_OK);
    ref = ph_artifact_metadata_ref(m);
    uint64_t n = 0;
    assert_int_equal(check_gen(s, &ref, 7, &n, &d), PH_OK);
    assert_int_equal(n, g.len);
    ph_artifact_metadata_free(&m);

    /* A threshold above the part size: the buffer holds several parts.
     * Content payloads signed this time (the store checks each body's
     * SHA-256), where the fixture's loopback default sends them unsigned. */
    tweak wide = {.grace = -1, .part = (uint64_t)5 << 20, .threshold = (uint64_t)12 << 20,
                  .sign_content = true};
    ph_artifact_store *s2 = NULL;
    assert_int_equal(open_store(&wide, NULL, &s2, NULL, &d), PH_OK);
    gen g2 = {.seed = 8, .len = ((uint64_t)23 << 20) + 1};
    assert_int_equal(put_gen(s2, "tenant-a", &g2, &m, &d), PH_OK);
    ref = ph_artifact_metadata_ref(m);
    assert_int_equal(check_gen(s2, &ref, 8, &n, &d), PH_OK);
    assert_int_equal(n, g2.len);
    ph_artifact_metadata_free(&m);
    gen g3 = {.seed = 9, .len = (uint64_t)11 << 20}; /* under the threshold: one PUT */
    assert_int_equal(put_gen(s2, "tenant-a", &g3, &m, &d), PH_OK);
    ref = ph_artifact_metadata_ref(m);
    assert_int_equal(check_gen(s2, &ref, 9, &n, &d), PH_OK);
    assert_int_equal(n, g3.len);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s2);

    /* Empty content. */
    assert_int_equal(put_bytes(s, "tenant-a", "empty", "", 0, &m, &d), PH_OK);
    ref = ph_artifact_metadata_ref(m);
    assert_int_equal(get_bytes(s, &ref, &got, &len, &d), PH_OK);
    assert_int_equal(len, 0);
    free(got);
    ph_artifact_metadata_free(&m);
    assert_int_equal(listed(s), 3);
    ph_artifact_store_close(&s);
}

static void test_other_tenant_is_not_found_like_nothing(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    assert_int_equal(open_store(&defaults, NULL, &s, NULL, NULL), PH_OK);
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(s, "alice", "x", "secret", 6, &m, NULL), PH_OK);
    ph_artifact_ref other;
    assert_int_equal(ph_artifact_ref_make(&other, "bob", 3, m->artifact_id, 32, NULL), PH_OK);
    ph_diag d1 = {0}, d2 = {0};
    ph_artifact_metadata *x = NULL;
    assert_int_equal(ph_artifact_open(s, &other, &x, NULL, &d1), PH_E_NOT_FOUND);
    ph_artifact_ref absent;
    assert_int_equal(ph_artifact_ref_make(&absent, "alice", 5, "0123456789abcdef0123456789abcdef",
                                          32, NULL),
                     PH_OK);
    assert_int_equal(ph_artifact_open(s, &absent, &x, NULL, &d2), PH_E_NOT_FOUND);
    assert_string_equal(d1.message, d2.message);
    assert_int_equal(ph_artifact_delete(s, &other, NULL), PH_E_NOT_FOUND);
    ph_artifact_ref mine = ph_artifact_metadata_ref(m);
    assert_int_equal(ph_artifact_delete(s, &mine, NULL), PH_OK);
    assert_int_equal(ph_artifact_open(s, &mine, &x, NULL, NULL), PH_E_NOT_FOUND);
    assert_int_equal(ph_artifact_delete(s, &mine, NULL), PH_E_NOT_FOUND);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

static void test_corruption_is_detected(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&defaults, NULL, &s, &b, NULL), PH_OK);
    const char *prefix = prefix_of();
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(s, "t", "f", "0123456789", 10, &m, NULL), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    char name[400];
    object_name(prefix, m, "", name, sizeof name);
    /* Same length, one byte changed, written behind the port's back. */
    assert_int_equal(ph_s3_backend_raw(b, "PUT", name, "0123456788", 10, NULL), PH_OK);
    unsigned char *got = NULL;
    size_t len = 0;
    ph_diag d = {0};
    assert_int_equal(get_bytes(s, &ref, &got, &len, &d), PH_E_FORMAT);
    assert_non_null(strstr(d.message, "corrupt"));
    free(got);
    /* Content gone under published metadata: corrupt, not absent. */
    assert_int_equal(ph_s3_backend_raw(b, "DELETE", name, NULL, 0, NULL), PH_OK);
    ph_artifact_stream *st = NULL;
    ph_artifact_metadata *x = NULL;
    assert_int_equal(ph_artifact_open(s, &ref, &x, &st, &d), PH_E_FORMAT);
    /* Metadata that is not the port's document. */
    object_name(prefix, m, ".meta", name, sizeof name);
    assert_int_equal(ph_s3_backend_raw(b, "PUT", name, "{\"v\":", 5, NULL), PH_OK);
    assert_int_not_equal(ph_artifact_open(s, &ref, &x, NULL, &d), PH_OK);
    ph_artifact_metadata_free(&m);

    /* A large artifact: the end is withheld until the digest is checked. */
    gen g = {.seed = 3, .len = (uint64_t)6 << 20};
    assert_int_equal(put_gen(s, "t", &g, &m, NULL), PH_OK);
    ref = ph_artifact_metadata_ref(m);
    object_name(prefix, m, "", name, sizeof name);
    unsigned char *bad = malloc((size_t)g.len);
    for (uint64_t i = 0; i < g.len; i++)
        bad[i] = byte_at(3, i);
    bad[g.len - 1] ^= 1;
    assert_int_equal(ph_s3_backend_raw(b, "PUT", name, bad, (size_t)g.len, NULL), PH_OK);
    free(bad);
    uint64_t n = 0;
    assert_int_equal(check_gen(s, &ref, 3, &n, &d), PH_E_FORMAT);
    assert_true(n < g.len);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

static int64_t fake_now;
static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static void test_expiry_at_the_exact_boundary(void **state)
{
    (void)state;
    fake_now = 1700000000;
    ph_artifact_store_options o = {.clock = fake_clock};
    ph_artifact_store *s = NULL;
    assert_int_equal(open_store(&defaults, &o, &s, NULL, NULL), PH_OK);
    ph_artifact_metadata *m = NULL;
    mem_source ms = {.data = (const unsigned char *)"abc", .len = 3};
    ph_artifact_source src = {.read = mem_read, .ctx = &ms};
    ph_artifact_spec spec = {.tenant_id = "t", .tenant_id_len = 1, .ttl_seconds = 100};
    assert_int_equal(ph_artifact_put(s, &spec, &src, &m, NULL), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *x = NULL;
    fake_now = m->expires_at - 1;
    assert_int_equal(ph_artifact_open(s, &ref, &x, NULL, NULL), PH_OK);
    ph_artifact_metadata_free(&x);
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(s, m->expires_at - 1, &st, NULL), PH_OK);
    assert_int_equal(st.expired, 0);
    fake_now = m->expires_at;
    assert_int_equal(ph_artifact_open(s, &ref, &x, NULL, NULL), PH_E_NOT_FOUND);
    assert_int_equal(ph_artifact_sweep(s, m->expires_at, &st, NULL), PH_OK);
    assert_int_equal(st.examined, 1);
    assert_int_equal(st.expired, 1);
    assert_int_equal(listed(s), 0);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

/* A source failing after the multipart upload started: the put fails,
 * nothing is listed, and no unfinished upload is left behind. */
static void test_failed_put_leaves_nothing(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&defaults, NULL, &s, &b, NULL), PH_OK);
    gen g = {.seed = 1, .len = (uint64_t)20 << 20, .at = (uint64_t)12 << 20, .fail_at = true};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(put_gen(s, "t", &g, &m, &d), PH_E_IO);
    assert_null(m);
    assert_int_equal(listed(s), 0);
    assert_int_equal(uploads(b), 0);
    /* A size limit hit midway: the same. */
    ph_artifact_store_options o = {.max_size = (uint64_t)11 << 20};
    ph_artifact_store *s2 = NULL;
    ph_artifact_backend *b2 = NULL;
    assert_int_equal(open_store(&defaults, &o, &s2, &b2, NULL), PH_OK);
    gen g2 = {.seed = 1, .len = (uint64_t)20 << 20};
    assert_int_equal(put_gen(s2, "t", &g2, &m, &d), PH_E_LIMIT);
    assert_int_equal(listed(s2), 0);
    assert_int_equal(uploads(b2), 0);
    ph_artifact_store_close(&s2);
    ph_artifact_store_close(&s);
}

/* ---- what only an object store has ---- */

static void test_wrong_secret_is_refused(void **state)
{
    (void)state;
    tweak t = {.secret = "not-the-secret-0123456789abcdefghijklmn", .grace = -1};
    ph_artifact_store *s = NULL;
    ph_diag d = {0};
    assert_int_equal(open_store(&t, NULL, &s, NULL, &d), PH_E_DENIED);
    assert_null(s);
    print_message("wrong secret: %s\n", d.message);
    assert_non_null(strstr(d.message, "denied"));
}

static void test_200_mib_multipart_round_trip(void **state)
{
    (void)state;
    tweak t = {.grace = -1, .part = (uint64_t)8 << 20, .threshold = (uint64_t)8 << 20};
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&t, NULL, &s, &b, NULL), PH_OK);
    gen g = {.seed = 200, .len = (uint64_t)200 << 20};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(put_gen(s, "big", &g, &m, &d), PH_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    uint64_t n = 0;
    assert_int_equal(check_gen(s, &ref, 200, &n, &d), PH_OK);
    clock_gettime(CLOCK_MONOTONIC, &t2);
    assert_int_equal(n, g.len);
    double put_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    double get_s = (double)(t2.tv_sec - t1.tv_sec) + (double)(t2.tv_nsec - t1.tv_nsec) / 1e9;
    print_message("200 MiB: put %.2f s (%.0f MiB/s), get+verify %.2f s (%.0f MiB/s)\n", put_s,
                  200 / put_s, get_s, 200 / get_s);
    assert_int_equal(uploads(b), 0);
    assert_int_equal(ph_artifact_delete(s, &ref, NULL), PH_OK);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

/* The child's source: tells the parent when 12 MiB are out, then stalls. */
static void stall_hook(gen *g)
{
    char c = 'x';
    if (write(g->fd, &c, 1) != 1)
        _exit(9);
    for (;;)
        pause();
}

static void test_killed_put_leaves_nothing_after_sweep(void **state)
{
    (void)state;
    tweak t = {.grace = 0};
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&t, NULL, &s, &b, NULL), PH_OK);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        gen g = {.seed = 5, .len = (uint64_t)40 << 20, .at = (uint64_t)12 << 20,
                 .hook = stall_hook, .fd = p[1]};
        ph_artifact_metadata *m = NULL;
        put_gen(s, "killed", &g, &m, NULL);
        _exit(0); /* not reached */
    }
    close(p[1]);
    char c;
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    /* Let the parts already handed over reach the store. */
    for (int i = 0; i < 100 && uploads(b) == 0; i++)
        usleep(50 * 1000);
    usleep(300 * 1000);
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(listed(s), 0);          /* nothing visible */
    assert_int_equal(uploads(b), 1);         /* the dead writer's upload */
    sleep(1);                                /* older than the (zero) grace */
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(s, (int64_t)time(NULL), &st, NULL), PH_OK);
    assert_true(st.staging_removed >= 1);
    assert_int_equal(uploads(b), 0);
    assert_int_equal(listed(s), 0);
    ph_artifact_store_close(&s);
}

typedef struct put_job {
    ph_artifact_store *s;
    int first, count;
    int failures;
} put_job;

static void *put_many(void *arg)
{
    put_job *j = arg;
    for (int i = j->first; i < j->first + j->count; i++) {
        char body[32];
        int n = snprintf(body, sizeof body, "object %d", i);
        ph_artifact_metadata *m = NULL;
        if (put_bytes(j->s, "many", "o", body, (size_t)n, &m, NULL) != PH_OK)
            j->failures++;
        ph_artifact_metadata_free(&m);
    }
    return NULL;
}

static void test_sweep_over_2000_objects_paginates(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    assert_int_equal(open_store(&defaults, NULL, &s, NULL, NULL), PH_OK);
    enum { N = 2000, THREADS = 8 };
    put_job jobs[THREADS];
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        jobs[i] = (put_job){.s = s, .first = i * (N / THREADS), .count = N / THREADS};
        pthread_create(&t[i], NULL, put_many, &jobs[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(jobs[i].failures, 0);
    }
    /* 4,000 names under the prefix: four pages of 1,000. */
    assert_int_equal(listed(s), N);
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(s, (int64_t)time(NULL), &st, NULL), PH_OK);
    assert_int_equal(st.examined, N);
    assert_int_equal(st.expired, 0);
    assert_int_equal(
        ph_artifact_sweep(s, (int64_t)time(NULL) + PH_ARTIFACT_DEFAULT_TTL_SECONDS + 1, &st, NULL),
        PH_OK);
    assert_int_equal(st.examined, N);
    assert_int_equal(st.expired, N);
    assert_int_equal(st.unreadable, 0);
    assert_int_equal(listed(s), 0);
    ph_artifact_store_close(&s);
}

/* Kills the gateway and starts it again on the same port, in the background. */
static void restart_rgw_hook(gen *g)
{
    (void)g;
    pid_t pid = fork();
    if (pid != 0)
        return;
    char path[600], cmd[1400];
    snprintf(path, sizeof path, "%s/run/client.rgw.a.pid", rgw_dir);
    FILE *f = fopen(path, "r");
    long rgw = 0;
    if (f == NULL || fscanf(f, "%ld", &rgw) != 1)
        _exit(2);
    fclose(f);
    kill((pid_t)rgw, SIGKILL);
    while (kill((pid_t)rgw, 0) == 0)
        usleep(10 * 1000);
    unlink(path);
    usleep(500 * 1000);
    snprintf(cmd, sizeof cmd, "radosgw -c '%s/ceph.conf' -n client.rgw.a >/dev/null 2>&1", rgw_dir);
    _exit(system(cmd) == 0 ? 0 : 3);
}

static void test_rgw_restarted_mid_put(void **state)
{
    (void)state;
    tweak t = {.grace = 0};
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&t, NULL, &s, &b, NULL), PH_OK);
    gen g = {.seed = 9, .len = (uint64_t)30 << 20, .at = (uint64_t)10 << 20,
             .hook = restart_rgw_hook};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    ph_status rc = put_gen(s, "restart", &g, &m, &d);
    int status = 0;
    while (waitpid(-1, &status, 0) > 0) {
    }
    print_message("put across the restart: %s%s\n", rc == PH_OK ? "completed" : "failed: ",
                  rc == PH_OK ? "" : d.message);
    if (rc == PH_OK) {
        ph_artifact_ref ref = ph_artifact_metadata_ref(m);
        uint64_t n = 0;
        assert_int_equal(check_gen(s, &ref, 9, &n, &d), PH_OK);
        assert_int_equal(n, g.len);
        assert_int_equal(listed(s), 1);
    } else {
        assert_null(m);
        assert_int_equal(listed(s), 0); /* failed cleanly */
    }
    sleep(1);
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(s, (int64_t)time(NULL), &st, NULL), PH_OK);
    assert_int_equal(uploads(b), 0);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

/* A get broken by a gateway restart resumes from the first byte it lacks. */
static void test_rgw_restarted_mid_get(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    assert_int_equal(open_store(&defaults, NULL, &s, NULL, NULL), PH_OK);
    gen g = {.seed = 11, .len = (uint64_t)40 << 20};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(put_gen(s, "rget", &g, &m, &d), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *om = NULL;
    ph_artifact_stream *st = NULL;
    assert_int_equal(ph_artifact_open(s, &ref, &om, &st, &d), PH_OK);
    unsigned char *buf = malloc(1 << 20);
    uint64_t count = 0;
    bool restarted = false;
    ph_status rc = PH_OK;
    for (;;) {
        size_t got = 0;
        rc = ph_artifact_stream_read(st, buf, 1 << 20, &got, &d);
        if (rc != PH_OK || got == 0)
            break;
        for (size_t i = 0; i < got; i++)
            assert_int_equal(buf[i], byte_at(11, count + i));
        count += got;
        if (!restarted && count >= ((uint64_t)8 << 20)) {
            restarted = true;
            restart_rgw_hook(&g);
            int status = 0;
            while (waitpid(-1, &status, 0) > 0) {
            }
        }
    }
    print_message("get across the restart: %s\n", rc == PH_OK ? "completed" : d.message);
    assert_int_equal(rc, PH_OK);
    assert_int_equal(count, g.len);
    free(buf);
    ph_artifact_stream_close(&st);
    ph_artifact_metadata_free(&om);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}


static void test_get_closed_mid_stream(void **state)
{
    (void)state;
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&defaults, NULL, &s, &b, NULL), PH_OK);
    gen g = {.seed = 13, .len = (uint64_t)24 << 20};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(put_gen(s, "early", &g, &m, &d), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    /* The caller stops after 1 MiB while the read-ahead is mid-transfer:
     * close stops it, aborts the GET and frees everything (ASan). */
    ph_artifact_metadata *om = NULL;
    ph_artifact_stream *st = NULL;
    unsigned char *buf = malloc(1 << 20);
    size_t got = 0;
    assert_int_equal(ph_artifact_open(s, &ref, &om, &st, &d), PH_OK);
    assert_int_equal(ph_artifact_stream_read(st, buf, 1 << 20, &got, &d), PH_OK);
    assert_true(got > 0);
    assert_int_equal(buf[0], byte_at(13, 0));
    int64_t t = ph_monotonic_ms();
    ph_artifact_stream_close(&st);
    int64_t took = ph_monotonic_ms() - t;
    print_message("close mid-stream: %lld ms\n", (long long)took);
    assert_true(took < 5000);
    ph_artifact_metadata_free(&om);
    /* The backend's reader interrupted directly: the read says so and
     * read_close still releases it; the pooled handle serves the next get. */
    char key[PH_ARTIFACT_KEY_LEN + 1], *meta = NULL;
    size_t meta_len = 0;
    uint64_t size = 0;
    ph_artifact_backend_reader *r = NULL;
    assert_int_equal(ph_artifact_ref_key(&ref, key, &d), PH_OK);
    assert_int_equal(b->ops->open(b, key, &meta, &meta_len, &r, &size, &d), PH_OK);
    assert_int_equal(size, g.len);
    assert_int_equal(b->ops->read(r, buf, 1 << 20, &got, &d), PH_OK);
    b->ops->read_interrupt(r);
    ph_status rc = PH_OK;
    for (int i = 0; i < 64 && rc == PH_OK; i++)
        rc = b->ops->read(r, buf, 1 << 20, &got, &d); /* what already arrived, then the stop */
    assert_int_equal(rc, PH_E_IO);
    assert_non_null(strstr(d.message, "interrupted"));
    b->ops->read_close(r);
    free(meta);
    free(buf);
    uint64_t n = 0;
    assert_int_equal(check_gen(s, &ref, 13, &n, &d), PH_OK);
    assert_int_equal(n, g.len);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

/* A backend read waiting out its retry backoff (the gateway gone
 * mid-transfer), then read_interrupt from another thread. */
typedef struct backoff_reader {
    const ph_artifact_backend_ops *ops;
    ph_artifact_backend_reader *r;
    unsigned char *buf;
    ph_status rc;
    ph_diag d;
    atomic_bool returned;
} backoff_reader;

static void *read_until_error(void *arg)
{
    backoff_reader *br = arg;
    size_t got = 0;
    do
        br->rc = br->ops->read(br->r, br->buf, 1 << 20, &got, &br->d);
    while (br->rc == PH_OK && got > 0);
    atomic_store(&br->returned, true);
    return NULL;
}

/* The interrupt ends the wait before a retry at once: a close in the
 * middle of a backoff of 20-40 s does not wait it out. */
static void test_interrupt_cuts_a_retry_backoff(void **state)
{
    (void)state;
    tweak t = {.grace = -1, .retry_base_ms = 20000};
    ph_artifact_store *s = NULL;
    ph_artifact_backend *b = NULL;
    assert_int_equal(open_store(&t, NULL, &s, &b, NULL), PH_OK);
    gen g = {.seed = 17, .len = (uint64_t)64 << 20};
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(put_gen(s, "backoff", &g, &m, &d), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    char key[PH_ARTIFACT_KEY_LEN + 1], *meta = NULL;
    size_t meta_len = 0, got = 0;
    uint64_t size = 0;
    backoff_reader br = {.ops = b->ops, .buf = malloc(1 << 20)};
    atomic_init(&br.returned, false);
    assert_int_equal(ph_artifact_ref_key(&ref, key, &d), PH_OK);
    assert_int_equal(b->ops->open(b, key, &meta, &meta_len, &br.r, &size, &d), PH_OK);
    assert_int_equal(b->ops->read(br.r, br.buf, 1 << 20, &got, &d), PH_OK);
    restart_rgw_hook(&g); /* the transfer breaks: a transient failure */
    usleep(300 * 1000);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_until_error, &br), 0);
    usleep(2500 * 1000); /* what the socket held is read: the read waits to retry */
    bool waiting = !atomic_load(&br.returned);
    int64_t t0 = ph_monotonic_ms();
    b->ops->read_interrupt(br.r);
    pthread_join(th, NULL);
    int64_t took = ph_monotonic_ms() - t0;
    int status = 0;
    while (waitpid(-1, &status, 0) > 0) {
    }
    print_message("read in its backoff returned %lld ms after the interrupt: %s\n",
                  (long long)took, br.d.message);
    if (!waiting)
        fail_msg("the read ended before the interrupt: %s", br.d.message);
    assert_int_equal(br.rc, PH_E_IO);
    assert_non_null(strstr(br.d.message, "interrupted"));
    assert_true(took < 3000);
    b->ops->read_close(br.r);
    free(meta);
    free(br.buf);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

static void test_config_refusals(void **state)
{
    (void)state;
    char dir[] = "/tmp/ph-s3cfg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char conf[700], creds[700];
    snprintf(conf, sizeof conf, "%s/s3.conf", dir);
    snprintf(creds, sizeof creds, "%s/creds", dir);
    ph_s3_config c;
    ph_diag d = {0};
    const char *bad[] = {
        "endpoint = ftp://x\nbucket = abc\n",
        "endpoint = http://x/path\nbucket = abc\nallow_http = true\n",
        "endpoint = http://x\nbucket = abc\n",           /* plain http not allowed */
        "endpoint = https://x\nbucket = A_B\n",
        "endpoint = https://x\nbucket = abc\nprefix = /a\n",
        "endpoint = https://x\nbucket = abc\npart_size = 1000\n",
        "endpoint = https://x\nbucket = abc\nnonsense = 1\n",
        "endpoint = https://x\nbucket = abc\nsecret_key = inline\n",
        "endpoint = https://x\nbucket = abc\nsign_content = sometimes\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ph_test_write_file(conf, bad[i], strlen(bad[i])), 0);
        assert_int_not_equal(ph_s3_config_load(conf, &c, &d), PH_OK);
    }
    /* A credentials file others can read is refused. */
    char text[1200];
    snprintf(text, sizeof text, "endpoint = https://x\nbucket = abc\ncredentials_file = %s\n", creds);
    assert_int_equal(ph_test_write_file(conf, text, strlen(text)), 0);
    assert_int_equal(ph_test_write_file(creds, "access_key = a\nsecret_key = b\n", 30), 0);
    chmod(creds, 0644);
    assert_int_equal(ph_s3_config_load(conf, &c, &d), PH_E_DENIED);
    chmod(creds, 0600);
    assert_int_equal(ph_s3_config_load(conf, &c, &d), PH_OK);
    assert_string_equal(c.access_key, "a");
    assert_string_equal(c.secret_key, "b");
    assert_string_equal(c.host, "x");
    assert_int_equal(c.sign_content, PH_S3_SIGN_AUTO);
    snprintf(text, sizeof text,
             "endpoint = https://x\nbucket = abc\ncredentials_file = %s\nsign_content = always\n",
             creds);
    assert_int_equal(ph_test_write_file(conf, text, strlen(text)), 0);
    assert_int_equal(ph_s3_config_load(conf, &c, &d), PH_OK);
    assert_int_equal(c.sign_content, PH_S3_SIGN_ALWAYS);
    unlink(conf);
    unlink(creds);
    rmdir(dir);
}

int main(void)
{
    rgw_dir = getenv("PH_RGW_DIR");
    const char *cfg = getenv("PH_TEST_S3_CONFIG");
    if (rgw_dir == NULL || cfg == NULL || access(cfg, R_OK) != 0) {
        fprintf(stderr, "test_store_s3: no RGW fixture (ceph not installed?): skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_refusals),
        cmocka_unit_test(test_round_trip_small_and_multipart),
        cmocka_unit_test(test_other_tenant_is_not_found_like_nothing),
        cmocka_unit_test(test_corruption_is_detected),
        cmocka_unit_test(test_expiry_at_the_exact_boundary),
        cmocka_unit_test(test_failed_put_leaves_nothing),
        cmocka_unit_test(test_wrong_secret_is_refused),
        cmocka_unit_test(test_200_mib_multipart_round_trip),
        cmocka_unit_test(test_killed_put_leaves_nothing_after_sweep),
        cmocka_unit_test(test_sweep_over_2000_objects_paginates),
        cmocka_unit_test(test_rgw_restarted_mid_put),
        cmocka_unit_test(test_rgw_restarted_mid_get),
        cmocka_unit_test(test_get_closed_mid_stream),
        cmocka_unit_test(test_interrupt_cuts_a_retry_backoff),
    };
    /* PH_TEST_FILTER: only the tests whose names match (cmocka's pattern). */
    if (getenv("PH_TEST_FILTER"))
        cmocka_set_test_filter(getenv("PH_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
