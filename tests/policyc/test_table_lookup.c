/* test_table_lookup.c - what a compiled table allows: exact names, wildcards
 * of exactly one label, ports and ranges, lists and includes, provenance,
 * refusal of non-canonical input, and the nearest-rule explanations. */
#include <string.h>

#include "pinhole/host.h"
#include "table_fixture.h"
#include "table_format.h"

static const char *const POLICY =
    "version: 1\n"
    "lists:\n"
    "  default:\n"
    "    include: [common]\n"
    "    rules:\n"
    "      - host: api.github.com\n"
    "        ports: [443]\n"
    "        reason: GitHub API\n"
    "      - host: \"*.example.com\"\n"
    "        ports: [443, \"8000-8010\"]\n"
    "      - host: a.example.com\n"
    "        ports: [22]\n"
    "  common:\n"
    "    rules:\n"
    "      - host: pypi.org\n"
    "        ports: [443]\n"
    "        reason: Python packages\n"
    "  other:\n"
    "    rules:\n"
    "      - host: only.other.org\n"
    "        ports: [80]\n";

static ph_table *table;

static int setup(void **state)
{
    (void)state;
    table = fx_open(POLICY);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_table_close(&table);
    assert_null(table);
    return 0;
}

static ph_table_result look(const char *list, const char *host, uint16_t port)
{
    ph_table_result r;
    memset(&r, 0xa5, sizeof r);
    ph_status st = ph_table_lookup(table, list, host, strlen(host), port, &r);
    assert_int_equal(st, PH_OK);
    return r;
}

static void allowed(const char *list, const char *host, uint16_t port, const char *rule_host)
{
    ph_table_result r = look(list, host, port);
    if (!r.allowed)
        fail_msg("%s:%u in %s should be allowed (got %s)", host, port, list,
                 ph_reason_code(r.reason));
    assert_int_equal(r.reason, PH_REASON_ALLOWED);
    assert_true(r.has_rule);
    assert_string_equal(r.rule.host, rule_host);
    assert_string_equal(r.rule.list, list);
}

static void denied(const char *list, const char *host, uint16_t port, ph_reason why)
{
    ph_table_result r = look(list, host, port);
    if (r.allowed)
        fail_msg("%s:%u in %s should be denied", host, port, list);
    assert_int_equal(r.reason, why);
    assert_false(r.has_rule);
}

/* Entries carry the first 27 bytes of their host inline; a longer name is
 * compared in full, so a name differing only past byte 27 must not match. */
static void long_names_are_compared_past_the_inline_prefix(void **state)
{
    (void)state;
    ph_table *saved = table;
    table = fx_open("version: 1\n"
                    "lists:\n"
                    "  default:\n"
                    "    rules:\n"
                    "      - host: a-name-longer-than-the-inline-prefix.example.com\n"
                    "        ports: [443]\n"
                    "      - host: \"*.another-name-longer-than-the-inline-prefix.example.net\"\n"
                    "        ports: [443]\n");
    allowed("default", "a-name-longer-than-the-inline-prefix.example.com", 443,
            "a-name-longer-than-the-inline-prefix.example.com");
    denied("default", "a-name-longer-than-the-inline-prefix.example.org", 443,
           PH_REASON_NOT_ALLOWLISTED);
    denied("default", "a-name-longer-than-the-inline-prefix.example.co", 443,
           PH_REASON_NOT_ALLOWLISTED);
    allowed("default", "x.another-name-longer-than-the-inline-prefix.example.net", 443,
            "*.another-name-longer-than-the-inline-prefix.example.net");
    denied("default", "x.another-name-longer-than-the-inline-prefix.example.com", 443,
           PH_REASON_NOT_ALLOWLISTED);
    denied("default", "a-name-longer-than-the-inline-prefix.example.com", 444,
           PH_REASON_PORT_NOT_ALLOWED);
    ph_table_close(&table);
    table = saved;
}

