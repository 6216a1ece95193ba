/* test_store_port.c - the port over a scripted backend: a failing backend
 * write or commit fails the put, aborts the write exactly once and returns
 * no metadata; the backend sees the content before the metadata. A large
 * get reads ahead on the pipeline's thread: closing mid-stream stops it
 * (interrupting a blocked read), a read error mid-stream reaches the caller
 * as it was, corrupt content is still withheld, and without a thread the
 * same happens inline. */
/* pthread_setattr_default_np: _GNU_SOURCE comes from the build */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_metadata.h"
#include "pinhole/clock.h"
#include "pinhole/diag.h"
#include "store-int.h"
#include "test_support.h"

typedef struct script {
    ph_artifact_backend base;
    size_t fail_write_after; /* bytes accepted before write fails; SIZE_MAX: never */
    bool fail_commit;
    size_t written;
    int begins, aborts, commits;
    bool meta_after_content;
    /* The one published object: its content and metadata. */
    unsigned char *content;
    size_t content_len;
    char *meta;
    size_t meta_len;
    /* Reads: bytes served before read fails / blocks until interrupted
     * (SIZE_MAX: never); serve_len, when set, is what the reader really
     * serves while open still reports content_len. */
    size_t fail_read_after, block_read_after, serve_len;
    int opens, read_closes, interrupts, blocked;
    pthread_t caller;     /* the test's thread */
    int reads_elsewhere;  /* reads that ran on another thread (read-ahead) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} script;

struct ph_artifact_backend_writer {
    script *s;
};

struct ph_artifact_backend_reader {
    script *s;
    size_t pos;
    bool interrupted; /* under s->mu */
};


static ph_status s_begin(ph_artifact_backend *b, const char *key, ph_artifact_backend_writer **w,
                         ph_diag *d)
{
    (void)key; (void)d;
    script *s = (script *)b;
    s->begins++;
    *w = malloc(sizeof **w);
    (*w)->s = s;
    return PH_OK;
}

static ph_status s_write(ph_artifact_backend_writer *w, const void *buf, size_t len, ph_diag *d)
{
    if (w->s->written + len > w->s->fail_write_after) {
        if (d) {
            d->status = PH_E_IO;
            strcpy(d->message, "disk on fire");
        }
        return PH_E_IO;
    }
    w->s->content = realloc(w->s->content, w->s->written + len);
    memcpy(w->s->content + w->s->written, buf, len);
    w->s->written += len;
    w->s->content_len = w->s->written;
    return PH_OK;
}

static ph_status s_commit(ph_artifact_backend_writer *w, const char *meta, size_t len, ph_diag *d)
{
    script *s = w->s;
    free(w);
    s->commits++;
    ph_artifact_metadata *m = NULL;
    s->meta_after_content = ph_artifact_metadata_decode(meta, len, &m, NULL) == PH_OK &&
                            m->size == s->written;
    ph_artifact_metadata_free(&m);
    free(s->meta);
    s->meta = strndup(meta, len);
    s->meta_len = len;
    if (s->fail_commit) {
        if (d) {
            d->status = PH_E_IO;
            strcpy(d->message, "commit failed");
        }
        return PH_E_IO;
    }
    return PH_OK;
}

static void s_abort(ph_artifact_backend_writer *w)
{
    if (w == NULL)
        return;
    w->s->aborts++;
    free(w);
}

static ph_status s_open(ph_artifact_backend *b, const char *key, char **meta, size_t *meta_len,
                        ph_artifact_backend_reader **r, uint64_t *content_size, ph_diag *d)
{
    (void)key;
    script *s = (script *)b;
    if (s->meta == NULL)
        return ph_diag_set(d, PH_E_NOT_FOUND, 0, "absent");
    s->opens++;
    *meta = strndup(s->meta, s->meta_len);
    *meta_len = s->meta_len;
    if (r) {
        *r = calloc(1, sizeof **r);
        (*r)->s = s;
        *content_size = s->content_len;
    }
    return PH_OK;
}

