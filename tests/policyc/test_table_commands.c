/* test_table_commands.c - policyc explain, test, dump and diff as a user
 * runs them: arguments, exit codes (0/1/2 as documented), the lines they
 * print, and FILE and TABLE inputs giving the same answers. */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "table_fixture.h"

static const char *const POLICY = FX_POLICY;

static char *dir;
static char yaml_path[4096], table_path[4096], out_path[4096];

static int setup(void **state)
{
    (void)state;
    dir = ph_test_mkdtemp();
    snprintf(yaml_path, sizeof yaml_path, "%s/allow.yaml", dir);
    snprintf(table_path, sizeof table_path, "%s/allow.ptab", dir);
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    if (ph_test_write_file(yaml_path, POLICY, strlen(POLICY)) != 0)
        return -1;
    uint8_t *image;
    size_t len;
    fx_compile(POLICY, &image, &len);
    int rc = ph_test_write_file(table_path, image, len);
    free(image);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    ph_test_rmtree(dir);
    free(dir);
    return 0;
}

/* Runs a subcommand with stdout captured; *out receives it (caller frees). */
static int run(int (*cmd)(int, char **), char **out, int argc, ...)
{
    char storage[8][4200];
    char *argv[9];
    va_list ap;
    va_start(ap, argc);
    for (int i = 0; i < argc && i < 8; i++) {
        snprintf(storage[i], sizeof storage[i], "%s", va_arg(ap, const char *));
        argv[i] = storage[i];
    }
    va_end(ap);
    argv[argc] = NULL;
    fflush(stdout);
    int saved = dup(1);
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    close(fd);
    int rc = cmd(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    size_t len;
    char *text = ph_test_read_file(out_path, &len);
    if (out)
        *out = text;
    else
        free(text);
    return rc;
}

static void explain_exit_codes_and_output(void **state)
{
    (void)state;
    const char *inputs[] = {yaml_path, table_path};
    for (int i = 0; i < 2; i++) {
        char *out;
        assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", inputs[i], "api.github.com:443"),
                         0);
        assert_non_null(strstr(out, "allowed: api.github.com:443"));
        assert_non_null(strstr(out, "(allow.yaml:6)"));
        assert_non_null(strstr(out, "reason: GitHub API"));
        free(out);
        assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", inputs[i], "a.b.example.com:443"),
                         1);
        assert_non_null(strstr(out, "deeper"));
        assert_non_null(strstr(out, "*.example.com"));
        free(out);
        assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", inputs[i], "example.com:443"), 1);
        assert_non_null(strstr(out, "never example.com itself"));
        free(out);
        assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", inputs[i], "api.github.com:22"),
                         1);
        assert_non_null(strstr(out, "port_not_allowed"));
        free(out);
        assert_int_equal(run(pc_cmd_explain, &out, 5, "explain", "--list", "nope", inputs[i],
                             "pypi.org:443"), 1);
        assert_non_null(strstr(out, "no list named 'nope'"));
        free(out);
        assert_int_equal(run(pc_cmd_explain, NULL, 5, "explain", "--list", "common", inputs[i],
                             "pypi.org:443"), 0);
        assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", inputs[i], "127.0.0.1:443"), 1);
        assert_non_null(strstr(out, "ip_literal"));
        free(out);
    }
    /* The proxy's verdict, canonicalization included. */
    char *out;
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", yaml_path, "API.GitHub.com:443"), 0);
    assert_non_null(strstr(out, "allowed: api.github.com:443"));
    assert_non_null(strstr(out, "proxy answer: 200 allowed"));
    free(out);
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", yaml_path, "api.github.com:22"), 1);
    assert_non_null(strstr(out, "proxy answer: 403 port_not_allowed"));
    free(out);
    /* Bytes the proxy cannot parse are denied as the proxy denies them. */
    static const char *const unparsable[] = {"api.github.com", "api.github.com:0", "a.com:65536",
                                             "a.com:0443", "ex@mple.com:443"};
    for (size_t i = 0; i < sizeof unparsable / sizeof *unparsable; i++) {
        assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", yaml_path, unparsable[i]), 1);
        assert_non_null(strstr(out, "(parse_error)"));
        assert_non_null(strstr(out, "proxy answer: 400 parse_error"));
        free(out);
    }
    assert_int_equal(run(pc_cmd_explain, NULL, 2, "explain", yaml_path), 2);
    assert_int_equal(run(pc_cmd_explain, NULL, 3, "explain", "/nonexistent", "a.com:1"), 2);
    assert_int_equal(run(pc_cmd_explain, NULL, 2, "explain", "--help"), 0);
}

