/* test_cli_s3.c - pinhole-artifacts --backend s3 --s3-config FILE on the
 * RGW fixture (PH_TEST_S3_CONFIG): put, get, stat, ls, rm, sweep with the
 * same JSON and exit codes as the filesystem store; a wrong secret is exit
 * 3; the option rules are usage errors (exit 2). Exits 77 without the
 * fixture (ceph not installed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "test_support.h"

static char config[4200];

/* Runs the CLI with args in ph_test_dir; returns its exit status, stdout in *out. */
static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...)
{
    char args[2048], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>/dev/null", ph_test_dir, PH_ARTIFACTS_CLI,
             args);
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

/* A copy of the fixture's configuration on a prefix of its own. */
static void write_config(const char *prefix, const char *creds_override)
{
    size_t len = 0;
    char *base = ph_test_read_file(getenv("PH_TEST_S3_CONFIG"), &len);
    assert_non_null(base);
    char *text = malloc(len + 1024);
    size_t n = 0;
    for (char *line = strtok(base, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "prefix", 6) == 0 ||
            (creds_override && strncmp(line, "credentials_file", 16) == 0))
            continue;
        n += (size_t)sprintf(text + n, "%s\n", line);
    }
    n += (size_t)sprintf(text + n, "prefix = %s\n", prefix);
    if (creds_override)
        n += (size_t)sprintf(text + n, "credentials_file = %s\n", creds_override);
    snprintf(config, sizeof config, "%s/s3.conf", ph_test_dir);
    assert_int_equal(ph_test_write_file(config, text, n), 0);
    free(text);
    free(base);
}

static void test_put_get_stat_ls_rm_sweep(void **state)
{
    (void)state;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "cli/%d", (int)getpid());
    write_config(prefix, NULL);
    char path[4096], *out = NULL;
    snprintf(path, sizeof path, "%s/in.txt", ph_test_dir);
    assert_int_equal(ph_test_write_file(path, "payload\n", 8), 0);
    assert_int_equal(run(&out, "--backend s3 --s3-config '%s' put --tenant acme --filename "
                               "'../x/CON.txt' in.txt", config),
                     0);
    char *id = json_field(out, "artifact_id");
    assert_non_null(id);
    char *safe = json_field(out, "safe_filename");
    assert_string_equal(safe, "_CON.txt");
    free(safe);
    free(out);
    assert_int_equal(run(&out, "--backend s3 --s3-config '%s' get --tenant acme %s", config, id), 0);
    assert_string_equal(out, "payload\n");
    free(out);
    assert_int_equal(run(&out, "--backend s3 --s3-config '%s' stat --tenant acme %s", config, id),
                     0);
    char *got = json_field(out, "artifact_id");
    assert_string_equal(got, id);
    free(got);
    free(out);
    assert_int_equal(run(&out, "--backend s3 --s3-config '%s' ls --tenant acme", config), 0);
    assert_non_null(strstr(out, id));
    free(out);
    /* Another tenant: not found (exit 1). */
    assert_int_equal(run(NULL, "--backend s3 --s3-config '%s' get --tenant other %s", config, id),
                     1);
    assert_int_equal(run(NULL, "--backend s3 --s3-config '%s' rm --tenant acme %s", config, id), 0);
    assert_int_equal(run(NULL, "--backend s3 --s3-config '%s' stat --tenant acme %s", config, id),
                     1);
    assert_int_equal(run(&out, "--backend s3 --s3-config '%s' sweep", config), 0);
    assert_non_null(strstr(out, "\"examined\":0"));
    free(out);
    free(id);
}

static void test_wrong_secret_and_usage(void **state)
{
    (void)state;
    char creds[4200];
    snprintf(creds, sizeof creds, "%s/bad-creds", ph_test_dir);
    const char bad[] = "access_key = nobody\nsecret_key = wrong-secret-0123456789\n";
    assert_int_equal(ph_test_write_file(creds, bad, sizeof bad - 1), 0);
    chmod(creds, 0600);
    write_config("cli/bad", creds);
    assert_int_equal(run(NULL, "--backend s3 --s3-config '%s' ls", config), 3);
    assert_int_equal(run(NULL, "--backend s3 ls"), 2);                 /* no --s3-config */
    assert_int_equal(run(NULL, "--backend nfs --root x ls"), 2);       /* unknown backend */
    assert_int_equal(run(NULL, "--root x --s3-config '%s' ls", config), 2); /* config without s3 */
    assert_int_equal(run(NULL, "--backend s3 --s3-config /nonexistent ls"), 5);
}

int main(void)
{
    const char *cfg = getenv("PH_TEST_S3_CONFIG");
    if (cfg == NULL || access(cfg, R_OK) != 0) {
        fprintf(stderr, "test_cli_s3: no RGW fixture (ceph not installed?): skipped\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_stat_ls_rm_sweep),
        cmocka_unit_test(test_wrong_secret_and_usage),
    };
    return cmocka_run_group_tests(tests, ph_test_dir_setup, ph_test_dir_teardown);
}