/* Entries live at their hash slots (linear probing), TAGS beside them, and
 * a cluster that starts at the last home slot runs on into the slots after
 * the home slots, which end with 16 empty ones: 40 names sharing that home
 * slot fill 40 slots from it, across three 16-tag compares, and each is
 * found; a name with the same home slot that no rule names is not, and
 * every destination is enumerated in order. */
static void a_cluster_past_the_last_home_slot_is_found_whole(void **state)
{
    (void)state;
    enum { N = 40 };
    const uint32_t homes = (uint32_t)ph_tab_home_count(N);
    char names[N + 8][32], yaml[N * 64 + 64];
    size_t at = (size_t)snprintf(yaml, sizeof yaml, "version: 1\nlists:\n  default:\n    rules:\n");
    int found = 0;
    for (unsigned i = 0; found < N + 8; i++) {
        char name[32];
        int len = snprintf(name, sizeof name, "h%u.cluster.test", i);
        if (ph_tab_home(ph_tab_hash(0, PH_TAB_KIND_EXACT, name, (size_t)len), homes) != homes - 1)
            continue;
        memcpy(names[found], name, (size_t)len + 1);
        if (found++ < N)
            at += (size_t)snprintf(yaml + at, sizeof yaml - at,
                                   "      - host: %s\n        ports: [443]\n", name);
    }
    uint8_t *image;
    size_t len;
    fx_compile(yaml, &image, &len);
    const uint8_t *dir = image + PH_TAB_HEADER_SIZE + (PH_TAB_SEC_ENTRIES - 1) * PH_TAB_DIRENT_SIZE;
    assert_int_equal(ph_tab_get32(dir + PH_TAB_DIRENT_COUNT), homes - 1 + N + PH_TAB_SLOT_CHUNK);
    free(image);
    ph_table *saved = table;
    table = fx_open(yaml);
    for (int i = 0; i < N; i++)
        allowed("default", names[i], 443, names[i]);
    for (int i = N; i < N + 8; i++)
        denied("default", names[i], 443, PH_REASON_NOT_ALLOWLISTED);
    assert_int_equal(ph_table_list_destination_count(table, 0), N);
    char prev[256] = "", host[256];
    for (size_t d = 0; d < N; d++) {
        assert_int_equal(ph_table_destination_at(table, 0, d, host, NULL), PH_OK);
        assert_true(strcmp(prev, host) < 0);
        memcpy(prev, host, sizeof prev);
    }
    ph_table_close(&table);
    table = saved;
}

/* Names of 26 to 29 bytes, around the end of the inline prefix, each
 * beside one differing only in its last byte; a hit's protocol, copied into
 * the entry, is its rule's for every protocol, on the entry's first port
 * range (read from the entry) and on a later one (read from RULES). */
static void names_at_the_prefix_edge_and_protocols(void **state)
{
    (void)state;
    ph_table *saved = table;
    table = fx_open("version: 1\n"
                    "lists:\n"
                    "  default:\n"
                    "    rules:\n"
                    "      - host: a2345678901234567890123.org\n" /* 27 bytes */
                    "        ports: [443, 8443]\n"
                    "        protocol: tls\n"
                    "      - host: a23456789012345678901234.org\n" /* 28 */
                    "        ports: [80, 8080]\n"
                    "        protocol: http\n"
                    "      - host: a234567890123456789012.org\n" /* 26 */
                    "        ports: [22, 2222]\n"
                    "        protocol: tcp\n"
                    "      - host: \"*.a234567890123456789012345.org\"\n" /* base 29 */
                    "        ports: [443, 9443]\n");
    static const struct {
        const char *host, *rule;
        uint16_t port;
        ph_protocol protocol;
    } hit[] = {
        { "a2345678901234567890123.org", "a2345678901234567890123.org", 443, PH_PROTOCOL_TLS },
        { "a2345678901234567890123.org", "a2345678901234567890123.org", 8443, PH_PROTOCOL_TLS },
        { "a23456789012345678901234.org", "a23456789012345678901234.org", 80, PH_PROTOCOL_HTTP },
        { "a23456789012345678901234.org", "a23456789012345678901234.org", 8080,
          PH_PROTOCOL_HTTP },
        { "a234567890123456789012.org", "a234567890123456789012.org", 22, PH_PROTOCOL_TCP },
        { "a234567890123456789012.org", "a234567890123456789012.org", 2222, PH_PROTOCOL_TCP },
        { "x.a234567890123456789012345.org", "*.a234567890123456789012345.org", 443,
          PH_PROTOCOL_DEFAULT },
        { "x.a234567890123456789012345.org", "*.a234567890123456789012345.org", 9443,
          PH_PROTOCOL_DEFAULT },
    };
    for (size_t i = 0; i < sizeof hit / sizeof *hit; i++) {
        allowed("default", hit[i].host, hit[i].port, hit[i].rule);
        assert_int_equal(look("default", hit[i].host, hit[i].port).rule.protocol, hit[i].protocol);
    }
    denied("default", "a2345678901234567890123.orh", 443, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "a23456789012345678901234.orh", 80, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "a234567890123456789012.orh", 22, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "x.a234567890123456789012345.orh", 443, PH_REASON_NOT_ALLOWLISTED);
    ph_table_close(&table);
    table = saved;
}