static ph_status s_read(ph_artifact_backend_reader *r, void *buf, size_t cap, size_t *got,
                        ph_diag *d)
{
    script *s = r->s;
    *got = 0;
    if (!pthread_equal(pthread_self(), s->caller)) {
        pthread_mutex_lock(&s->mu);
        s->reads_elsewhere++;
        pthread_mutex_unlock(&s->mu);
    }
    if (r->pos >= s->fail_read_after)
        return ph_diag_set(d, PH_E_IO, 0, "disk on fire while reading");
    if (r->pos >= s->block_read_after) {
        /* A stalled transfer: only read_interrupt ends it. */
        pthread_mutex_lock(&s->mu);
        s->blocked++;
        pthread_cond_broadcast(&s->cv);
        while (!r->interrupted)
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
        return ph_diag_set(d, PH_E_IO, 0, "interrupted");
    }
    size_t end = s->serve_len ? s->serve_len : s->content_len;
    size_t n = end > r->pos ? end - r->pos : 0;
    if (n > cap)
        n = cap;
    if (n > 256 * 1024)
        n = 256 * 1024; /* several reads per chunk, as a network would */
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)buf)[i] = r->pos + i < s->content_len ? s->content[r->pos + i] : 'x';
    r->pos += n;
    *got = n;
    return PH_OK;
}

static void s_read_interrupt(ph_artifact_backend_reader *r)
{
    pthread_mutex_lock(&r->s->mu);
    r->s->interrupts++;
    r->interrupted = true;
    pthread_cond_broadcast(&r->s->cv);
    pthread_mutex_unlock(&r->s->mu);
}

static void s_read_close(ph_artifact_backend_reader *r)
{
    if (r == NULL)
        return;
    r->s->read_closes++;
    free(r);
}

static void s_destroy(ph_artifact_backend *b)
{
    script *s = (script *)b;
    free(s->content);
    free(s->meta);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static const ph_artifact_backend_ops script_ops = {
    .name = "script", .write_begin = s_begin, .write = s_write, .write_commit = s_commit,
    .write_abort = s_abort, .open = s_open, .read = s_read, .read_close = s_read_close,
    .read_interrupt = s_read_interrupt, .destroy = s_destroy,
};

static ph_artifact_store *store_over(script *s)
{
    memset(s, 0, sizeof *s);
    s->base.ops = &script_ops;
    s->fail_write_after = SIZE_MAX;
    s->fail_read_after = SIZE_MAX;
    s->block_read_after = SIZE_MAX;
    s->caller = pthread_self();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    ph_artifact_store *st = NULL;
    assert_int_equal(ph_artifact_store_new(&s->base, NULL, &st, NULL), PH_OK);
    return st;
}

static void test_success_sends_metadata_after_content(void **state)
{
    (void)state;
    script s;
    ph_artifact_store *st = store_over(&s);
    size_t n = 5 << 20;
    unsigned char *data = calloc(1, n);
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(st, "t", "f", data, n, &m, NULL), PH_OK);
    assert_int_equal(s.written, n);
    assert_int_equal(s.commits, 1);
    assert_int_equal(s.aborts, 0);
    assert_true(s.meta_after_content);
    free(data);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&st);
}

static void test_write_failure_aborts_once(void **state)
{
    (void)state;
    script s;
    ph_artifact_store *st = store_over(&s);
    s.fail_write_after = 3 << 20; /* fails on the 4th 1 MiB chunk */
    size_t n = 8 << 20;
    unsigned char *data = calloc(1, n);
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(put_bytes(st, "t", "f", data, n, &m, &d), PH_E_IO);
    assert_string_equal(d.message, "disk on fire");
    assert_null(m);
    assert_int_equal(s.aborts, 1);
    assert_int_equal(s.commits, 0);
    free(data);
    ph_artifact_store_close(&st);
}

static void test_commit_failure_returns_nothing(void **state)
{
    (void)state;
    script s;
    ph_artifact_store *st = store_over(&s);
    s.fail_commit = true;
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(st, "t", "f", "abc", 3, &m, NULL), PH_E_IO);
    assert_null(m);
    assert_int_equal(s.commits, 1);
    assert_int_equal(s.aborts, 0); /* commit consumed the writer */
    ph_artifact_store_close(&st);
}


/* ---- gets through the read-ahead pipeline ---- */

#define BIG ((size_t)8 << 20 | 123) /* over the pre-verify size, a short last chunk */

static unsigned char byte_of(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 20));
}

