/* test_store_port.c - the port over a scripted backend: a failing backend
 * write or commit fails the put, aborts the write exactly once and returns
 * no metadata; the backend sees the content before the metadata. */
#include <stdlib.h>
#include <string.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_metadata.h"
#include "test_support.h"

typedef struct script {
    ph_artifact_backend base;
    size_t fail_write_after; /* bytes accepted before write fails; SIZE_MAX: never */
    bool fail_commit;
    size_t written;
    int begins, aborts, commits;
    bool meta_after_content;
} script;

struct ph_artifact_backend_writer {
    script *s;
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
    (void)buf;
    if (w->s->written + len > w->s->fail_write_after) {
        if (d) {
            d->status = PH_E_IO;
            strcpy(d->message, "disk on fire");
        }
        return PH_E_IO;
    }
    w->s->written += len;
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

static void s_destroy(ph_artifact_backend *b)
{
    (void)b;
}

static const ph_artifact_backend_ops script_ops = {
    .name = "script", .write_begin = s_begin, .write = s_write, .write_commit = s_commit,
    .write_abort = s_abort, .destroy = s_destroy,
};

static ph_artifact_store *store_over(script *s)
{
    memset(s, 0, sizeof *s);
    s->base.ops = &script_ops;
    s->fail_write_after = SIZE_MAX;
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_success_sends_metadata_after_content),
        cmocka_unit_test(test_write_failure_aborts_once),
        cmocka_unit_test(test_commit_failure_returns_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
