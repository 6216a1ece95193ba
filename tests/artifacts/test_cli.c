/* test_cli.c - pinhole-artifacts as a user runs it: JSON out, documented
 * exit codes, get -O to a sanitized name that never overwrites, and a
 * corrupt artifact that leaves no file behind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "pinhole/hex.h"
#include "test_support.h"

/* Runs the CLI with args in ph_test_dir; returns its exit status, stdout in *out. */
static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...)
{
    char args[2048], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' --root '%s/store' %s 2>/dev/null", ph_test_dir,
             PH_ARTIFACTS_CLI, ph_test_dir, args);
    int status = ph_test_capture(cmd, out);
    assert_int_not_equal(status, -1);
    return status;
}

static char *json_field(const char *text, const char *key)
{
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    const char *v = json_string_value(json_object_get(o, key));
    char *copy = v ? strdup(v) : NULL;
    json_decref(o);
    return copy;
}

/* Writes content to file in ph_test_dir and puts it with put_args; returns
 * the new artifact id (caller frees), put's output in *out (caller frees). */
static char *put_file(const char *file, const char *content, const char *put_args, char **out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", ph_test_dir, file);
    assert_int_equal(ph_test_write_file(path, content, strlen(content)), 0);
    assert_int_equal(run(out, "put %s %s", put_args, file), 0);
    return json_field(*out, "artifact_id");
}

static void test_put_get_stat_ls_rm(void **state)
{
    (void)state;
    char path[4096], *out = NULL;
    char *id = put_file("in.txt", "payload\n", "--tenant acme --filename '../x/CON.txt'", &out);
    char *safe = json_field(out, "safe_filename");
    assert_string_equal(safe, "_CON.txt");
    free(out);

    assert_int_equal(run(&out, "get --tenant acme %s", id), 0);
    assert_string_equal(out, "payload\n");
    free(out);
    assert_int_equal(run(NULL, "get --tenant acme -O %s", id), 0);
    snprintf(path, sizeof path, "%s/_CON.txt", ph_test_dir);
    size_t len = 0;
    char *got = ph_test_read_file(path, &len);
    assert_non_null(got);
    assert_int_equal(len, 8);
    free(got);
    assert_int_equal(run(NULL, "get --tenant acme -O %s", id), 3); /* never overwrites */

    assert_int_equal(run(NULL, "get --tenant evil %s", id), 1);   /* other tenant */
    assert_int_equal(run(NULL, "get --tenant acme ../../etc"), 3); /* malformed id */
    assert_int_equal(run(&out, "stat --tenant acme %s", id), 0);
    assert_non_null(strstr(out, "\"content_disposition\""));
    free(out);
    assert_int_equal(run(&out, "ls --tenant acme"), 0);
    assert_non_null(strstr(out, id));
    free(out);
    assert_int_equal(run(&out, "ls --tenant other"), 0);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(run(NULL, "rm --tenant acme %s", id), 0);
    assert_int_equal(run(NULL, "stat --tenant acme %s", id), 1);
    free(id);
    free(safe);
}

/* Expired is not found, with one answer in ls, stat and get. */
static void test_expired_is_not_found_everywhere(void **state)
{
    (void)state;
    char *out = NULL;
    char *id = put_file("short.txt", "brief\n", "-t ttl --ttl 3", &out);
    json_t *o = json_loads(out, 0, NULL);
    assert_non_null(o);
    json_int_t expires_at = json_integer_value(json_object_get(o, "expires_at"));
    json_decref(o);
    free(out);
    assert_true(expires_at > 0);
    assert_int_equal(run(&out, "ls -t ttl"), 0);
    /* Alive: listed. (Only judged when the listing finished before the
     * expiry: on a loaded machine the 3 s may already be over.) */
    if ((json_int_t)time(NULL) < expires_at)
        assert_non_null(strstr(out, id));
    free(out);
    while ((json_int_t)time(NULL) < expires_at)
        usleep(100 * 1000);
    assert_int_equal(run(NULL, "stat -t ttl %s", id), 1);
    assert_int_equal(run(NULL, "get -t ttl %s", id), 1);
    assert_int_equal(run(&out, "ls -t ttl"), 0);
    if (strstr(out, id) != NULL)
        fail_msg("ls lists an artifact stat calls not found:\n%s", out);
    free(out);
    assert_int_equal(run(&out, "ls"), 0); /* the administrative listing too */
    assert_null(strstr(out, id));
    free(out);
    free(id);
}

