/* test_guard_cli.c - the pinhole-guard binary end to end: verdict lines and
 * exit codes of check (arguments, stdin, --json, --resolve against dnsmasq),
 * addr, keygen (--output, --rotate), grant issue and verify. Label "e2e". */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "dnsmasq_fixture.h"
#include "guard_fixture.h"

static const char POLICY[] = "version: 1\n"
                             "lists:\n"
                             "  default:\n"
                             "    rules:\n"
                             "      - host: allowed.test\n"
                             "        ports: [443]\n"
                             "      - host: rebind.test\n"
                             "        ports: [443]\n";

static ph_dnsmasq dns = {-1, ""};
static char *dir;
static char table[512], keys[512];
static char out[65536];

static int setup(void **state)
{
    (void)state;
    dir = ph_test_mkdtemp();
    snprintf(table, sizeof table, "%s/allow.ptab", dir);
    snprintf(keys, sizeof keys, "%s/grant.keys", dir);
    ph_fixture_write_table(table, POLICY, "allow.yaml");
    ph_dnsmasq_start(&dns);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_dnsmasq_stop(&dns);
    ph_test_rmtree(dir);
    free(dir);
    return 0;
}

/* Runs `pinhole-guard ARGS` (a shell fragment) with stdin from `input`
 * (NULL: /dev/null); stdout lands in `out`. Returns the exit status. */
