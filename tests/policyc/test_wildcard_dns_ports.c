/* test_wildcard_dns_ports.c - the two ways an allowlist could still write
 * "anywhere": a rule at or under a wildcard-DNS service (PC042, in every
 * spelling the loader canonicalizes, and in a table a policyc that did not
 * know the service wrote), and a port range covering every port (PC052, as
 * `*` is) or wider than PC_WIDE_PORT_RANGE ports (PC103, a warning). */
#include <stdio.h>
#include <string.h>

#include "decide.h"
#include "table_fixture.h"
#include "wildcard_dns-int.h"

/* Loads a one-rule policy; *d receives the diagnostics. */
static ph_status load_rule(const char *host, const char *ports, pc_diagnostics *d)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "version: 1\nlists:\n  default:\n    rules:\n      - host: \"%s\"\n"
             "        ports: %s\n",
             host, ports);
    pc_diagnostics_init(d);
    pc_policy *p = NULL;
    ph_status st = pc_policy_load_buffer(yaml, strlen(yaml), "allow.yaml", &p, d);
    pc_policy_free(&p);
    return st;
}

static size_t count_code(const pc_diagnostics *d, pc_code code)
{
    size_t n = 0;
    for (size_t i = 0; i < d->count; i++)
        n += d->items[i].code == code;
    return n;
}

static void assert_refused_as_service(const char *host, const char *domain)
{
    pc_diagnostics d;
    ph_status st = load_rule(host, "[443]", &d);
    if (st != PH_E_FORMAT || d.count != 1 || d.items[0].code != PC_E_WILDCARD_DNS)
        fail_msg("host '%s': want exactly PC042, got status %d, %zu diagnostics, first PC%03d",
                 host, st, d.count, d.count ? (int)d.items[0].code : 0);
    char under[128];
    snprintf(under, sizeof under, "is under %s,", domain);
    if (strstr(d.items[0].message, under) == NULL || strstr(d.items[0].message, "source: https://") == NULL)
        fail_msg("host '%s': message does not name %s and its source: %s", host, domain,
                 d.items[0].message);
    assert_non_null(d.items[0].help);
    pc_diagnostics_free(&d);
}

static void test_every_spelling_is_refused(void **state)
{
    (void)state;
    static const struct {
        const char *host, *domain;
    } forms[] = {
        {"*.nip.io", "nip.io"},                     /* wildcard */
        {"nip.io", "nip.io"},                       /* exact */
        {"8-8-8-8.nip.io", "nip.io"},               /* a name under it */
        {"*.NIP.IO", "nip.io"},                     /* uppercase */
        {"Nip.Io", "nip.io"},
        {"nip.io.", "nip.io"},                      /* trailing dot */
        {"*.sslip.io.", "sslip.io"},
        {"b\xc3\xbc" "cher.nip.io", "nip.io"},      /* U-label under it */
        {"xn--bcher-kva.nip.io", "nip.io"},         /* its A-label */
        {"*.xn--bcher-kva.rbndr.us", "rbndr.us"},
        {"*.sub.sslip.io", "sslip.io"},             /* wildcard over a subdomain */
        {"7f000001.c0a80001.rbndr.us", "rbndr.us"}, /* rebinding name */
        {"A.1U.MS.", "1u.ms"},
        {"*.rebind.it", "rebind.it"},
        {"x.rebind.network", "rebind.network"},
        {"www.localtest.me", "localtest.me"},
        {"*.traefik.me", "traefik.me"},
        {"10-0-0-1.xip.io", "xip.io"},
    };
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        assert_refused_as_service(forms[i].host, forms[i].domain);
}

/* The list compiled into the guard is the one policyc applies: each entry
 * exact, as a wildcard base and with a label in front. */
static void test_every_listed_service_is_refused(void **state)
{
    (void)state;
    size_t n = 0;
    const ph_wildcard_dns_service *all = ph_wildcard_dns_all(&n);
    assert_true(n >= 10);
    for (size_t i = 0; i < n; i++) {
        char host[300];
        assert_refused_as_service(all[i].domain, all[i].domain);
        snprintf(host, sizeof host, "*.%s", all[i].domain);
        assert_refused_as_service(host, all[i].domain);
        snprintf(host, sizeof host, "a-b.%s", all[i].domain);
        assert_refused_as_service(host, all[i].domain);
        assert_non_null(strstr(all[i].source, "https://"));
    }
}

static void test_names_that_only_resemble_a_service_pass(void **state)
{
    (void)state;
    static const char *const ok[] = {"snip.io", "nip.io.example.com", "*.nip.io.example.com",
                                     "xnip.io", "rbndr.us.example.org", "my1u.ms"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        pc_diagnostics d;
        if (load_rule(ok[i], "[443]", &d) != PH_OK || d.count != 0)
            fail_msg("host '%s' should load clean (%zu diagnostics)", ok[i], d.count);
        pc_diagnostics_free(&d);
    }
}

