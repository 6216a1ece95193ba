/* test_store_fs.c - the filesystem store end to end: put/open/delete, tenant
 * isolation, size limits, corruption detected on read, expiry at the exact
 * boundary (open and sweeper), listing. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_name.h"
#include "pinhole/artifact_store.h"
#include "test_support.h"

typedef struct fixture {
    char *root;
    int64_t now;
    ph_artifact_store *store;
} fixture;

static int64_t fake_clock(void *ctx)
{
    return ((fixture *)ctx)->now;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->root = ph_test_mkdtemp();
    f->now = 1000000;
    ph_artifact_store_options o = {.clock = fake_clock, .clock_ctx = f, .max_size = 4 << 20};
    if (ph_artifact_store_open_fs(f->root, &o, &f->store, NULL) != PH_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    ph_artifact_store_close(&f->store);
    ph_test_rmtree(f->root);
    free(f->root);
    free(f);
    return 0;
}

/* Number of entries in root/<sub> and below, at depth levels (0: itself). */
static int count_entries(const char *root, const char *sub)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "find '%s/%s' -mindepth 1 | wc -l", root, sub);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* Path of the content file of m. */
static void content_path(const fixture *f, const ph_artifact_metadata *m, char *out, size_t cap)
{
    char key[65];
    ph_artifact_key(m->tenant_id, m->tenant_id_len, m->artifact_id, 32, key, NULL);
    snprintf(out, cap, "%s/objects/%.2s/%.2s/%s/content", f->root, key, key + 2, key);
}

static void test_put_then_open_round_trip(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    const char data[] = "hello, artifact";
    assert_int_equal(put_bytes(f->store, "acme", "../greeting.txt", data, sizeof data - 1, &m,
                               NULL),
                     PH_OK);
    assert_true(ph_artifact_id_valid(m->artifact_id, strlen(m->artifact_id)));
    assert_int_equal(m->size, sizeof data - 1);
    assert_int_equal(m->created_at, f->now);
    assert_int_equal(m->expires_at, f->now + PH_ARTIFACT_DEFAULT_TTL_SECONDS);
    unsigned char digest[32];
    EVP_Digest(data, sizeof data - 1, digest, NULL, EVP_sha256(), NULL);
    assert_memory_equal(m->sha256, digest, 32);

    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    unsigned char *got = NULL;
    size_t len = 0;
    assert_int_equal(get_bytes(f->store, &ref, &got, &len, NULL), PH_OK);
    assert_int_equal(len, sizeof data - 1);
    assert_memory_equal(got, data, len);
    free(got);

    ph_artifact_metadata *st = NULL;
    assert_int_equal(ph_artifact_open(f->store, &ref, &st, NULL, NULL), PH_OK);
    assert_memory_equal(st->filename, "../greeting.txt", 15); /* stored as given */
    char safe[PH_FILENAME_SAFE_MAX + 1];
    ph_artifact_safe_filename(st, safe);
    assert_string_equal(safe, "greeting.txt");
    ph_artifact_metadata_free(&st);
    ph_artifact_metadata_free(&m);
}

static void test_other_tenant_is_not_found_like_nothing(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(f->store, "acme", "a", "x", 1, &m, NULL), PH_OK);
    ph_artifact_ref other;
    assert_int_equal(ph_artifact_ref_make(&other, "evil", 4, m->artifact_id, 32, NULL), PH_OK);
    ph_artifact_ref absent;
    assert_int_equal(ph_artifact_ref_make(&absent, "acme", 4, "00000000000000000000000000000000",
                                          32, NULL),
                     PH_OK);
    ph_diag d1 = {0}, d2 = {0};
    ph_artifact_metadata *o = NULL;
    ph_artifact_stream *s = NULL;
    assert_int_equal(ph_artifact_open(f->store, &other, &o, &s, &d1), PH_E_NOT_FOUND);
    assert_int_equal(ph_artifact_open(f->store, &absent, &o, &s, &d2), PH_E_NOT_FOUND);
    assert_string_equal(d1.message, d2.message);
    assert_int_equal(ph_artifact_delete(f->store, &other, NULL), PH_E_NOT_FOUND);
    /* still there for its owner */
    ph_artifact_ref mine = ph_artifact_metadata_ref(m);
    assert_int_equal(ph_artifact_open(f->store, &mine, &o, NULL, NULL), PH_OK);
    ph_artifact_metadata_free(&o);
    ph_artifact_metadata_free(&m);
}

static void test_delete(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(f->store, "acme", "a", "x", 1, &m, NULL), PH_OK);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    assert_int_equal(ph_artifact_delete(f->store, &ref, NULL), PH_OK);
    ph_artifact_metadata *o = NULL;
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, NULL, NULL), PH_E_NOT_FOUND);
    assert_int_equal(ph_artifact_delete(f->store, &ref, NULL), PH_E_NOT_FOUND);
    assert_int_equal(count_entries(f->root, "staging"), 0);
    ph_artifact_metadata_free(&m);
}