/* Puts n pattern bytes through s; returns the ref. */
static ph_artifact_ref put_pattern(ph_artifact_store *st, size_t n)
{
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = byte_of(i);
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(st, "t", "f", data, n, &m, NULL), PH_OK);
    free(data);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ref.tenant_id = "t"; /* the ref borrowed m's copy */
    ph_artifact_metadata_free(&m);
    return ref;
}

/* Gets ref whole: the status, the bytes delivered (checked against the
 * pattern) and the diagnostic. */
static ph_status get_pattern(ph_artifact_store *st, const ph_artifact_ref *ref, size_t *delivered,
                             ph_diag *d)
{
    unsigned char *data = NULL;
    ph_status rc = get_bytes(st, ref, &data, delivered, d);
    for (size_t i = 0; i < *delivered; i++)
        if (data[i] != byte_of(i))
            fail_msg("byte %zu delivered wrong", i);
    free(data);
    return rc;
}

static void get_round_trip(bool threaded)
{
    script s;
    ph_artifact_store *st = store_over(&s);
    ph_artifact_ref ref = put_pattern(st, BIG);
    assert_int_equal(s.commits, 1);
    size_t n = 0;
    ph_diag d = {0};
    ph_status rc = get_pattern(st, &ref, &n, &d);
    if (rc != PH_OK)
        fail_msg("get: %s", d.message);
    assert_int_equal(n, BIG);
    assert_int_equal(s.opens, 1);
    assert_int_equal(s.read_closes, 1);
    if (threaded)
        assert_true(s.reads_elsewhere > 0); /* read ahead on the worker */
    else
        assert_int_equal(s.reads_elsewhere, 0);
    ph_artifact_store_close(&st);
}

static void test_get_reads_ahead_on_a_thread(void **state)
{
    (void)state;
    get_round_trip(true);
}

/* Waits (5 s at most) until the backend's read is blocked. */
static bool wait_blocked(script *s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (s->blocked == 0 && pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0) {
    }
    bool blocked = s->blocked > 0;
    pthread_mutex_unlock(&s->mu);
    return blocked;
}

static void test_get_close_mid_stream_stops_the_worker(void **state)
{
    (void)state;
    script s;
    ph_artifact_store *st = store_over(&s);
    ph_artifact_ref ref = put_pattern(st, (size_t)32 << 20);
    /* The caller stops after a few bytes: the worker is stopped and joined
     * and the reader closed once (ASan: nothing leaks). */
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *stream = NULL;
    unsigned char buf[100];
    size_t got = 0;
    assert_int_equal(ph_artifact_open(st, &ref, &m, &stream, NULL), PH_OK);
    assert_int_equal(ph_artifact_stream_read(stream, buf, sizeof buf, &got, NULL), PH_OK);
    assert_int_equal(got, sizeof buf);
    assert_int_equal(buf[99], byte_of(99));
    ph_artifact_stream_close(&stream);
    assert_null(stream);
    assert_int_equal(s.read_closes, 1);
    ph_artifact_metadata_free(&m);

    /* The worker is blocked in a stalled backend read: close interrupts it
     * rather than waiting for the transfer. */
    s.block_read_after = ((size_t)2 << 20) + 5; /* inside the third chunk */
    assert_int_equal(ph_artifact_open(st, &ref, &m, &stream, NULL), PH_OK);
    assert_int_equal(ph_artifact_stream_read(stream, buf, sizeof buf, &got, NULL), PH_OK);
    assert_true(wait_blocked(&s));
    int before = s.interrupts;
    int64_t t = ph_monotonic_ms();
    ph_artifact_stream_close(&stream);
    assert_true(ph_monotonic_ms() - t < 2000);
    assert_int_equal(s.interrupts, before + 1);
    assert_int_equal(s.read_closes, 2);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&st);
}

static void read_error_propagates(void)
{
    script s;
    ph_artifact_store *st = store_over(&s);
    ph_artifact_ref ref = put_pattern(st, BIG);
    s.fail_read_after = ((size_t)3 << 20) + 7;
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *stream = NULL;
    assert_int_equal(ph_artifact_open(st, &ref, &m, &stream, NULL), PH_OK);
    unsigned char *data = NULL;
    size_t n = 0;
    ph_diag d = {0};
    assert_int_equal(read_all(stream, &data, &n, &d), PH_E_IO);
    assert_string_equal(d.message, "disk on fire while reading");
    assert_true(n <= s.fail_read_after);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(data[i], byte_of(i));
    free(data);
    /* Sticky: the next read says the same. */
    unsigned char b;
    size_t got = 1;
    ph_diag again = {0};
    assert_int_equal(ph_artifact_stream_read(stream, &b, 1, &got, &again), PH_E_IO);
    assert_int_equal(got, 0);
    assert_string_equal(again.message, "disk on fire while reading");
    ph_artifact_stream_close(&stream);
    ph_artifact_metadata_free(&m);
    assert_int_equal(s.read_closes, 1);
    ph_artifact_store_close(&st);
}

