/* test_guard_check.c - the high-level decision: a verdict for every refusal
 * reason, rule provenance, CONNECT authorities, snapshots. */
#include "test_support.h"

#include <string.h>

#include "guard_fixture.h"
#include "pinhole/guard.h"

static const char POLICY[] =
    "version: 1\n"
    "lists:\n"
    "  default:\n"
    "    rules:\n"
    "      - host: api.github.com\n"
    "        ports: [443]\n"
    "        reason: GitHub API\n"
    "      - host: \"*.cdn.example.com\"\n"
    "        ports: [443, \"8000-8010\"]\n"
    "  other:\n"
    "    rules:\n"
    "      - host: pypi.org\n"
    "        ports: [443]\n";

static ph_guard *guard(void)
{
    ph_table *t = ph_fixture_table(POLICY, "allow.yaml");
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_from_table(&t, NULL, &g, NULL), PH_OK);
    assert_null(t);
    return g;
}

static ph_status check(ph_guard *g, const char *list, const char *url, ph_verdict *v)
{
    ph_status st = ph_guard_check_url(g, list, url, strlen(url), v, NULL);
    assert_int_equal(st, v->allowed ? PH_OK : PH_E_DENIED);
    return st;
}

static void test_allowed_verdict_carries_provenance(void **state)
{
    (void)state;
    ph_guard *g = guard();
    ph_verdict v;
    assert_int_equal(check(g, "default", "https://API.GitHub.com/repos?x=1", &v), PH_OK);
    assert_true(v.allowed);
    assert_int_equal(v.reason, PH_REASON_ALLOWED);
    assert_int_equal(v.scheme, PH_SCHEME_HTTPS);
    assert_string_equal(v.host, "api.github.com");
    assert_int_equal(v.port, 443);
    assert_true(v.has_rule);
    assert_string_equal(v.rule_host, "api.github.com");
    assert_string_equal(v.rule_list, "default");
    assert_string_equal(v.rule_file, "allow.yaml");
    assert_int_equal(v.rule_line, 5);
    assert_string_equal(v.rule_reason, "GitHub API");
    assert_int_equal(strlen(v.policy_id), 64);
    char id[PH_TABLE_ID_HEX_LEN + 1];
    ph_guard_policy_id(g, id);
    assert_string_equal(id, v.policy_id);

    assert_int_equal(check(g, "default", "http://raw.cdn.example.com:8005/x", &v), PH_OK);
    assert_string_equal(v.rule_host, "*.cdn.example.com");
    assert_int_equal(v.rule_line, 8);
    ph_guard_close(&g);
    assert_null(g);
}

static void test_every_refusal_reason(void **state)
{
    (void)state;
    ph_guard *g = guard();
    struct {
        const char *list, *url;
        ph_reason reason;
    } cases[] = {
        {"default", "https://api.github.com:444/", PH_REASON_PORT_NOT_ALLOWED},
        {"default", "http://api.github.com/", PH_REASON_PORT_NOT_ALLOWED},
        {"default", "https://github.com/", PH_REASON_NOT_ALLOWLISTED},
        {"default", "https://cdn.example.com/", PH_REASON_NOT_ALLOWLISTED},
        {"default", "https://a.b.cdn.example.com/", PH_REASON_NOT_ALLOWLISTED},
        {"default", "https://pypi.org/", PH_REASON_NOT_ALLOWLISTED},
        {"nosuch", "https://api.github.com/", PH_REASON_UNKNOWN_LIST},
        {"default", "https://127.0.0.1/", PH_REASON_IP_LITERAL},
        {"default", "https://[::1]/", PH_REASON_IP_LITERAL},
        {"default", "https://2130706433/", PH_REASON_IP_LITERAL},
        {"default", "https://user@api.github.com/", PH_REASON_PARSE_ERROR},
        {"default", "https://api.github.com\\@evil.com/", PH_REASON_PARSE_ERROR},
        {"default", "ftp://api.github.com/", PH_REASON_PARSE_ERROR},
        {"default", "", PH_REASON_PARSE_ERROR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_verdict v;
        ph_diag d;
        memset(&d, 0, sizeof d);
        ph_status st =
            ph_guard_check_url(g, cases[i].list, cases[i].url, strlen(cases[i].url), &v, &d);
        if (st != PH_E_DENIED || v.allowed || v.reason != cases[i].reason)
            fail_msg("%s in %s: status %d reason %s, wanted %s", cases[i].url, cases[i].list, st,
                     ph_reason_code(v.reason), ph_reason_code(cases[i].reason));
        assert_false(v.has_rule);
        assert_true(v.detail[0] != '\0');
        assert_string_equal(d.message, v.detail);
    }
    ph_guard_close(&g);
}

static void test_connect_authority(void **state)
{
    (void)state;
    ph_guard *g = guard();
    ph_verdict v;
    assert_int_equal(ph_guard_check_authority(g, "other", "pypi.org:443", 12, &v, NULL), PH_OK);
    assert_int_equal(v.scheme, PH_SCHEME_NONE);
    assert_string_equal(v.host, "pypi.org");
    assert_int_equal(v.port, 443);
    assert_int_equal(ph_guard_check_authority(g, "other", "pypi.org", 8, &v, NULL), PH_E_DENIED);
    assert_int_equal(v.reason, PH_REASON_PARSE_ERROR);
    assert_int_equal(ph_guard_check_authority(g, "other", "10.0.0.1:443", 12, &v, NULL),
                     PH_E_DENIED);
    assert_int_equal(v.reason, PH_REASON_IP_LITERAL);
    ph_guard_close(&g);
}

static void test_snapshot_and_file_less_guard(void **state)
{
    (void)state;
    ph_guard *g = guard();
    ph_guard_snapshot *s = ph_guard_snapshot_acquire(g);
    const ph_table *t = ph_guard_snapshot_table(s);
    assert_non_null(t);
    ph_table_result r;
    assert_int_equal(ph_table_lookup(t, "other", "pypi.org", 8, 443, &r), PH_OK);
    assert_true(r.allowed);
    ph_guard_snapshot_release(&s);
    assert_null(s);
    bool reloaded = true;
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_E_UNSUPPORTED);
    assert_false(reloaded);
    ph_verdict v;
    assert_int_equal(ph_guard_check_url(NULL, "x", "https://a.b/", 12, &v, NULL), PH_E_INVAL);
    assert_false(v.allowed);
    ph_guard_close(&g);
    ph_guard_close(&g); /* NULL-safe */
}

static void test_bad_dns_server_list_fails_open(void **state)
{
    (void)state;
    ph_table *t = ph_fixture_table(POLICY, "allow.yaml");
    ph_guard_options o = {.dns_servers = "dns.example:53"};
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_from_table(&t, &o, &g, NULL), PH_E_INVAL);
    assert_null(g);
    assert_non_null(t); /* not taken on failure */
    ph_table_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_verdict_carries_provenance),
        cmocka_unit_test(test_every_refusal_reason),
        cmocka_unit_test(test_connect_authority),
        cmocka_unit_test(test_snapshot_and_file_less_guard),
        cmocka_unit_test(test_bad_dns_server_list_fails_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