static void test_every_port_is_the_open_form(void **state)
{
    (void)state;
    static const char *const all_ports[] = {"[\"1-65535\"]", "[1-65535]",
                                            "[\"1-32767\", \"32768-65535\"]",
                                            "[1, \"2-65535\"]", "[\"1-40000\", \"30000-65535\"]",
                                            "[\"*\"]"};
    for (size_t i = 0; i < sizeof all_ports / sizeof all_ports[0]; i++) {
        pc_diagnostics d;
        if (load_rule("api.example.com", all_ports[i], &d) != PH_E_FORMAT ||
            count_code(&d, PC_E_PORT_ALLOW_ALL) != 1)
            fail_msg("ports %s: want one PC052", all_ports[i]);
        pc_diagnostics_free(&d);
    }
    /* One port short of all is not the open form (but it is wide). */
    pc_diagnostics d;
    assert_int_equal(load_rule("api.example.com", "[\"1-65534\"]", &d), PH_OK);
    assert_int_equal(count_code(&d, PC_E_PORT_ALLOW_ALL), 0);
    assert_int_equal(count_code(&d, PC_W_WIDE_PORT_RANGE), 1);
    pc_diagnostics_free(&d);
}

static void test_wide_ranges_warn_and_werror_fails(void **state)
{
    (void)state;
    pc_diagnostics d;
    assert_int_equal(load_rule("api.example.com", "[\"1-1024\", \"8000-9023\"]", &d), PH_OK);
    assert_int_equal(d.count, 0); /* exactly 1024 ports: no warning */
    pc_diagnostics_free(&d);

    assert_int_equal(load_rule("api.example.com", "[\"8000-9024\"]", &d), PH_OK);
    assert_int_equal(d.count, 1);
    assert_int_equal(d.items[0].code, PC_W_WIDE_PORT_RANGE);
    assert_int_equal(d.items[0].severity, PC_SEV_WARNING);
    assert_non_null(strstr(d.items[0].message, "1025 ports"));
    assert_int_equal(d.errors, 0);
    pc_diagnostics_promote_warnings(&d); /* what --werror does */
    assert_int_equal(d.errors, 1);
    assert_int_equal(d.items[0].severity, PC_SEV_ERROR);
    pc_diagnostics_free(&d);
}

/* A table whose rules name services, as a policyc that did not refuse them
 * wrote it: the reader refuses the names at lookup, explain names why. */
static void test_older_table_cannot_smuggle_a_service(void **state)
{
    (void)state;
    static const char yaml[] = "version: 1\nlists:\n  default:\n    rules:\n"
                               "      - {host: \"*.nip.zz\", ports: [443]}\n"
                               "      - {host: sslip.zz, ports: [443]}\n"
                               "      - {host: snip.zz, ports: [443]}\n"
                               "      - {host: api.github.com, ports: [443]}\n";
    ph_table *t = fx_open_renamed(yaml, ".zz", ".io");

    ph_table_result r;
    assert_int_equal(ph_table_lookup(t, "default", "8-8-8-8.nip.io", 14, 443, &r), PH_OK);
    assert_false(r.allowed);
    assert_int_equal(r.reason, PH_REASON_WILDCARD_DNS);
    assert_false(r.has_rule);
    assert_int_equal(ph_table_lookup(t, "default", "sslip.io", 8, 443, &r), PH_OK);
    assert_int_equal(r.reason, PH_REASON_WILDCARD_DNS);
    assert_int_equal(ph_table_lookup(t, "default", "snip.io", 7, 443, &r), PH_OK);
    assert_true(r.allowed);
    assert_int_equal(ph_table_lookup(t, "default", "api.github.com", 14, 443, &r), PH_OK);
    assert_true(r.allowed);

    ph_table_explanation ex;
    assert_int_equal(ph_table_explain(t, "default", "xn--bcher-kva.nip.io", 20, 443, &ex), PH_OK);
    assert_false(ex.result.allowed);
    assert_int_equal(ex.result.reason, PH_REASON_WILDCARD_DNS);
    assert_int_equal(ex.near, PH_TABLE_NEAR_WILDCARD_DNS);
    assert_true(ex.has_near_rule);
    assert_string_equal(ex.near_rule.host, "*.nip.io");

    /* policyc decides as the proxy does: canonicalized, refused, 403. */
    pc_decider dc;
    assert_int_equal(pc_decider_open(&t, &dc, NULL), PH_OK);
    ph_decision d;
    pc_decide(&dc, "default", "XN--BCHER-KVA.Nip.IO:443", &d);
    assert_false(d.allowed);
    assert_int_equal(d.reason, PH_REASON_WILDCARD_DNS);
    assert_int_equal(d.http_status, 403);
    assert_string_equal(d.verdict.host, "xn--bcher-kva.nip.io");
    pc_decide(&dc, "default", "API.GitHub.com:443", &d);
    assert_true(d.allowed);
    assert_int_equal(d.http_status, 200);
    pc_decider_close(&dc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_spelling_is_refused),
        cmocka_unit_test(test_every_listed_service_is_refused),
        cmocka_unit_test(test_names_that_only_resemble_a_service_pass),
        cmocka_unit_test(test_every_port_is_the_open_form),
        cmocka_unit_test(test_wide_ranges_warn_and_werror_fails),
        cmocka_unit_test(test_older_table_cannot_smuggle_a_service),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
