/* test_artifact_key.c - the storage key comes from (tenant, artifact id) and
 * nothing else: hostile tenants are hashed, malformed ids never reach a
 * backend, filenames never reach a key or a path. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_store.h"
#include "test_support.h"

static const char good_id[] = "0123456789abcdef0123456789abcdef";

static bool is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static void test_key_is_deterministic_hex(void **state)
{
    (void)state;
    char k1[65], k2[65];
    assert_int_equal(ph_artifact_key("acme", 4, good_id, 32, k1, NULL), PH_OK);
    assert_int_equal(ph_artifact_key("acme", 4, good_id, 32, k2, NULL), PH_OK);
    assert_string_equal(k1, k2);
    assert_int_equal(strlen(k1), 64);
    assert_true(is_lower_hex(k1, 64));
}

static void test_hostile_tenants_give_distinct_safe_keys(void **state)
{
    (void)state;
    static char big[10 * 1024];
    memset(big, '/', sizeof big);
    struct {
        const char *t;
        size_t len;
    } tenants[] = {
        {"../", 3}, {"../../etc", 9}, {"a", 1}, {"a\0", 2}, {"a\0b", 3}, {"\0", 1},
        {"acme/../other", 13}, {"\xff\xfe", 2}, {"a\nb", 3}, {big, sizeof big},
    };
    size_t n = sizeof tenants / sizeof tenants[0];
    char keys[16][65];
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ph_artifact_key(tenants[i].t, tenants[i].len, good_id, 32, keys[i], NULL),
                         PH_OK);
        assert_true(is_lower_hex(keys[i], 64));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(keys[i], keys[j]);
    }
}

static void test_tenant_limits(void **state)
{
    (void)state;
    char key[65];
    static char huge[PH_ARTIFACT_TENANT_MAX + 1];
    assert_int_equal(ph_artifact_key("", 0, good_id, 32, key, NULL), PH_E_INVAL);
    assert_int_equal(ph_artifact_key(huge, sizeof huge, good_id, 32, key, NULL), PH_E_LIMIT);
    assert_int_equal(ph_artifact_key(huge, PH_ARTIFACT_TENANT_MAX, good_id, 32, key, NULL), PH_OK);
}

static const struct {
    const char *id;
    size_t len;
} malformed[] = {
    {"", 0},
    {"0123456789abcdef0123456789abcde", 31},
    {"0123456789abcdef0123456789abcdef0", 33},
    {"0123456789ABCDEF0123456789abcdef", 32},
    {"0123456789abcdef0123456789abcdeg", 32},
    {"../../../../../../../../../../..", 32},
    {"0123456789abcdef\0" "123456789abcdef", 32},
    {"0123456789abcdef0123456789abcd/f", 32},
    {" 123456789abcdef0123456789abcdef", 32},
    {"0x23456789abcdef0123456789abcdef", 32},
};

static void test_malformed_ids_refused(void **state)
{
    (void)state;
    char key[65];
    ph_artifact_ref ref;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        ph_diag d = {0};
        assert_int_equal(ph_artifact_key("t", 1, malformed[i].id, malformed[i].len, key, &d),
                         PH_E_INVAL);
        assert_non_null(strstr(d.message, "32 lowercase hex"));
        assert_int_equal(ph_artifact_ref_make(&ref, "t", 1, malformed[i].id, malformed[i].len,
                                              NULL),
                         PH_E_INVAL);
    }
}

/* A backend that only counts calls: a malformed ref must never reach it. */
static int spy_calls;
static ph_status spy_not_found(void)
{
    spy_calls++;
    return PH_E_NOT_FOUND;
}
static ph_status spy_begin(ph_artifact_backend *b, const char *k, ph_artifact_backend_writer **w,
                           ph_diag *d)
{
    (void)b; (void)k; (void)w; (void)d;
    return spy_not_found();
}
static ph_status spy_open(ph_artifact_backend *b, const char *k, char **m, size_t *ml,
                          ph_artifact_backend_reader **r, uint64_t *cs, ph_diag *d)
{
    (void)b; (void)k; (void)m; (void)ml; (void)r; (void)cs; (void)d;
    return spy_not_found();
}
static ph_status spy_remove(ph_artifact_backend *b, const char *k, ph_diag *d)
{
    (void)b; (void)k; (void)d;
    return spy_not_found();
}
static void spy_destroy(ph_artifact_backend *b)
{
    (void)b;
}
static const ph_artifact_backend_ops spy_ops = {
    .name = "spy", .write_begin = spy_begin, .open = spy_open, .remove = spy_remove,
    .destroy = spy_destroy,
};

