/* test_compile_write.c - tables are replaced atomically: the new bytes or the
 * old ones, never a prefix; a failure leaves no temporary file behind; and a
 * policy with any error never produces a table. */
#include <dirent.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "table_fixture.h"
#include "pinhole/file_atomic.h"

static const char *const POLICY = "version: 1\nlists:\n  default:\n    rules:\n"
                                  "      - host: api.github.com\n        ports: [443]\n";

static size_t count_entries(const char *dir)
{
    size_t n = 0;
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void write_replaces_the_file(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/t.ptab", dir);
    assert_int_equal(ph_test_write_file(path, "old", 3), 0);
    uint8_t *image;
    size_t len;
    fx_compile(POLICY, &image, &len);
    assert_int_equal(ph_file_write_atomic(path, image, len, 0644, PH_WRITE_REPLACE, NULL), PH_OK);
    size_t got_len;
    char *got = ph_test_read_file(path, &got_len);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, image, len);
    assert_int_equal(count_entries(dir), 1);
    free(got);
    free(image);
    ph_test_rmtree(dir);
    free(dir);
}

static void failed_write_keeps_the_old_file_and_no_temp(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[4096];
    snprintf(path, sizeof path, "%s/t.ptab", dir);
    assert_int_equal(ph_test_write_file(path, "old table", 9), 0);
    uint8_t *image;
    size_t len;
    fx_compile(POLICY, &image, &len);
    /* A file size limit makes write() fail half way (EFBIG, SIGXFSZ ignored). */
    struct rlimit old, small = {.rlim_cur = 64, .rlim_max = RLIM_INFINITY};
    getrlimit(RLIMIT_FSIZE, &old);
    small.rlim_max = old.rlim_max;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    ph_diag diag = {0};
    ph_status st = ph_file_write_atomic(path, image, len, 0644, PH_WRITE_REPLACE, &diag);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    assert_int_equal(st, PH_E_IO);
    assert_non_null(strstr(diag.message, "write"));
    size_t got_len;
    char *got = ph_test_read_file(path, &got_len);
    assert_int_equal(got_len, 9);
    assert_memory_equal(got, "old table", 9);
    assert_int_equal(count_entries(dir), 1); /* no temporary file left */
    free(got);

    /* Renaming over a directory fails after the write: same guarantees. */
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    char inner[4300];
    snprintf(inner, sizeof inner, "%s/x", sub);
    assert_int_equal(ph_test_write_file(inner, "x", 1), 0);
    assert_int_equal(ph_file_write_atomic(sub, image, len, 0644, PH_WRITE_REPLACE, &diag), PH_E_IO);
    assert_int_equal(count_entries(dir), 2);
    /* A missing directory: nothing created anywhere. */
    snprintf(sub, sizeof sub, "%s/missing/t.ptab", dir);
    assert_int_equal(ph_file_write_atomic(sub, image, len, 0644, PH_WRITE_REPLACE, &diag), PH_E_IO);
    assert_int_equal(count_entries(dir), 2);
    free(image);
    ph_test_rmtree(dir);
    free(dir);
}

static int run_compile(const char *in, const char *out)
{
    char a0[] = "compile", a1[] = "-q", a3[] = "-o", inb[4096], outb[4096];
    if (snprintf(inb, sizeof inb, "%s", in) >= (int)sizeof inb ||
        snprintf(outb, sizeof outb, "%s", out) >= (int)sizeof outb)
        return -1;
    char *argv[] = {a0, a1, inb, a3, outb, NULL};
    return pc_cmd_compile(5, argv);
}

static void invalid_policy_never_writes_a_table(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/allow.yaml", dir);
    snprintf(out, sizeof out, "%s/t.ptab", dir);
    assert_int_equal(ph_test_write_file(in, POLICY, strlen(POLICY)), 0);
    assert_int_equal(run_compile(in, out), 0);
    size_t good_len;
    char *good = ph_test_read_file(out, &good_len);
    ph_table *t = NULL;
    assert_int_equal(ph_table_open(out, &t, NULL), PH_OK);
    ph_table_close(&t);

    static const char bad[] = "version: 1\nlists:\n  default:\n    rules:\n"
                              "      - host: API.github.com\n        ports: [443]\n";
    assert_int_equal(ph_test_write_file(in, bad, strlen(bad)), 0);
    assert_int_equal(run_compile(in, out), 1);
    size_t now_len;
    char *now = ph_test_read_file(out, &now_len);
    assert_int_equal(now_len, good_len);
    assert_memory_equal(now, good, good_len);
    assert_int_equal(count_entries(dir), 2);

    char fresh[4200];
    snprintf(fresh, sizeof fresh, "%s/never.ptab", dir);
    assert_int_equal(run_compile(in, fresh), 1);
    assert_int_equal(access(fresh, F_OK), -1);
    char u0[] = "compile";
    char *usage[] = {u0, in, NULL};
    assert_int_equal(pc_cmd_compile(2, usage), 2);
    free(good);
    free(now);
    ph_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(write_replaces_the_file),
        cmocka_unit_test(failed_write_keeps_the_old_file_and_no_temp),
        cmocka_unit_test(invalid_policy_never_writes_a_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
