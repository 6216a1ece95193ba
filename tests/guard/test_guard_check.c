/* test_guard_check.c - the decision as a worker makes it (the list named):
 * a verdict for every refusal reason, rule provenance, CONNECT authorities,
 * snapshots, and what ph_decision_resolve refuses to resolve. */
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

/* ph_decide_url with list named; *v is the decision's verdict. */
static ph_status check(ph_guard *g, const char *list, const char *url, ph_verdict *v)
{
    ph_url_request req = {.url = url, .url_len = strlen(url), .list = list};
    ph_decision d;
    ph_status st = ph_decide_url(g, &req, &d);
    assert_int_equal(st, d.allowed ? PH_OK : PH_E_DENIED);
    assert_int_equal(d.allowed, d.verdict.allowed);
    assert_int_equal(d.reason, d.verdict.reason);
    assert_int_equal(d.next, d.allowed ? PH_NEXT_RESOLVE : PH_NEXT_NONE);
    *v = d.verdict;
    return st;
}

/* ph_decide_connect with list named. */
static ph_status check_authority(ph_guard *g, const char *list, const char *authority,
                                 ph_verdict *v)
{
    ph_connect_request req = {.authority = authority, .authority_len = strlen(authority),
                              .list = list};
    ph_decision d;
    ph_status st = ph_decide_connect(g, &req, &d);
    assert_int_equal(st, d.allowed ? PH_OK : PH_E_DENIED);
    *v = d.verdict;
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
        ph_url_request req = {.url = cases[i].url, .url_len = strlen(cases[i].url),
                              .list = cases[i].list};
        ph_decision d;
        ph_status st = ph_decide_url(g, &req, &d);
        const ph_verdict *v = &d.verdict;
        if (st != PH_E_DENIED || d.allowed || v->allowed || d.reason != cases[i].reason ||
            v->reason != cases[i].reason)
            fail_msg("%s in %s: status %d reason %s, wanted %s", cases[i].url, cases[i].list, st,
                     ph_reason_code(d.reason), ph_reason_code(cases[i].reason));
        assert_int_equal(d.http_status, ph_reason_http_status(cases[i].reason));
        assert_int_equal(d.next, PH_NEXT_NONE);
        assert_false(v->has_rule);
        /* The verdict's detail is the parser's or the lookup's own line
         * (what pinhole-guard check prints); the log line is the same but
         * for an IP literal, whose log line does not echo it. */
        assert_true(v->detail[0] != '\0');
        if (cases[i].reason == PH_REASON_IP_LITERAL) {
            assert_non_null(strstr(v->detail, "is an IP address literal"));
            assert_string_equal(d.log_detail, "IP literal destinations are never allowed");
        } else {
            assert_string_equal(d.log_detail, v->detail);
        }
    }
    ph_guard_close(&g);
}

static void test_connect_authority(void **state)
{
    (void)state;
    ph_guard *g = guard();
    ph_verdict v;
    assert_int_equal(check_authority(g, "other", "pypi.org:443", &v), PH_OK);
    assert_int_equal(v.scheme, PH_SCHEME_NONE);
    assert_string_equal(v.host, "pypi.org");
    assert_int_equal(v.port, 443);
    assert_int_equal(check_authority(g, "other", "pypi.org", &v), PH_E_DENIED);
    assert_int_equal(v.reason, PH_REASON_PARSE_ERROR);
    assert_int_equal(check_authority(g, "other", "10.0.0.1:443", &v), PH_E_DENIED);
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
    ph_url_request req = {.url = "https://a.b/", .url_len = 12, .list = "x"};
    ph_decision d;
    assert_int_equal(ph_decide_url(NULL, &req, &d), PH_E_INVAL);
    assert_false(d.allowed);
    assert_false(d.verdict.allowed);
    assert_int_equal(d.reason, PH_REASON_PARSE_ERROR);
    ph_guard_close(&g);
    ph_guard_close(&g); /* NULL-safe */
}

/* The resolution step takes only a decision that allowed: nothing a
 * decision refused is resolved, and the refusal stays as it was. */
static void test_decision_resolve_takes_only_an_allowed_decision(void **state)
{
    (void)state;
    ph_guard *g = guard();
    ph_url_request req = {.url = "https://github.com/", .url_len = 19, .list = "default"};
    ph_decision d;
    assert_int_equal(ph_decide_url(g, &req, &d), PH_E_DENIED);
    ph_decision before = d;
    ph_pinned_addrs a;
    a.count = 7;
    assert_int_equal(ph_decision_resolve(g, &d, &a), PH_E_INVAL);
    assert_int_equal(a.count, 0);
    assert_memory_equal(&d, &before, sizeof d);
    /* An allowed decision whose host was not written by a decision (no
     * NUL within the field) is refused too, never read past. */
    req.url = "https://api.github.com/";
    req.url_len = strlen(req.url);
    assert_int_equal(ph_decide_url(g, &req, &d), PH_OK);
    ph_decision forged = d;
    memset(forged.verdict.host, 'a', sizeof forged.verdict.host);
    assert_int_equal(ph_decision_resolve(g, &forged, &a), PH_E_INVAL);
    assert_int_equal(ph_decision_resolve(NULL, &d, &a), PH_E_INVAL);
    assert_int_equal(ph_decision_resolve(g, NULL, &a), PH_E_INVAL);
    assert_int_equal(ph_decision_resolve(g, &d, NULL), PH_E_INVAL);
    assert_true(d.allowed);
    ph_guard_close(&g);
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
        cmocka_unit_test(test_decision_resolve_takes_only_an_allowed_decision),
        cmocka_unit_test(test_bad_dns_server_list_fails_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