static void test_corrupt_get_leaves_no_file(void **state)
{
    (void)state;
    char path[4096], *out = NULL;
    char *id = put_file("c.bin", "0123456789", "-t acme --filename corrupt.bin", &out);
    free(out);
    /* Flip the content through the store layout (docs/artifacts.md). */
    char cmd[9000];
    snprintf(cmd, sizeof cmd,
             "f=$(grep -rlx --include=content 0123456789 '%s/store/objects') && "
             "[ -n \"$f\" ] && printf X | dd of=\"$f\" bs=1 seek=3 conv=notrunc status=none",
             ph_test_dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(run(NULL, "get -t acme -O %s", id), 4);
    snprintf(path, sizeof path, "%s/corrupt.bin", ph_test_dir);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);
    assert_int_equal(run(NULL, "get -t acme %s", id), 4);
    free(id);
}

/* get -O into a directory whose name is not UTF-8 still says what it wrote
 * (jansson refuses the string: the line was "{}"), and an output path that
 * would be cut is refused, never written under a shorter name. */
static void test_get_output_dir_odd_and_long(void **state)
{
    (void)state;
    char path[8192], *out = NULL;
    char *id = put_file("o.txt", "odd\n", "-t acme --filename o.txt", &out);
    free(out);
    snprintf(path, sizeof path, "%s/out\xff", ph_test_dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(run(&out, "get -t acme --output-dir $(printf 'out\\377') %s", id), 0);
    json_t *o = json_loads(out, 0, NULL);
    assert_non_null(o);
    const char *got_id = json_string_value(json_object_get(o, "artifact_id"));
    const char *got_hex = json_string_value(json_object_get(o, "written_hex"));
    assert_non_null(got_id);
    assert_non_null(got_hex);
    assert_string_equal(got_id, id);
    char want[8192 * 2 + 1];
    snprintf(path, sizeof path, "out\xff/o.txt");
    ph_hex_encode(path, strlen(path), want);
    assert_string_equal(got_hex, want);
    json_decref(o);
    free(out);

    /* A directory of 4092 bytes: "<dir>/o.txt" would be cut to "<dir>/o.",
     * a name the sanitizer never gives. Built and used relative to the test
     * directory (each component under NAME_MAX). */
    static char deep[4093], cmd[9000];
    size_t n = 0;
    while (n < sizeof deep - 1) {
        deep[n] = (n + 1) % 201 == 0 ? '/' : 'd';
        n++;
    }
    deep[n] = '\0';
    snprintf(cmd, sizeof cmd, "cd '%s' && mkdir -p %s && '%s' --root '%s/store' get -t acme "
             "--output-dir %s %s 2>/dev/null >/dev/null", ph_test_dir, deep, PH_ARTIFACTS_CLI,
             ph_test_dir, deep, id);
    int st = system(cmd);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    snprintf(cmd, sizeof cmd, "cd '%s' && ls -A %s | wc -l", ph_test_dir, deep);
    assert_int_equal(ph_test_capture(cmd, &out), 0);
    assert_string_equal(out, "0\n"); /* nothing written there */
    free(out);
    free(id);
}

static void test_usage_and_sweep(void **state)
{
    (void)state;
    char *out = NULL;
    assert_int_equal(run(&out, "--help"), 0);
    assert_non_null(strstr(out, "Exit status"));
    free(out);
    assert_int_equal(run(NULL, "%s", ""), 2);
    assert_int_equal(run(NULL, "frobnicate"), 2);
    assert_int_equal(run(NULL, "put in.txt"), 2); /* no tenant */
    assert_int_equal(run(&out, "sweep --now 1"), 0);
    assert_non_null(strstr(out, "\"expired\":0"));
    free(out);
    assert_int_equal(run(&out, "sweep --now 99999999999"), 0);
    assert_null(strstr(out, "\"expired\":0,"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_stat_ls_rm),
        cmocka_unit_test(test_corrupt_get_leaves_no_file),
        cmocka_unit_test(test_expired_is_not_found_everywhere),
        cmocka_unit_test(test_usage_and_sweep),
        cmocka_unit_test(test_get_output_dir_odd_and_long),
    };
    return cmocka_run_group_tests(tests, ph_test_dir_setup, ph_test_dir_teardown);
}
