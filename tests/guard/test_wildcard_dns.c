/* test_wildcard_dns.c - the guard refuses names at or under a wildcard-DNS
 * service at check time (reason wildcard_dns), even when a table compiled by
 * a policyc that did not refuse the rule allows them; the compiled list is
 * canonical, sourced, and the one docs/allowlist.md shows. */
#include "test_support.h"

#include <string.h>

#include "../policyc/table_fixture.h"
#include "pinhole/guard.h"
#include "pinhole/host.h"
#include "wildcard_dns-int.h"

/* Rules as an older policyc wrote them: ".zz" becomes ".io"/".us" after
 * the loader accepted them, so the table names the services. */
static ph_guard *guard_with_smuggled_rules(void)
{
    static const char yaml[] = "version: 1\nlists:\n  default:\n    rules:\n"
                               "      - {host: \"*.nip.zz\", ports: [443]}\n"
                               "      - {host: \"*.sub.sslip.zz\", ports: [443]}\n"
                               "      - {host: sslip.zz, ports: [443]}\n"
                               "      - {host: snip.zz, ports: [443]}\n"
                               "      - {host: api.github.com, ports: [443]}\n";
    ph_table *t = fx_open_renamed(yaml, ".zz", ".io");
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_from_table(&t, NULL, &g, NULL), PH_OK);
    return g;
}

/* The worker's decision on a URL or an authority (the list named). */
static ph_status decide(ph_guard *g, const char *target, bool url, ph_decision *d)
{
    if (url) {
        ph_url_request req = {.url = target, .url_len = strlen(target), .list = "default"};
        return ph_decide_url(g, &req, d);
    }
    ph_connect_request req = {.authority = target, .authority_len = strlen(target),
                              .list = "default"};
    return ph_decide_connect(g, &req, d);
}

static void test_check_time_refusal(void **state)
{
    (void)state;
    ph_guard *g = guard_with_smuggled_rules();
    static const struct {
        const char *url;
        ph_reason reason;
    } cases[] = {
        {"https://8-8-8-8.nip.io/", PH_REASON_WILDCARD_DNS},          /* wildcard */
        {"https://sslip.io/", PH_REASON_WILDCARD_DNS},                /* exact */
        {"https://8-8-8-8.NIP.IO/", PH_REASON_WILDCARD_DNS},          /* uppercase */
        {"https://xn--bcher-kva.nip.io/", PH_REASON_WILDCARD_DNS},    /* A-label */
        {"https://x.sub.sslip.io/", PH_REASON_WILDCARD_DNS},          /* under a subdomain */
        {"https://8-8-8-8.nip.io./", PH_REASON_PARSE_ERROR},          /* trailing dot */
        {"https://b\xc3\xbc" "cher.nip.io/", PH_REASON_PARSE_ERROR},  /* U-label */
        {"https://a.b.nip.io/", PH_REASON_NOT_ALLOWLISTED},           /* two labels deep */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ph_decision d;
        ph_status st = decide(g, cases[i].url, true, &d);
        const ph_verdict *v = &d.verdict;
        if (st != PH_E_DENIED || v->allowed || v->reason != cases[i].reason ||
            d.reason != cases[i].reason)
            fail_msg("%s: got %s (%d), want %s", cases[i].url, ph_reason_code(d.reason), st,
                     ph_reason_code(cases[i].reason));
        if (cases[i].reason == PH_REASON_WILDCARD_DNS &&
            (strstr(v->detail, "a wildcard-DNS service") == NULL ||
             !strstr(d.log_detail, " is under ")))
            fail_msg("%s: detail does not name the service: %s", cases[i].url, v->detail);
    }
    ph_decision d;
    assert_int_equal(decide(g, "sslip.io:443", false, &d), PH_E_DENIED);
    assert_int_equal(d.reason, PH_REASON_WILDCARD_DNS);
    assert_non_null(strstr(d.verdict.detail, "sslip.io is under sslip.io"));
    assert_int_equal(decide(g, "https://snip.io/", true, &d), PH_OK);
    assert_true(d.verdict.allowed);
    assert_int_equal(decide(g, "https://api.github.com/", true, &d), PH_OK);
    ph_guard_close(&g);
}

static void test_reason_code_is_stable(void **state)
{
    (void)state;
    assert_string_equal(ph_reason_code(PH_REASON_WILDCARD_DNS), "wildcard_dns");
    ph_reason r;
    assert_int_equal(ph_reason_from_code("wildcard_dns", &r), PH_OK);
    assert_int_equal(r, PH_REASON_WILDCARD_DNS);
}

static void test_find_matches_on_label_boundaries(void **state)
{
    (void)state;
    static const char *const under[] = {"nip.io", "a.nip.io", "a.b.c.nip.io", "rbndr.us",
                                        "7f000001.c0a80001.rbndr.us", "x.1u.ms"};
    static const char *const not_under[] = {"snip.io", "nip.io.example.com", "io", "ip.io",
                                            "xrbndr.us", "1u.ms.example"};
    for (size_t i = 0; i < sizeof under / sizeof under[0]; i++)
        if (ph_wildcard_dns_find(under[i], strlen(under[i])) == NULL)
            fail_msg("%s should be under a service", under[i]);
    for (size_t i = 0; i < sizeof not_under / sizeof not_under[0]; i++)
        if (ph_wildcard_dns_find(not_under[i], strlen(not_under[i])) != NULL)
            fail_msg("%s is not under a service", not_under[i]);
}

/* Every entry is canonical and sourced, and docs/allowlist.md lists each
 * domain with its source: the docs are checked against the data. */
static void test_list_is_canonical_sourced_and_documented(void **state)
{
    (void)state;
    char *doc = ph_test_read_file(ph_test_source_path("docs/allowlist.md"), NULL);
    assert_non_null(doc);
    size_t n = 0;
    const ph_wildcard_dns_service *all = ph_wildcard_dns_all(&n);
    assert_true(n >= 10);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(strlen(all[i].domain), all[i].domain_len);
        assert_int_equal(ph_host_check(all[i].domain, all[i].domain_len, NULL), PH_HOST_OK);
        assert_int_equal(strncmp(all[i].source, "https://", 8), 0);
        char row[512];
        snprintf(row, sizeof row, "| `%s` | %s | %s |", all[i].domain, all[i].kind, all[i].source);
        if (strstr(doc, row) == NULL)
            fail_msg("docs/allowlist.md lacks the row \"%s\"", row);
    }
    free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_time_refusal),
        cmocka_unit_test(test_reason_code_is_stable),
        cmocka_unit_test(test_find_matches_on_label_boundaries),
        cmocka_unit_test(test_list_is_canonical_sourced_and_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