/* explain names the wildcard-DNS service: for a table whose rule names one
 * (written by a policyc that did not refuse it) and for any host under one. */
static void explain_names_the_wildcard_dns_service(void **state)
{
    (void)state;
    static const char yaml[] = "version: 1\nlists:\n  default:\n    rules:\n"
                               "      - {host: \"*.nip.zz\", ports: [443]}\n";
    uint8_t *image;
    size_t len;
    fx_compile_renamed(yaml, "old.yaml", ".zz", ".io", &image, &len);
    char old_table[4200];
    snprintf(old_table, sizeof old_table, "%s/old.ptab", dir);
    assert_int_equal(ph_test_write_file(old_table, image, len), 0);
    free(image);
    char *out;
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", old_table, "8-8-8-8.nip.io:443"), 1);
    assert_non_null(strstr(out, "denied: 8-8-8-8.nip.io:443 by list 'default' (wildcard_dns)"));
    assert_non_null(strstr(out, "is under nip.io, a wildcard-DNS service"));
    assert_non_null(strstr(out, "source: https://nip.io/"));
    assert_non_null(strstr(out, "refused rule: *.nip.io ports [443] (old.yaml:5)"));
    free(out);
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", yaml_path, "7f000001.c0a80001.rbndr.us:443"), 1);
    assert_non_null(strstr(out, "(not_allowlisted)"));
    assert_non_null(strstr(out, "is under rbndr.us, a wildcard-DNS service"));
    free(out);
}

static int run_cases(const char *cases, char **out)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/cases.yaml", dir);
    assert_int_equal(ph_test_write_file(path, cases, strlen(cases)), 0);
    return run(pc_cmd_test, out, 3, "test", yaml_path, path);
}

static void test_reports_each_failure_and_a_summary(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run_cases("cases:\n"
                               "  - {destination: \"api.github.com:443\", expect: allow}\n"
                               "  - {destination: \"pypi.org:443\", list: common, expect: allow}\n"
                               "  - destination: \"api.github.com:80\"\n"
                               "    expect: deny\n"
                               "    reason: port_not_allowed\n"
                               "  - {destination: \"API.GitHub.com:443\", expect: allow}\n"
                               "  - {destination: \"10.0.0.1:443\", expect: deny, reason: ip_literal}\n"
                               "  - {destination: \"api.github.com\", expect: deny,"
                               " reason: parse_error}\n",
                               &out),
                     0);
    assert_non_null(strstr(out, "6 passed, 0 failed\n"));
    free(out);
    assert_int_equal(run_cases("cases:\n"
                               "  - {destination: \"api.github.com:443\", expect: deny}\n"
                               "  - {destination: \"example.com:443\", expect: allow}\n"
                               "  - {destination: \"x.example.com:443\", expect: allow}\n"
                               "  - {destination: \"x.example.com:1\", expect: deny,"
                               " reason: not_allowlisted}\n",
                               &out),
                     1);
    assert_non_null(strstr(out, "cases.yaml:2:5: FAIL api.github.com:443"));
    assert_non_null(strstr(out, "cases.yaml:3:5: FAIL example.com:443"));
    assert_non_null(strstr(out, "1 passed, 3 failed\n"));
    free(out);
    /* Bad cases files are errors (2), with a position. */
    static const char *const bad[] = {
        "",
        "cases: []\n",
        "cases:\n  - {destination: \"a.com:1\", expect: maybe}\n",
        "cases:\n  - {destination: \"a.com:1\", expct: deny}\n",
        "cases:\n  - {destination: \"a.com:1\"}\n",
        "cases:\n  - {destination: \"a.com:1\", expect: deny, expect: allow}\n",
        "cases:\n  - &a {destination: \"a.com:1\", expect: deny}\n",
        "cases:\n  - !!map {destination: \"a.com:1\", expect: deny}\n",
        "tests:\n  - {destination: \"a.com:1\", expect: deny}\n",
        "cases:\n  - {destination: \"a.com:1\", expect: deny}\n---\ncases: []\n",
        "cases:\n  - {destination: \"a.com:1\", expect: allow, reason: allowed}\n",
        "cases: [\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (run_cases(bad[i], NULL) != 2)
            fail_msg("cases file %zu was accepted", i);
    assert_int_equal(run(pc_cmd_test, NULL, 2, "test", "--help"), 0);
    assert_int_equal(run(pc_cmd_test, NULL, 2, "test", yaml_path), 2);
}