static void exact_name_matches_only_itself(void **state)
{
    (void)state;
    allowed("default", "api.github.com", 443, "api.github.com");
    denied("default", "github.com", 443, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "x.api.github.com", 443, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "api.github.co", 443, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "api.github.com", 80, PH_REASON_PORT_NOT_ALLOWED);
}

static void wildcard_covers_exactly_one_label(void **state)
{
    (void)state;
    allowed("default", "b.example.com", 443, "*.example.com");
    allowed("default", "xn--bcher-kva.example.com", 8005, "*.example.com");
    denied("default", "example.com", 443, PH_REASON_NOT_ALLOWLISTED);       /* apex */
    denied("default", "a.b.example.com", 443, PH_REASON_NOT_ALLOWLISTED);   /* too deep */
    denied("default", "evilexample.com", 443, PH_REASON_NOT_ALLOWLISTED);   /* no label boundary */
    denied("default", "b.example.com.evil.org", 443, PH_REASON_NOT_ALLOWLISTED);
    denied("default", "b.example.co", 443, PH_REASON_NOT_ALLOWLISTED);
}

static void ports_and_ranges_are_inclusive(void **state)
{
    (void)state;
    allowed("default", "b.example.com", 8000, "*.example.com");
    allowed("default", "b.example.com", 8010, "*.example.com");
    denied("default", "b.example.com", 7999, PH_REASON_PORT_NOT_ALLOWED);
    denied("default", "b.example.com", 8011, PH_REASON_PORT_NOT_ALLOWED);
    denied("default", "b.example.com", 0, PH_REASON_PORT_NOT_ALLOWED);
    denied("default", "b.example.com", 65535, PH_REASON_PORT_NOT_ALLOWED);
    denied("default", "b.example.com", 444, PH_REASON_PORT_NOT_ALLOWED);
}

static void exact_and_wildcard_rules_combine(void **state)
{
    (void)state;
    /* a.example.com has its own rule (22) and the wildcard's ports. */
    allowed("default", "a.example.com", 22, "a.example.com");
    allowed("default", "a.example.com", 443, "*.example.com");
    denied("default", "b.example.com", 22, PH_REASON_PORT_NOT_ALLOWED);
}

static void includes_are_flattened_with_provenance(void **state)
{
    (void)state;
    ph_table_result r = look("default", "pypi.org", 443);
    assert_true(r.allowed);
    assert_string_equal(r.rule.file, "allow.yaml");
    assert_int_equal(r.rule.line, 15);
    assert_string_equal(r.rule.reason, "Python packages");
    assert_string_equal(r.rule.list, "default");
    r = look("default", "api.github.com", 443);
    assert_int_equal(r.rule.line, 6);
    assert_string_equal(r.rule.reason, "GitHub API");
    r = look("default", "b.example.com", 443);
    assert_null(r.rule.reason);
    allowed("common", "pypi.org", 443, "pypi.org");
    denied("common", "api.github.com", 443, PH_REASON_NOT_ALLOWLISTED);
    denied("other", "pypi.org", 443, PH_REASON_NOT_ALLOWLISTED);
    allowed("other", "only.other.org", 80, "only.other.org");
}