static void test_size_limit_leaves_nothing(void **state)
{
    fixture *f = *state;
    size_t n = (4 << 20) + 1;
    unsigned char *big = calloc(1, n);
    ph_artifact_metadata *m = NULL;
    ph_diag d = {0};
    assert_int_equal(put_bytes(f->store, "acme", "big", big, n, &m, &d), PH_E_LIMIT);
    assert_null(m);
    assert_int_equal(count_entries(f->root, "objects"), 0);
    assert_int_equal(count_entries(f->root, "staging"), 0);
    /* exactly the limit is fine */
    assert_int_equal(put_bytes(f->store, "acme", "big", big, n - 1, &m, NULL), PH_OK);
    /* a per-put limit below the store's */
    mem_source src = {.data = big, .len = 101};
    ph_artifact_source s = {.read = mem_read, .ctx = &src};
    ph_artifact_spec spec = {.tenant_id = "acme", .tenant_id_len = 4, .max_size = 100};
    ph_artifact_metadata *m2 = NULL;
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m2, NULL), PH_E_LIMIT);
    free(big);
    ph_artifact_metadata_free(&m);
}

static void test_bad_specs_refused(void **state)
{
    fixture *f = *state;
    mem_source src = {.data = (const unsigned char *)"x", .len = 1};
    ph_artifact_source s = {.read = mem_read, .ctx = &src};
    ph_artifact_metadata *m = NULL;
    ph_artifact_spec spec = {.tenant_id = "", .tenant_id_len = 0};
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m, NULL), PH_E_INVAL);
    spec = (ph_artifact_spec){.tenant_id = "t", .tenant_id_len = 1, .content_type = "a\r\nb"};
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m, NULL), PH_E_INVAL);
    spec = (ph_artifact_spec){.tenant_id = "t", .tenant_id_len = 1, .source_path = "/etc/passwd"};
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m, NULL), PH_E_INVAL);
    spec = (ph_artifact_spec){.tenant_id = "t", .tenant_id_len = 1, .ttl_seconds = -5};
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m, NULL), PH_E_INVAL);
    assert_int_equal(count_entries(f->root, "objects"), 0);
    assert_int_equal(count_entries(f->root, "staging"), 0);
}

static void flip_byte(const char *path, off_t at)
{
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, at), 1);
    c ^= 0x01;
    assert_int_equal(pwrite(fd, &c, 1, at), 1);
    close(fd);
}

static void test_small_corruption_fails_at_open(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(f->store, "acme", "a", "0123456789", 10, &m, NULL), PH_OK);
    char path[4096];
    content_path(f, m, path, sizeof path);
    flip_byte(path, 5);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *o = NULL;
    ph_artifact_stream *s = NULL;
    ph_diag d = {0};
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, &s, &d), PH_E_FORMAT);
    assert_non_null(strstr(d.message, "SHA-256 mismatch"));
    assert_null(s);
    /* truncated: size disagrees, refused before any byte */
    assert_int_equal(truncate(path, 4), 0);
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, &s, &d), PH_E_FORMAT);
    assert_non_null(strstr(d.message, "content is 4 bytes"));
    ph_artifact_metadata_free(&m);
}

static void test_large_corruption_withholds_the_end(void **state)
{
    fixture *f = *state;
    size_t n = 3 << 20; /* above PH_ARTIFACT_PREVERIFY_MAX */
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 7);
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(f->store, "acme", "big.bin", data, n, &m, NULL), PH_OK);
    char path[4096];
    content_path(f, m, path, sizeof path);
    flip_byte(path, (off_t)n - 1); /* the very last byte */
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    unsigned char *got = NULL;
    size_t len = 0;
    ph_diag d = {0};
    assert_int_equal(get_bytes(f->store, &ref, &got, &len, &d), PH_E_FORMAT);
    assert_non_null(strstr(d.message, "SHA-256 mismatch"));
    assert_true(len < n);          /* the final chunk was never delivered */
    assert_memory_equal(got, data, len); /* and what was delivered is a prefix */
    free(got);
    /* corruption early in the file is also reported at the end */
    flip_byte(path, (off_t)n - 1);
    flip_byte(path, 10);
    assert_int_equal(get_bytes(f->store, &ref, &got, &len, &d), PH_E_FORMAT);
    assert_true(len < n);
    free(got);
    free(data);
    ph_artifact_metadata_free(&m);
}

static void test_corrupt_metadata_is_an_error(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(f->store, "acme", "a", "x", 1, &m, NULL), PH_OK);
    char path[4096];
    content_path(f, m, path, sizeof path);
    strcpy(strrchr(path, '/') + 1, "metadata.json");
    assert_int_equal(ph_test_write_file(path, "{}", 2), 0);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *o = NULL;
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, NULL, NULL), PH_E_FORMAT);
    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(f->store, f->now + 100000000, &st, NULL), PH_OK);
    assert_int_equal(st.unreadable, 1); /* reported, never deleted blindly */
    assert_int_equal(st.expired, 0);
    ph_artifact_metadata_free(&m);
}