/* dump of table (its output, out, written to a file) compiles back to
 * the same bytes. */
static void assert_dump_compiles_back(const char *table, const char *out)
{
    char dumped[4200], again[4200];
    snprintf(dumped, sizeof dumped, "%s/dumped.yaml", dir);
    snprintf(again, sizeof again, "%s/again.ptab", dir);
    assert_int_equal(ph_test_write_file(dumped, out, strlen(out)), 0);
    assert_int_equal(run(pc_cmd_compile, NULL, 5, "compile", "-q", dumped, "-o", again), 0);
    size_t la, lb;
    char *a = ph_test_read_file(table, &la), *b = ph_test_read_file(again, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    free(a);
    free(b);
}

static void dump_of_a_table_compiles_back_to_it(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run(pc_cmd_dump, &out, 2, "dump", table_path), 0);
    assert_dump_compiles_back(table_path, out);
    free(out);
    assert_int_equal(run(pc_cmd_dump, NULL, 1, "dump"), 2);
    assert_int_equal(run(pc_cmd_dump, NULL, 2, "dump", "/nonexistent"), 2);
}

static void diff_lists_added_and_removed_destinations(void **state)
{
    (void)state;
    char *out;
    assert_int_equal(run(pc_cmd_diff, &out, 3, "diff", yaml_path, table_path), 0);
    assert_non_null(strstr(out, "no destination changed"));
    free(out);
    static const char changed[] = "version: 1\n"
                                  "lists:\n"
                                  "  default:\n"
                                  "    rules:\n"
                                  "      - host: \"*.example.com\"\n"
                                  "        ports: [443, \"8005-8020\"]\n"
                                  "      - host: new.example.org\n"
                                  "        ports: [443]\n";
    char path[4200];
    snprintf(path, sizeof path, "%s/new.yaml", dir);
    assert_int_equal(ph_test_write_file(path, changed, strlen(changed)), 0);
    assert_int_equal(run(pc_cmd_diff, &out, 3, "diff", table_path, path), 1);
    static const char *const want =
        "list common: removed\n"
        "- pypi.org 443\n"
        "list default:\n"
        "- api.github.com 443\n"
        "- *.example.com 8000-8004\n"
        "+ *.example.com 8011-8020\n"
        "+ new.example.org 443\n"
        "- pypi.org 443\n"
        "2 destination change(s) added, 4 removed\n";
    const char *body = strstr(out, "list common");
    assert_non_null(body);
    assert_string_equal(body, want);
    free(out);
    assert_int_equal(run(pc_cmd_diff, NULL, 2, "diff", table_path), 2);
}

/* `protocol:` goes into the table and back out: explain says it, dump
 * writes it (and compiling the dump gives the same bytes), diff shows a
 * port whose protocol changed, the lookup returns it, and the strictest of
 * two rules on one port wins it. */