static void test_get_read_error_mid_stream_propagates(void **state)
{
    (void)state;
    read_error_propagates();
}

/* Corrupt content read through the pipeline: the status, the message, and
 * that the last chunk never left. */
static void expect_corrupt(ph_artifact_store *st, const ph_artifact_ref *ref, const char *what)
{
    unsigned char *data = NULL;
    size_t n = 0;
    ph_diag d = {0};
    assert_int_equal(get_bytes(st, ref, &data, &n, &d), PH_E_FORMAT);
    free(data);
    assert_non_null(strstr(d.message, what));
    assert_true(n <= BIG - (BIG % PH_ARTIFACT_CHUNK));
}

static void corruption_detected(void)
{
    script s;
    ph_artifact_store *st = store_over(&s);
    ph_artifact_ref ref = put_pattern(st, BIG);
    s.content[BIG / 2] ^= 1; /* same length, one bit flipped */
    expect_corrupt(st, &ref, "SHA-256 mismatch");
    s.content[BIG / 2] ^= 1;
    s.serve_len = BIG - 10; /* shrank under the recorded size */
    expect_corrupt(st, &ref, "shorter");
    s.serve_len = BIG + 5; /* grew */
    expect_corrupt(st, &ref, "longer");
    s.serve_len = 0;
    size_t n = 0;
    assert_int_equal(get_pattern(st, &ref, &n, NULL), PH_OK); /* intact again */
    assert_int_equal(n, BIG);
    assert_int_equal(s.read_closes, s.opens);
    ph_artifact_store_close(&st);
}

static void test_get_corrupt_content_detected(void **state)
{
    (void)state;
    corruption_detected();
}

/* A default thread stack larger than the address space: every
 * pthread_create fails, as when a process has no thread to spare. */
static void no_threads(bool none)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    size_t stack = none ? (size_t)1 << 46 : (size_t)8 << 20;
    assert_int_equal(pthread_attr_setstacksize(&a, stack), 0);
    assert_int_equal(pthread_setattr_default_np(&a), 0);
    pthread_attr_destroy(&a);
}

static void *idle(void *arg)
{
    return arg;
}

static void test_without_a_thread_everything_runs_inline(void **state)
{
    (void)state;
    no_threads(true);
    pthread_t t;
    if (pthread_create(&t, NULL, idle, NULL) == 0) {
        pthread_join(t, NULL);
        no_threads(false);
        fail_msg("pthread_create still succeeds: the fallback is not exercised");
    }
    get_round_trip(false); /* the put's writes inline too */
    read_error_propagates();
    corruption_detected();
    /* An early close without a worker. */
    script s;
    ph_artifact_store *st = store_over(&s);
    ph_artifact_ref ref = put_pattern(st, BIG);
    ph_artifact_metadata *m = NULL;
    ph_artifact_stream *stream = NULL;
    unsigned char b;
    size_t got = 0;
    assert_int_equal(ph_artifact_open(st, &ref, &m, &stream, NULL), PH_OK);
    assert_int_equal(ph_artifact_stream_read(stream, &b, 1, &got, NULL), PH_OK);
    ph_artifact_stream_close(&stream);
    assert_int_equal(s.read_closes, 1);
    assert_int_equal(s.reads_elsewhere, 0);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&st);
    no_threads(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_sends_metadata_after_content),
        cmocka_unit_test(test_write_failure_aborts_once),
        cmocka_unit_test(test_commit_failure_returns_nothing),
        cmocka_unit_test(test_get_reads_ahead_on_a_thread),
        cmocka_unit_test(test_get_close_mid_stream_stops_the_worker),
        cmocka_unit_test(test_get_read_error_mid_stream_propagates),
        cmocka_unit_test(test_get_corrupt_content_detected),
        cmocka_unit_test(test_without_a_thread_everything_runs_inline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