static void unknown_list_is_its_own_reason(void **state)
{
    (void)state;
    denied("nosuchlist", "api.github.com", 443, PH_REASON_UNKNOWN_LIST);
    denied("", "api.github.com", 443, PH_REASON_UNKNOWN_LIST);
    denied("defaul", "api.github.com", 443, PH_REASON_UNKNOWN_LIST);
}

static void non_canonical_hosts_are_refused_not_matched(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "API.github.com", "api.github.com.", "api..github.com", ".api.github.com", "",
        "com", "127.0.0.1", "10.0.0.1", "0x7f.1", "2130706433", "[::1]", "::1",
        "a.example.com:443", "a b.example.com", "-a.example.com", "a-.example.com",
        "b\xc3\xa9.example.com", "a.example.com/x", "*.example.com",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ph_table_result r;
        ph_status st = ph_table_lookup(table, "default", bad[i], strlen(bad[i]), 443, &r);
        if (st != PH_E_INVAL)
            fail_msg("'%s' was not refused", bad[i]);
        assert_false(r.allowed);
        assert_int_equal(r.reason, PH_REASON_PARSE_ERROR);
    }
    /* The length argument is authoritative: no reading past it. */
    ph_table_result r;
    assert_int_equal(ph_table_lookup(table, "default", "api.github.comX", 14, 443, &r), PH_OK);
    assert_true(r.allowed);
    assert_int_equal(ph_table_lookup(NULL, "default", "a.b", 3, 443, &r), PH_E_INVAL);
    assert_int_equal(ph_table_lookup(table, NULL, "a.b", 3, 443, &r), PH_E_INVAL);
    assert_int_equal(ph_table_lookup(table, "default", NULL, 3, 443, &r), PH_E_INVAL);
    assert_int_equal(ph_table_lookup(table, "default", "a.b", 3, 443, NULL), PH_E_INVAL);
}

/* The lookup probes before it checks a name in full (a name equal to a
 * verified entry, or one checked label on a verified parent, is canonical
 * already): the verdict must still be exactly "parse_error iff ph_host_check
 * refuses", whatever the port and whether an entry exists. Random first
 * labels under the wildcard's base and under an exact name, every port case. */
static void probing_first_never_changes_which_hosts_are_refused(void **state)
{
    (void)state;
    static const char alphabet[] = "az09-_.*A\xc3";
    static const char *const bases[] = {".example.com", ".github.com", ".pypi.org", ""};
    static const uint16_t ports[] = {443, 8005, 22};
    char name[400];
    srand(11);
    for (int n = 0; n < 20000; n++) {
        size_t len = (size_t)(rand() % 6), at = 0;
        if (rand() % 50 == 0)
            len = 60 + (size_t)(rand() % 8); /* around the 63-byte label limit */
        for (; at < len; at++)
            name[at] = alphabet[rand() % (int)(sizeof alphabet - 1)];
        const char *base = bases[rand() % 4];
        memcpy(name + at, base, strlen(base) + 1);
        size_t nl = strlen(name);
        bool canonical = nl > 0 && ph_host_check(name, nl, NULL) == PH_HOST_OK;
        for (size_t p = 0; p < sizeof ports / sizeof *ports; p++) {
            ph_table_result r;
            ph_status st = ph_table_lookup(table, "default", name, nl, ports[p], &r);
            if ((st == PH_E_INVAL) == canonical ||
                (r.reason == PH_REASON_PARSE_ERROR) == canonical)
                fail_msg("'%s' port %u: status %d reason %d, ph_host_check says %s", name,
                         ports[p], st, r.reason, canonical ? "canonical" : "not canonical");
        }
    }
    /* Longer than 253 bytes with a parent that has a wildcard. */
    memset(name, 'a', 300);
    for (size_t i = 50; i < 250; i += 51)
        name[i] = '.';
    memcpy(name + 250, ".example.com", 13);
    ph_table_result r;
    assert_int_equal(ph_table_lookup(table, "default", name, strlen(name), 443, &r), PH_E_INVAL);
    assert_int_equal(r.reason, PH_REASON_PARSE_ERROR);
    /* An embedded NUL in the first label is not a label character. */
    assert_int_equal(ph_table_lookup(table, "default", "a\0b.example.com", 15, 443, &r),
                     PH_E_INVAL);
    assert_int_equal(r.reason, PH_REASON_PARSE_ERROR);
}