static void protocol_key_through_explain_dump_and_diff(void **state)
{
    (void)state;
    static const char yaml[] = "version: 1\n"
                               "lists:\n"
                               "  default:\n"
                               "    rules:\n"
                               "      - host: ssh.example.org\n"
                               "        ports: [22]\n"
                               "        protocol: tcp\n"
                               "      - host: web.example.org\n"
                               "        ports: [80, 443]\n"
                               "      - host: api.example.org\n"
                               "        ports: [443]\n"
                               "        protocol: tls\n"
                               "      - host: api.example.org\n"
                               "        ports: [443, 8080]\n"
                               "        protocol: tcp\n";
    char path[4200], tab[4200], changed_path[4200];
    snprintf(path, sizeof path, "%s/proto.yaml", dir);
    snprintf(tab, sizeof tab, "%s/proto.ptab", dir);
    snprintf(changed_path, sizeof changed_path, "%s/proto-changed.yaml", dir);
    assert_int_equal(ph_test_write_file(path, yaml, strlen(yaml)), 0);
    assert_int_equal(run(pc_cmd_compile, NULL, 5, "compile", "-q", path, "-o", tab), 0);

    char *out;
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", tab, "ssh.example.org:22"), 0);
    assert_non_null(strstr(out, "  rule: ssh.example.org ports [22] protocol tcp (proto.yaml:5)"));
    assert_non_null(strstr(out, "  protocol: tcp (any bytes, relayed without inspection)"));
    free(out);
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", tab, "web.example.org:80"), 0);
    assert_non_null(strstr(out, "  protocol: tls or http (default"));
    free(out);
    /* 443 is allowed by a tls rule and a tcp rule: the strictest wins. */
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", tab, "api.example.org:443"), 0);
    assert_non_null(strstr(out, "  protocol: tls (a TLS ClientHello naming api.example.org)"));
    free(out);
    assert_int_equal(run(pc_cmd_explain, &out, 3, "explain", tab, "api.example.org:8080"), 0);
    assert_non_null(strstr(out, "  protocol: tcp"));
    free(out);

    ph_table *t = NULL;
    ph_diag diag;
    assert_int_equal(ph_table_open(tab, &t, &diag), PH_OK);
    ph_table_result res;
    assert_int_equal(ph_table_lookup(t, "default", "ssh.example.org", 15, 22, &res), PH_OK);
    assert_true(res.allowed);
    assert_int_equal(res.rule.protocol, PH_PROTOCOL_TCP);
    assert_int_equal(ph_table_lookup(t, "default", "web.example.org", 15, 443, &res), PH_OK);
    assert_int_equal(res.rule.protocol, PH_PROTOCOL_DEFAULT);
    assert_int_equal(ph_table_lookup(t, "default", "api.example.org", 15, 443, &res), PH_OK);
    assert_int_equal(res.rule.protocol, PH_PROTOCOL_TLS);
    ph_table_close(&t);

    assert_int_equal(run(pc_cmd_dump, &out, 2, "dump", tab), 0);
    assert_non_null(strstr(out, "      - host: \"ssh.example.org\"\n"
                                "        ports: [22]\n"
                                "        protocol: tcp\n"));
    assert_non_null(strstr(out, "      - host: \"web.example.org\"\n"
                                "        ports: [80, 443]\n"
                                "        source:"));
    assert_dump_compiles_back(tab, out);
    free(out);

    /* ssh loses tcp, web becomes http only: each a port lost and gained. */
    static const char changed[] = "version: 1\n"
                                  "lists:\n"
                                  "  default:\n"
                                  "    rules:\n"
                                  "      - host: ssh.example.org\n"
                                  "        ports: [22]\n"
                                  "      - host: web.example.org\n"
                                  "        ports: [80, 443]\n"
                                  "        protocol: http\n"
                                  "      - host: api.example.org\n"
                                  "        ports: [443]\n"
                                  "        protocol: tls\n"
                                  "      - host: api.example.org\n"
                                  "        ports: [443, 8080]\n"
                                  "        protocol: tcp\n";
    assert_int_equal(ph_test_write_file(changed_path, changed, strlen(changed)), 0);
    assert_int_equal(run(pc_cmd_diff, &out, 3, "diff", tab, changed_path), 1);
    static const char *const want = "list default:\n"
                                    "+ ssh.example.org 22\n"
                                    "- ssh.example.org 22 (protocol tcp)\n"
                                    "- web.example.org 80, 443\n"
                                    "+ web.example.org 80, 443 (protocol http)\n"
                                    "2 destination change(s) added, 2 removed\n";
    const char *body = strstr(out, "list default");
    assert_non_null(body);
    assert_string_equal(body, want);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(explain_exit_codes_and_output),
        cmocka_unit_test(explain_names_the_wildcard_dns_service),
        cmocka_unit_test(test_reports_each_failure_and_a_summary),
        cmocka_unit_test(dump_of_a_table_compiles_back_to_it),
        cmocka_unit_test(diff_lists_added_and_removed_destinations),
        cmocka_unit_test(protocol_key_through_explain_dump_and_diff),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
