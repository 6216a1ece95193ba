/*
 * test_check_corpus.c - every bad allowlist under tests/data/allowlists/bad
 * gives exactly its golden text diagnostics (NAME.expected); every good one
 * loads with none; and every error code has a corpus file or a unit test.
 *
 * The goldens were produced by `policyc check -q NAME.yaml` in that directory
 * and reviewed by hand; regenerate them the same way when a message changes
 * on purpose.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load.h"
#include "test_support.h"

#define MAX_FILES 256

static size_t list_yaml(const char *dir, char *names[static MAX_FILES])
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".yaml") == 0) {
            assert_true(n < MAX_FILES);
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    for (size_t i = 1; i < n; i++) /* sorted, so failures come in a stable order */
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    return n;
}

/* Loads dir/name (displayed as name) and returns the text the printer makes. */
static char *check_text(const char *dir, const char *name, ph_status *st, pc_diagnostics *d)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pc_policy *p = NULL;
    *st = pc_policy_load_file(path, name, &p, d);
    if (*st == PH_OK)
        assert_non_null(p);
    else
        assert_null(p);
    pc_policy_free(&p);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    assert_non_null(out);
    assert_int_equal(pc_diagnostics_print(out, d, PC_FORMAT_TEXT), PH_OK);
    fclose(out);
    return text;
}

static void test_bad_corpus_matches_goldens(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ph_test_source_path("tests/data/allowlists/bad"));
    char *names[MAX_FILES];
    size_t n = list_yaml(dir, names);
    assert_true(n >= 40);
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        pc_diagnostics d;
        pc_diagnostics_init(&d);
        ph_status st;
        char *got = check_text(dir, names[i], &st, &d);
        char *golden = NULL;
        assert_true(asprintf(&golden, "%s/%.*s.expected", dir, (int)(strlen(names[i]) - 5),
                             names[i]) > 0);
        char *want = ph_test_read_file(golden, NULL);
        if (!want || strcmp(got, want) != 0) {
            fprintf(stderr, "MISMATCH %s\n--- expected\n%s--- got\n%s", names[i],
                    want ? want : "(no golden file)\n", got);
            failures++;
        }
        /* The file named pcNNN-... must produce code NNN. */
        int code = atoi(names[i] + 2);
        bool found = false;
        for (size_t k = 0; k < d.count; k++)
            found |= (int)d.items[k].code == code;
        if (!found) {
            fprintf(stderr, "%s: no PC%03d diagnostic\n", names[i], code);
            failures++;
        }
        /* Errors mean no policy; warnings alone still load. */
        if (code < 100 && st != PH_E_FORMAT) {
            fprintf(stderr, "%s: status %d, want PH_E_FORMAT\n", names[i], (int)st);
            failures++;
        }
        if (code >= 100 && (st != PH_OK || d.errors != 0)) {
            fprintf(stderr, "%s: a warnings-only file must load\n", names[i]);
            failures++;
        }
        free(golden);
        free(want);
        free(got);
        free(names[i]);
        pc_diagnostics_free(&d);
    }
    assert_int_equal(failures, 0);
}

static void test_good_corpus_loads_clean(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ph_test_source_path("tests/data/allowlists/good"));
    char *names[MAX_FILES];
    size_t n = list_yaml(dir, names);
    assert_true(n >= 4);
    for (size_t i = 0; i < n; i++) {
        pc_diagnostics d;
        pc_diagnostics_init(&d);
        ph_status st;
        char *got = check_text(dir, names[i], &st, &d);
        if (st != PH_OK || d.count != 0)
            fprintf(stderr, "%s:\n%s", names[i], got);
        assert_int_equal(st, PH_OK);
        assert_int_equal(d.count, 0);
        free(got);
        free(names[i]);
        pc_diagnostics_free(&d);
    }
}

static void test_example_allowlist_is_valid(void **state)
{
    (void)state;
    pc_diagnostics d;
    pc_diagnostics_init(&d);
    pc_policy *p = NULL;
    assert_int_equal(pc_policy_load_file(ph_test_source_path("examples/allowlist.yaml"),
                                         "examples/allowlist.yaml", &p, &d),
                     PH_OK);
    assert_int_equal(d.count, 0);
    assert_true(pc_policy_find_list(p, "default") >= 0);
    pc_policy_free(&p);
    pc_diagnostics_free(&d);
}

/* Codes exercised by unit tests instead of corpus files (they need a missing
 * file, a huge input or a lowered limit): see test_load.c. */
static const int unit_tested[] = {PC_E_READ,          PC_E_FILE_TOO_LARGE,    PC_E_TOO_MANY_LISTS,
                                  PC_E_TOO_MANY_RULES, PC_E_TOO_MANY_PORTS,    PC_E_TOO_MANY_INCLUDES,
                                  PC_E_EFFECTIVE_TOO_LARGE};

static void test_every_code_is_covered(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", ph_test_source_path("tests/data/allowlists/bad"));
    char *names[MAX_FILES];
    size_t n = list_yaml(dir, names);
    size_t ncodes;
    const pc_code_info *codes = pc_code_all(&ncodes);
    for (size_t c = 0; c < ncodes; c++) {
        bool covered = false;
        for (size_t k = 0; k < sizeof unit_tested / sizeof *unit_tested; k++)
            covered |= unit_tested[k] == (int)codes[c].code;
        for (size_t i = 0; i < n; i++)
            covered |= atoi(names[i] + 2) == (int)codes[c].code;
        if (!covered)
            fprintf(stderr, "PC%03d (%s) has no corpus file\n", (int)codes[c].code, codes[c].name);
        assert_true(covered);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
}

static void test_every_code_is_documented(void **state)
{
    (void)state;
    char *doc = ph_test_read_file(ph_test_source_path("docs/allowlist.md"), NULL);
    assert_non_null(doc);
    size_t ncodes;
    const pc_code_info *codes = pc_code_all(&ncodes);
    for (size_t c = 0; c < ncodes; c++) {
        char heading[96];
        snprintf(heading, sizeof heading, "### PC%03d `%s`", (int)codes[c].code, codes[c].name);
        if (!strstr(doc, heading))
            fprintf(stderr, "docs/allowlist.md lacks \"%s\"\n", heading);
        assert_non_null(strstr(doc, heading));
    }
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_corpus_matches_goldens),
        cmocka_unit_test(test_good_corpus_loads_clean),
        cmocka_unit_test(test_example_allowlist_is_valid),
        cmocka_unit_test(test_every_code_is_covered),
        cmocka_unit_test(test_every_code_is_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