static int run(const char *input, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(const char *input, const char *fmt, ...)
{
    char args[4096], cmd[8192], in[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(in, sizeof in, "%s/stdin", dir);
    assert_int_equal(ph_test_write_file(in, input ? input : "", input ? strlen(input) : 0), 0);
    snprintf(cmd, sizeof cmd, "'%s' %s < '%s' 2>/dev/null", PH_GUARD_CLI, args, in);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void test_check_arguments_and_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(run(NULL, "check --table '%s' https://allowed.test/", table), 0);
    assert_non_null(strstr(out, "ALLOW https://allowed.test/ host=allowed.test port=443 "
                                "rule=allow.yaml:5"));
    assert_int_equal(run(NULL, "check -t '%s' https://allowed.test/ https://evil.test/ "
                               "'http://127.1/'", table), 1);
    assert_non_null(strstr(out, "DENY https://evil.test/ reason=not_allowlisted"));
    assert_non_null(strstr(out, "DENY http://127.1/ reason=ip_literal"));
    /* Exactly one line per URL. */
    size_t lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    assert_int_equal(lines, 3);
    /* Usage errors. */
    assert_int_equal(run(NULL, "check --bogus"), 2);
    assert_int_equal(run(NULL, "check https://allowed.test/"), 2); /* no table */
    assert_int_equal(run(NULL, "check --table '%s/missing' https://a.test/", dir), 2);
    assert_int_equal(run(NULL, "check --table '%s' --dns-server 127.0.0.1 x", table), 2);
    assert_int_equal(run(NULL, "frobnicate"), 2);
    assert_int_equal(run(NULL, "--help"), 0);
    assert_non_null(strstr(out, "Usage: pinhole-guard"));
    assert_int_equal(run(NULL, "check --help"), 0);
}

static void test_check_stdin_and_json(void **state)
{
    (void)state;
    assert_int_equal(run("https://allowed.test/a\nhttps://rebind.test/b\n", "check -t '%s'",
                         table), 0);
    assert_non_null(strstr(out, "ALLOW https://allowed.test/a"));
    assert_non_null(strstr(out, "ALLOW https://rebind.test/b"));
    /* A hostile line cannot forge a second verdict line. */
    assert_int_equal(run("https://evil.test/\rALLOW x\n", "check -t '%s' --json", table), 1);
    assert_non_null(strstr(out, "\"allowed\":false"));
    assert_non_null(strstr(out, "\"reason\":\"parse_error\""));
    assert_null(strstr(out, "\nALLOW"));
    assert_int_equal(run(NULL, "check -t '%s' --json https://allowed.test/", table), 0);
    assert_non_null(strstr(out, "{\"url\":\"https://allowed.test/\",\"allowed\":true,"
                                "\"reason\":\"allowed\",\"host\":\"allowed.test\",\"port\":443,"
                                "\"rule\":{\"list\":\"default\",\"host\":\"allowed.test\","
                                "\"file\":\"allow.yaml\",\"line\":5}"));
}

static void test_check_resolve(void **state)
{
    (void)state;
    assert_int_equal(run(NULL, "check -t '%s' --resolve --dns-server %s https://allowed.test/",
                         table, dns.server), 0);
    assert_non_null(strstr(out, "addresses=93.184.215.14"));
    assert_int_equal(run(NULL, "check -t '%s' -r --dns-server %s --json https://rebind.test/",
                         table, dns.server), 1);
    assert_non_null(strstr(out, "\"reason\":\"denied_address\""));
    assert_non_null(strstr(out, "192.168.1.1"));
}

static void test_addr(void **state)
{
    (void)state;
    assert_int_equal(run(NULL, "addr 93.184.215.14"), 0);
    assert_string_equal(out, "ALLOW 93.184.215.14\n");
    assert_int_equal(run(NULL, "addr 93.184.215.14 10.1.2.3"), 1);
    assert_non_null(strstr(out, "DENY 10.1.2.3 reason=denied_address block=10.0.0.0/8"));
    assert_non_null(strstr(out, "RFC 1918"));
    assert_int_equal(run(NULL, "addr --json 169.254.169.254 not-an-ip"), 1);
    assert_non_null(strstr(out, "\"allowed\":false"));
    assert_non_null(strstr(out, "\"reason\":\"parse_error\""));
    assert_int_equal(run(NULL, "addr"), 2);
}

static void test_keygen_grant_issue_verify_rotate(void **state)
{
    (void)state;
    assert_int_equal(run(NULL, "keygen --kid old --output '%s'", keys), 0);
    struct stat sb;
    assert_int_equal(stat(keys, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(run(NULL, "keygen --kid again --output '%s'", keys), 2); /* no overwrite */
    assert_int_equal(run(NULL, "keygen --bytes 16"), 2);

#define ISSUE                                                                                  \
    "grant issue --keys '%s' --tenant t1 --lease l1 --list default --not-before 1800000000 "  \
    "--ttl 600"
    assert_int_equal(run(NULL, ISSUE, keys), 0);
    char token[512];
    out[strcspn(out, "\n")] = '\0';
    assert_true(strlen(out) < sizeof token);
    memcpy(token, out, strlen(out) + 1);
    assert_memory_equal(token, "v1.old.", 7);

    assert_int_equal(run(NULL, "grant verify --keys '%s' --now 1800000100 --list default %s",
                         keys, token), 0);
    assert_non_null(strstr(out, "VALID kid=old tenant=t1 lease=l1 list=default"));
    assert_int_equal(run(NULL, "grant verify --keys '%s' --now 1800000700 %s", keys, token), 1);
    assert_non_null(strstr(out, "INVALID reason=grant_expired"));
    assert_int_equal(run(NULL, "grant verify --keys '%s' --now 1800000100 --list other %s",
                         keys, token), 1);
    assert_non_null(strstr(out, "reason=grant_invalid"));
    /* Tokens on stdin, one per line. */
    char lines[1200];
    snprintf(lines, sizeof lines, "%s\n%sx\n", token, token);
    assert_int_equal(run(lines, "grant verify --keys '%s' --now 1800000100 --json", keys), 1);
    assert_non_null(strstr(out, "{\"valid\":true"));
    assert_non_null(strstr(out, "{\"valid\":false"));

    /* The Proxy-Authorization form the proxy sees. */
    assert_int_equal(run(NULL, "grant issue --keys '%s' --tenant t1 --lease l1 --list default "
                               "--format basic", keys), 0);
    char header[1024];
    out[strcspn(out, "\n")] = '\0';
    assert_true(strlen(out) < sizeof header);
    memcpy(header, out, strlen(out) + 1);
    assert_memory_equal(header, "Basic ", 6);
    assert_int_equal(run(NULL, "grant verify --keys '%s' --header '%s'", keys, header), 0);

    /* Rotation: the new key signs, the old token still verifies. */
    assert_int_equal(run(NULL, "keygen --kid new --rotate '%s'", keys), 0);
    assert_int_equal(stat(keys, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    assert_int_equal(run(NULL, ISSUE, keys), 0);
    assert_memory_equal(out, "v1.new.", 7);
    assert_int_equal(run(NULL, "grant verify --keys '%s' --now 1800000100 %s", keys, token), 0);

    /* A key file others can read is refused. */
    assert_int_equal(chmod(keys, 0644), 0);
    assert_int_equal(run(NULL, ISSUE, keys), 2);
}

int main(void)
{
    if (!ph_dnsmasq_installed())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_arguments_and_exit_codes),
        cmocka_unit_test(test_check_stdin_and_json),
        cmocka_unit_test(test_check_resolve),
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_keygen_grant_issue_verify_rotate),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