static void test_malformed_ref_never_touches_storage(void **state)
{
    (void)state;
    static ph_artifact_backend spy = {.ops = &spy_ops};
    ph_artifact_store *s = NULL;
    assert_int_equal(ph_artifact_store_new(&spy, NULL, &s, NULL), PH_OK);
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        ph_artifact_ref ref = {.tenant_id = "t", .tenant_id_len = 1};
        /* Forge the ref directly, bypassing ph_artifact_ref_make. */
        memcpy(ref.artifact_id, malformed[i].id, malformed[i].len); /* up to 33, unterminated */
        ph_artifact_metadata *m = NULL;
        ph_artifact_stream *st = NULL;
        assert_int_equal(ph_artifact_open(s, &ref, &m, &st, NULL), PH_E_INVAL);
        assert_int_equal(ph_artifact_delete(s, &ref, NULL), PH_E_INVAL);
    }
    assert_int_equal(spy_calls, 0);
    ph_artifact_ref ok;
    assert_int_equal(ph_artifact_ref_make(&ok, "t", 1, good_id, 32, NULL), PH_OK);
    assert_int_equal(ph_artifact_delete(s, &ok, NULL), PH_E_NOT_FOUND);
    assert_int_equal(spy_calls, 1);
    ph_artifact_store_close(&s);
}

/* Every name under the store root is ours: fixed names or lowercase hex. */
static void assert_tree_has_only_hex_names(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        bool fixed = strcmp(e->d_name, "content") == 0 || strcmp(e->d_name, "metadata.json") == 0;
        assert_true(fixed || is_lower_hex(e->d_name, strlen(e->d_name)));
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        assert_int_equal(lstat(path, &sb), 0);
        if (S_ISDIR(sb.st_mode))
            assert_tree_has_only_hex_names(path, depth + 1);
    }
    closedir(d);
}

static void test_filename_never_reaches_the_key(void **state)
{
    (void)state;
    char *root = ph_test_mkdtemp();
    ph_artifact_store *s = NULL;
    assert_int_equal(ph_artifact_store_open_fs(root, NULL, &s, NULL), PH_OK);
    const char *names[] = {"../../../../etc/passwd", "/etc/shadow", "..", "a/b/c", "C:\\x\\y",
                           "con", ("\xe2\x80\xae" "fdp.exe")};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ph_artifact_metadata *m = NULL;
        assert_int_equal(put_bytes(s, "../tenant", names[i], "x", 1, &m, NULL), PH_OK);
        char key[65], path[4096];
        assert_int_equal(ph_artifact_key(m->tenant_id, m->tenant_id_len, m->artifact_id, 32, key,
                                         NULL),
                         PH_OK);
        snprintf(path, sizeof path, "%s/objects/%.2s/%.2s/%s/content", root, key, key + 2, key);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        assert_memory_equal(m->filename, names[i], strlen(names[i])); /* stored as given */
        ph_artifact_metadata_free(&m);
    }
    char objects[4096];
    snprintf(objects, sizeof objects, "%s/objects", root);
    assert_tree_has_only_hex_names(objects, 0);
    ph_artifact_store_close(&s);
    ph_test_rmtree(root);
    free(root);
}

static void test_generated_ids_are_canonical_and_distinct(void **state)
{
    (void)state;
    char a[33], b[33];
    assert_int_equal(ph_artifact_id_generate(a, NULL), PH_OK);
    assert_int_equal(ph_artifact_id_generate(b, NULL), PH_OK);
    assert_true(ph_artifact_id_valid(a, strlen(a)));
    assert_true(ph_artifact_id_valid(b, strlen(b)));
    assert_string_not_equal(a, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_is_deterministic_hex),
        cmocka_unit_test(test_hostile_tenants_give_distinct_safe_keys),
        cmocka_unit_test(test_tenant_limits),
        cmocka_unit_test(test_malformed_ids_refused),
        cmocka_unit_test(test_malformed_ref_never_touches_storage),
        cmocka_unit_test(test_filename_never_reaches_the_key),
        cmocka_unit_test(test_generated_ids_are_canonical_and_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