static ph_table_explanation explain(const char *list, const char *host, uint16_t port)
{
    ph_table_explanation ex;
    assert_int_equal(ph_table_explain(table, list, host, strlen(host), port, &ex), PH_OK);
    assert_false(ex.result.allowed);
    return ex;
}

static void explain_names_the_nearest_rule(void **state)
{
    (void)state;
    ph_table_explanation ex = explain("default", "api.github.com", 80);
    assert_int_equal(ex.near, PH_TABLE_NEAR_WRONG_PORT);
    assert_true(ex.has_near_rule);
    assert_string_equal(ex.near_rule.host, "api.github.com");

    ex = explain("default", "b.example.com", 8020);
    assert_int_equal(ex.near, PH_TABLE_NEAR_WRONG_PORT);
    assert_string_equal(ex.near_rule.host, "*.example.com");

    ex = explain("default", "a.b.example.com", 443);
    assert_int_equal(ex.near, PH_TABLE_NEAR_TOO_DEEP);
    assert_string_equal(ex.near_rule.host, "*.example.com");
    ex = explain("default", "x.y.z.example.com", 443);
    assert_int_equal(ex.near, PH_TABLE_NEAR_TOO_DEEP);

    ex = explain("default", "example.com", 443);
    assert_int_equal(ex.near, PH_TABLE_NEAR_APEX);
    assert_string_equal(ex.near_rule.host, "*.example.com");
    assert_int_equal(ex.near_rule.line, 9);

    ex = explain("nolist", "example.com", 443);
    assert_int_equal(ex.near, PH_TABLE_NEAR_UNKNOWN_LIST);
    assert_false(ex.has_near_rule);

    ex = explain("default", "evilexample.com", 443);
    assert_int_equal(ex.near, PH_TABLE_NEAR_NONE);
    assert_false(ex.has_near_rule);

    ph_table_explanation ok;
    assert_int_equal(ph_table_explain(table, "default", "pypi.org", 8, 443, &ok), PH_OK);
    assert_true(ok.result.allowed);
}

static void enumeration_lists_sorted_rules_flattened(void **state)
{
    (void)state;
    assert_int_equal(ph_table_list_count(table), 3);
    const char *name;
    size_t first, count;
    assert_int_equal(ph_table_list_at(table, 0, &name, &first, &count), PH_OK);
    assert_string_equal(name, "common");
    assert_int_equal(count, 1);
    assert_int_equal(ph_table_list_at(table, 1, &name, &first, &count), PH_OK);
    assert_string_equal(name, "default");
    assert_int_equal(count, 4);
    assert_int_equal(ph_table_list_at(table, 3, &name, &first, &count), PH_E_NOT_FOUND);
    size_t idx;
    assert_int_equal(ph_table_list_find(table, "other", &idx), PH_OK);
    assert_int_equal(idx, 2);
    assert_int_equal(ph_table_rule_count(table), 6);
    /* default's rules in canonical order: by base name (bytewise), exact before
     * wildcard. */
    static const char *const want[] = {"a.example.com", "api.github.com", "*.example.com",
                                       "pypi.org"};
    for (size_t i = 0; i < 4; i++) {
        ph_table_rule r;
        assert_int_equal(ph_table_rule_at(table, first + i, &r), PH_OK);
        assert_string_equal(r.host, want[i]);
    }
    ph_table_rule r;
    assert_int_equal(ph_table_rule_at(table, first + 2, &r), PH_OK);
    assert_int_equal(r.nports, 2);
    uint16_t lo, hi;
    assert_int_equal(ph_table_rule_port(table, first + 2, 1, &lo, &hi), PH_OK);
    assert_int_equal(lo, 8000);
    assert_int_equal(hi, 8010);
    assert_int_equal(ph_table_rule_port(table, first + 2, 2, &lo, &hi), PH_E_NOT_FOUND);
    assert_string_equal(ph_table_policy_id_hex(table), ph_table_policy_id_hex(table));
    assert_int_equal(strlen(ph_table_policy_id_hex(table)), 64);
}