static void test_missing_file_in_published_object_is_corruption(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(f->store, "acme", "a", "x", 1, &m, NULL), PH_OK);
    char path[4096];
    content_path(f, m, path, sizeof path);
    assert_int_equal(unlink(path), 0); /* content gone, object still published */
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *o = NULL;
    ph_artifact_stream *s = NULL;
    ph_diag d = {0};
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, &s, &d), PH_E_FORMAT);
    assert_non_null(strstr(d.message, "content missing"));
    ph_artifact_metadata_free(&m);
}

static void test_expiry_at_the_exact_boundary(void **state)
{
    fixture *f = *state;
    mem_source src = {.data = (const unsigned char *)"x", .len = 1};
    ph_artifact_source s = {.read = mem_read, .ctx = &src};
    ph_artifact_spec spec = {.tenant_id = "acme", .tenant_id_len = 4, .ttl_seconds = 60};
    ph_artifact_metadata *m = NULL;
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m, NULL), PH_OK);
    assert_int_equal(m->expires_at, f->now + 60);
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *o = NULL;

    f->now = m->expires_at - 1;
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, NULL, NULL), PH_OK);
    ph_artifact_metadata_free(&o);
    f->now = m->expires_at; /* expired, and the sweeper has not run */
    ph_diag d = {0};
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, NULL, &d), PH_E_NOT_FOUND);
    assert_string_equal(d.message, "artifact not found");

    ph_artifact_sweep_stats st;
    assert_int_equal(ph_artifact_sweep(f->store, m->expires_at - 1, &st, NULL), PH_OK);
    assert_int_equal(st.examined, 1);
    assert_int_equal(st.expired, 0);
    f->now = m->expires_at - 1;
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, NULL, NULL), PH_OK);
    ph_artifact_metadata_free(&o);
    assert_int_equal(ph_artifact_sweep(f->store, m->expires_at, &st, NULL), PH_OK);
    assert_int_equal(st.expired, 1);
    assert_int_equal(ph_artifact_open(f->store, &ref, &o, NULL, NULL), PH_E_NOT_FOUND);
    assert_int_equal(count_entries(f->root, "staging"), 0);
    ph_artifact_metadata_free(&m);
}

static void test_configurable_default_ttl(void **state)
{
    fixture *f = *state;
    ph_artifact_store *s = NULL;
    ph_artifact_store_options o = {.default_ttl_seconds = 7, .clock = fake_clock, .clock_ctx = f};
    assert_int_equal(ph_artifact_store_open_fs(f->root, &o, &s, NULL), PH_OK);
    ph_artifact_metadata *m = NULL;
    assert_int_equal(put_bytes(s, "acme", "a", "x", 1, &m, NULL), PH_OK);
    assert_int_equal(m->expires_at - m->created_at, 7);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
}

static bool count_visit(void *arg, const ph_artifact_metadata *m)
{
    (void)m;
    ++*(int *)arg;
    return true;
}

static void test_list_and_empty_artifact(void **state)
{
    fixture *f = *state;
    ph_artifact_metadata *m = NULL;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(put_bytes(f->store, i ? "b" : "a", "", "", 0, &m, NULL), PH_OK);
        assert_int_equal(m->size, 0);
        ph_artifact_ref ref = ph_artifact_metadata_ref(m);
        unsigned char *got = NULL;
        size_t len = 1;
        assert_int_equal(get_bytes(f->store, &ref, &got, &len, NULL), PH_OK);
        assert_int_equal(len, 0);
        free(got);
        ph_artifact_metadata_free(&m);
    }
    int n = 0;
    assert_int_equal(ph_artifact_list(f->store, count_visit, &n, NULL), PH_OK);
    assert_int_equal(n, 3);
}

static void test_source_error_aborts_put(void **state)
{
    fixture *f = *state;
    ph_artifact_source s = {.read = NULL};
    ph_artifact_spec spec = {.tenant_id = "acme", .tenant_id_len = 4};
    ph_artifact_metadata *m = NULL;
    assert_int_equal(ph_artifact_put(f->store, &spec, &s, &m, NULL), PH_E_INVAL);
    int bad_fd = -1;
    ph_artifact_source fds = {.read = ph_artifact_read_fd, .ctx = &bad_fd};
    assert_int_equal(ph_artifact_put(f->store, &spec, &fds, &m, NULL), PH_E_IO);
    assert_int_equal(count_entries(f->root, "objects"), 0);
    assert_int_equal(count_entries(f->root, "staging"), 0);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_put_then_open_round_trip),
        T(test_other_tenant_is_not_found_like_nothing),
        T(test_delete),
        T(test_size_limit_leaves_nothing),
        T(test_bad_specs_refused),
        T(test_small_corruption_fails_at_open),
        T(test_large_corruption_withholds_the_end),
        T(test_corrupt_metadata_is_an_error),
        T(test_missing_file_in_published_object_is_corruption),
        T(test_expiry_at_the_exact_boundary),
        T(test_configurable_default_ttl),
        T(test_list_and_empty_artifact),
        T(test_source_error_aborts_put),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
