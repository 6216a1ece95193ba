/* gate_sandbox_artifact_key_and_filename.c - gate 12 (ADR-0029 decision 12)
 * in one place: the storage key is (tenant id, artifact id) and nothing
 * else, the filename is stored as given and never a path component, and
 * what leaves the store (local name, Content-Disposition) is sanitized. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "artifact_test_util.h"
#include "pinhole/artifact_name.h"
#include "pinhole/artifact_store.h"
#include "test_support.h"

/* Collects every path below dir (relative), one per line, into out. */
static void walk(const char *root, const char *rel, char *out, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s", root, rel);
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
        strncat(out, sub, cap - strlen(out) - 2);
        strcat(out, "\n");
        char full[8192];
        snprintf(full, sizeof full, "%s%s", root, sub);
        struct stat sb;
        if (lstat(full, &sb) == 0 && S_ISDIR(sb.st_mode))
            walk(root, sub, out, cap);
    }
    closedir(d);
}

static void test_gate_artifact_key_and_filename(void **state)
{
    (void)state;
    char *root = ph_test_mkdtemp();
    ph_artifact_store *s = NULL;
    assert_int_equal(ph_artifact_store_open_fs(root, NULL, &s, NULL), PH_OK);
    static const char filename[] = "../../../etc/cron.d/\xe2\x80\xae" "evil\"\r\nX: y.sh";
    static const char tenant[] = "../tenant\0/..";
    mem_source src = {.data = (const unsigned char *)"payload", .len = 7};
    ph_artifact_source source = {.read = mem_read, .ctx = &src};
    ph_artifact_spec spec = {.tenant_id = tenant, .tenant_id_len = sizeof tenant - 1,
                             .filename = filename, .filename_len = sizeof filename - 1};
    ph_artifact_metadata *m = NULL;
    assert_int_equal(ph_artifact_put(s, &spec, &source, &m, NULL), PH_OK);

    /* The object lives exactly at the key of (tenant, id). */
    char key[PH_ARTIFACT_KEY_LEN + 1], expected[4096], tree[65536] = "";
    assert_int_equal(ph_artifact_key(tenant, sizeof tenant - 1, m->artifact_id, 32, key, NULL),
                     PH_OK);
    snprintf(expected, sizeof expected,
             "/objects/%.2s\n/objects/%.2s/%.2s\n/objects/%.2s/%.2s/%s\n"
             "/objects/%.2s/%.2s/%s/content\n/objects/%.2s/%.2s/%s/metadata.json\n",
             key, key, key + 2, key, key + 2, key, key, key + 2, key, key, key + 2, key);
    walk(root, "", tree, sizeof tree);
    for (const char *line = expected; *line;) {
        const char *nl = strchr(line, '\n');
        char one[512];
        snprintf(one, sizeof one, "%.*s\n", (int)(nl - line), line);
        assert_non_null(strstr(tree, one));
        line = nl + 1;
    }
    /* Nothing of the filename or the tenant appears anywhere on disk. */
    assert_null(strstr(tree, "etc"));
    assert_null(strstr(tree, "evil"));
    assert_null(strstr(tree, "tenant"));
    assert_null(strstr(tree, ".."));

    /* Stored as given ... */
    ph_artifact_ref ref = ph_artifact_metadata_ref(m);
    ph_artifact_metadata *back = NULL;
    assert_int_equal(ph_artifact_open(s, &ref, &back, NULL, NULL), PH_OK);
    assert_int_equal(back->filename_len, sizeof filename - 1);
    assert_memory_equal(back->filename, filename, sizeof filename - 1);
    /* ... sanitized on the way out. */
    char safe[PH_FILENAME_SAFE_MAX + 1], cd[PH_CONTENT_DISPOSITION_MAX + 1];
    size_t n = ph_artifact_safe_filename(back, safe);
    assert_true(ph_filename_is_safe(safe, n, NULL));
    assert_string_equal(safe, "evil_X_ y.sh");
    ph_artifact_content_disposition(back, cd);
    assert_string_equal(cd, "attachment; filename=\"evil_X_ y.sh\"; "
                            "filename*=UTF-8''evil_X_%20y.sh");

    /* The id is the only handle: a malformed one is refused, another
     * tenant's ref is not found. */
    ph_artifact_ref bad;
    assert_int_equal(ph_artifact_ref_make(&bad, tenant, sizeof tenant - 1, "../x", 4, NULL),
                     PH_E_INVAL);
    ph_artifact_ref other;
    assert_int_equal(ph_artifact_ref_make(&other, "../tenant", 9, m->artifact_id, 32, NULL), PH_OK);
    ph_artifact_metadata *none = NULL;
    assert_int_equal(ph_artifact_open(s, &other, &none, NULL, NULL), PH_E_NOT_FOUND);

    ph_artifact_metadata_free(&back);
    ph_artifact_metadata_free(&m);
    ph_artifact_store_close(&s);
    ph_test_rmtree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_artifact_key_and_filename),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