/* Where two rules of one host overlap, the port is attributed to the rule
 * first in canonical order (ports ascending: the rule starting at 5). */
static void overlapping_rules_merge_with_canonical_first_winning(void **state)
{
    (void)state;
    ph_table *t = fx_open("version: 1\n"
                          "lists:\n"
                          "  default:\n"
                          "    rules:\n"
                          "      - host: x.example.org\n"
                          "        ports: [\"100-200\", 150, \"190-300\"]\n"
                          "        reason: first\n"
                          "      - host: x.example.org\n"
                          "        ports: [\"250-400\", 5]\n"
                          "        reason: second\n");
    ph_table_result r;
    static const struct { uint16_t port; const char *reason; } cases[] = {
        {5, "second"}, {100, "first"}, {150, "first"}, {249, "first"}, {250, "second"},
        {300, "second"}, {301, "second"}, {400, "second"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(ph_table_lookup(t, "default", "x.example.org", 13, cases[i].port, &r),
                         PH_OK);
        assert_true(r.allowed);
        assert_string_equal(r.rule.reason, cases[i].reason);
    }
    assert_int_equal(ph_table_lookup(t, "default", "x.example.org", 13, 401, &r), PH_OK);
    assert_false(r.allowed);
    assert_int_equal(ph_table_lookup(t, "default", "x.example.org", 13, 99, &r), PH_OK);
    assert_false(r.allowed);
    /* The rule keeps its own ports, merged: 100-300. */
    ph_table_rule rule;
    assert_int_equal(ph_table_rule_at(t, 1, &rule), PH_OK);
    assert_string_equal(rule.reason, "first");
    assert_int_equal(rule.nports, 1);
    uint16_t lo, hi;
    ph_table_rule_port(t, 1, 0, &lo, &hi);
    assert_int_equal(lo, 100);
    assert_int_equal(hi, 300);
    /* Destinations coalesce both rules: 5 and 100-400. */
    char host[256];
    size_t n;
    assert_int_equal(ph_table_destination_at(t, 0, 0, host, &n), PH_OK);
    assert_string_equal(host, "x.example.org");
    assert_int_equal(n, 2);
    uint16_t los[4], his[4];
    assert_int_equal(ph_table_destination_ranges(t, 0, 0, los, his, 4, &n), PH_OK);
    assert_int_equal(los[1], 100);
    assert_int_equal(his[1], 400);
    ph_table_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exact_name_matches_only_itself),
        cmocka_unit_test(long_names_are_compared_past_the_inline_prefix),
        cmocka_unit_test(a_cluster_past_the_last_home_slot_is_found_whole),
        cmocka_unit_test(names_at_the_prefix_edge_and_protocols),
        cmocka_unit_test(wildcard_covers_exactly_one_label),
        cmocka_unit_test(ports_and_ranges_are_inclusive),
        cmocka_unit_test(exact_and_wildcard_rules_combine),
        cmocka_unit_test(includes_are_flattened_with_provenance),
        cmocka_unit_test(unknown_list_is_its_own_reason),
        cmocka_unit_test(non_canonical_hosts_are_refused_not_matched),
        cmocka_unit_test(probing_first_never_changes_which_hosts_are_refused),
        cmocka_unit_test(explain_names_the_nearest_rule),
        cmocka_unit_test(enumeration_lists_sorted_rules_flattened),
        cmocka_unit_test(overlapping_rules_merge_with_canonical_first_winning),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
