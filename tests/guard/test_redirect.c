/* test_redirect.c - pinhole/redirect.h without processes: Location
 * resolution against RFC 3986 section 5.4's examples, the references other
 * parsers read differently, and ph_redirect_check's rules (hop limit,
 * decision on the target, downgrade, origin and credentials), each refusal
 * with its reason code; then thousands of checks from 8 threads. */
#include "test_support.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard_fixture.h"
#include "pinhole/redirect.h"

static ph_guard *G;

static int setup(void **state)
{
    (void)state;
    ph_table *t = ph_fixture_table("version: 1\nlists:\n  default:\n    rules:\n"
                                   "      - host: a.example\n        ports: [80, 443, 8080]\n"
                                   "      - host: b.example\n        ports: [80, 443]\n",
                                   "redirect.yaml");
    assert_int_equal(ph_guard_from_table(&t, NULL, &G, NULL), PH_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_guard_close(&G);
    return 0;
}

/* RFC 3986 section 5.4.1 and 5.4.2, base "http://a/b/c/d;p?q" with the host
 * spelled a.example (a single label is not a host the parser accepts). */
static void rfc3986_examples(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"g", "http://a.example/b/c/g"},
        {"./g", "http://a.example/b/c/g"},
        {"g/", "http://a.example/b/c/g/"},
        {"/g", "http://a.example/g"},
        {"//g.example", "http://g.example"},
        {"?y", "http://a.example/b/c/d;p?y"},
        {"g?y", "http://a.example/b/c/g?y"},
        {"#s", "http://a.example/b/c/d;p?q#s"},
        {"g#s", "http://a.example/b/c/g#s"},
        {"g?y#s", "http://a.example/b/c/g?y#s"},
        {";x", "http://a.example/b/c/;x"},
        {"g;x", "http://a.example/b/c/g;x"},
        {"g;x?y#s", "http://a.example/b/c/g;x?y#s"},
        {".", "http://a.example/b/c/"},
        {"./", "http://a.example/b/c/"},
        {"..", "http://a.example/b/"},
        {"../", "http://a.example/b/"},
        {"../g", "http://a.example/b/g"},
        {"../..", "http://a.example/"},
        {"../../", "http://a.example/"},
        {"../../g", "http://a.example/g"},
        {"../../../g", "http://a.example/g"},
        {"../../../../g", "http://a.example/g"},
        {"/./g", "http://a.example/g"},
        {"/../g", "http://a.example/g"},
        {"g.", "http://a.example/b/c/g."},
        {".g", "http://a.example/b/c/.g"},
        {"g..", "http://a.example/b/c/g.."},
        {"..g", "http://a.example/b/c/..g"},
        {"./../g", "http://a.example/b/g"},
        {"./g/.", "http://a.example/b/c/g/"},
        {"g/./h", "http://a.example/b/c/g/h"},
        {"g/../h", "http://a.example/b/c/h"},
        {"g;x=1/./y", "http://a.example/b/c/g;x=1/y"},
        {"g;x=1/../y", "http://a.example/b/c/y"},
        {"g?y/./x", "http://a.example/b/c/g?y/./x"},
        {"g#s/../x", "http://a.example/b/c/g#s/../x"},
        {"HTTPS://B.example:8443/x", "HTTPS://B.example:8443/x"},
    };
    char out[PH_URL_MAX_LEN + 1];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ph_diag d;
        ph_status st = ph_url_resolve_reference("http://a.example/b/c/d;p?q", cases[i][0], out,
                                                sizeof out, &d);
        if (st != PH_OK || strcmp(out, cases[i][1]) != 0)
            fail_msg("%s: got %s (%s), want %s", cases[i][0], out, st == PH_OK ? "" : d.message,
                     cases[i][1]);
    }
    /* A base without a path merges under "/". */
    assert_int_equal(ph_url_resolve_reference("https://a.example", "x/y", out, sizeof out, NULL),
                     PH_OK);
    assert_string_equal(out, "https://a.example/x/y");
    assert_int_equal(ph_url_resolve_reference("https://a.example", "?q", out, sizeof out, NULL),
                     PH_OK);
    assert_string_equal(out, "https://a.example/?q");
    /* The result is built from the base's canonical origin. */
    assert_int_equal(ph_url_resolve_reference("http://A.Example:80/p", "q", out, sizeof out, NULL),
                     PH_OK);
    assert_string_equal(out, "http://a.example/q");
}

static void references_read_differently_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",                        /* nothing */
        "/\\evil.example/",        /* WHATWG: //evil.example */
        "\\\\evil.example",        /* WHATWG: //evil.example */
        "/\t/evil.example",        /* WHATWG strips the tab */
        "/ /x",                    /* whitespace */
        "/\n/evil.example",        /* WHATWG strips the newline */
        "http:evil.example/",      /* WHATWG: relative; RFC 3986: a path */
        "https:/evil.example/",    /* WHATWG: //evil.example */
        "file:///etc/passwd",      /* not http(s) */
        "javascript:alert(1)",
        "gopher://a.example/",
        "/caf\xc3\xa9",            /* non-ASCII */
        "/x\x7f",                  /* DEL */
    };
    char out[PH_URL_MAX_LEN + 1];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (ph_url_resolve_reference("http://a.example/p", bad[i], out, sizeof out, NULL) == PH_OK)
            fail_msg("accepted %s as %s", bad[i], out);
        assert_string_equal(out, "");
        ph_redirect r;
        assert_int_equal(
            ph_redirect_check(G, "default", "http://a.example/p", bad[i], 0, NULL, &r, NULL),
            PH_E_DENIED);
        assert_int_equal(r.verdict.reason, PH_REASON_REDIRECT_BAD_LOCATION);
        assert_false(r.verdict.allowed);
    }
    /* Too long for the result buffer. */
    char *longpath = malloc(PH_URL_MAX_LEN + 1);
    memset(longpath, 'x', PH_URL_MAX_LEN);
    longpath[0] = '/';
    longpath[PH_URL_MAX_LEN] = '\0';
    assert_int_equal(ph_url_resolve_reference("http://a.example/p", longpath, out, sizeof out, NULL),
                     PH_E_LIMIT);
    free(longpath);
    /* A base that is not an accepted URL is the caller's error. */
    ph_redirect r;
    assert_int_equal(ph_redirect_check(G, "default", "http://127.0.0.1/", "/x", 0, NULL, &r, NULL),
                     PH_E_INVAL);
    assert_int_equal(ph_redirect_check(G, "default", NULL, "/x", 0, NULL, &r, NULL), PH_E_INVAL);
    assert_int_equal(ph_redirect_check(G, "default", "http://a.example/", "/x", 0, NULL, NULL, NULL),
                     PH_E_INVAL);
}

typedef struct rcase {
    const char *from, *location;
    unsigned hop;
    bool allow_downgrade;
    ph_status st;
    ph_reason reason;
    bool same_origin;
} rcase;

static void redirect_rules(void **state)
{
    (void)state;
    static const rcase cases[] = {
        /* followed, same origin: credentials may stay */
        {"http://a.example/p", "/q", 0, false, PH_OK, PH_REASON_ALLOWED, true},
        {"http://a.example/p", "http://A.EXAMPLE:80/q", 0, false, PH_OK, PH_REASON_ALLOWED, true},
        {"https://a.example/p", "//a.example/q", 9, false, PH_OK, PH_REASON_ALLOWED, true},
        /* followed, another origin: host, port or scheme */
        {"http://a.example/p", "http://b.example/q", 0, false, PH_OK, PH_REASON_ALLOWED, false},
        {"http://a.example/p", "http://a.example:8080/q", 0, false, PH_OK, PH_REASON_ALLOWED, false},
        {"http://a.example/p", "https://a.example/q", 0, false, PH_OK, PH_REASON_ALLOWED, false},
        {"https://a.example/p", "http://a.example/q", 0, true, PH_OK, PH_REASON_ALLOWED, false},
        /* refused by the decision on the target */
        {"http://a.example/p", "http://169.254.169.254/latest/meta-data/", 0, false, PH_E_DENIED,
         PH_REASON_IP_LITERAL, false},
        {"http://a.example/p", "http://[::1]/", 0, false, PH_E_DENIED, PH_REASON_IP_LITERAL, false},
        {"http://a.example/p", "//2130706433/", 0, false, PH_E_DENIED, PH_REASON_IP_LITERAL, false},
        {"http://a.example/p", "http://evil.example/", 0, false, PH_E_DENIED,
         PH_REASON_NOT_ALLOWLISTED, false},
        {"http://a.example/p", "http://a.example:81/", 0, false, PH_E_DENIED,
         PH_REASON_PORT_NOT_ALLOWED, false},
        {"http://a.example/p", "http://u@a.example/", 0, false, PH_E_DENIED,
         PH_REASON_PARSE_ERROR, false},
        /* the redirect rules */
        {"https://a.example/p", "http://a.example/q", 0, false, PH_E_DENIED,
         PH_REASON_REDIRECT_DOWNGRADE, false},
        {"http://a.example/p", "/q", 10, false, PH_E_DENIED, PH_REASON_REDIRECT_LIMIT, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const rcase *c = &cases[i];
        ph_redirect_options o = {.allow_downgrade = c->allow_downgrade};
        ph_redirect r;
        ph_diag d;
        ph_status st = ph_redirect_check(G, "default", c->from, c->location, c->hop, &o, &r, &d);
        if (st != c->st || r.verdict.reason != c->reason || r.same_origin != c->same_origin)
            fail_msg("%s -> %s: %s %s same_origin=%d (%s)", c->from, c->location, ph_strerror(st),
                     ph_reason_code(r.verdict.reason), r.same_origin, r.verdict.detail);
        assert_int_equal(r.verdict.allowed, st == PH_OK);
        assert_int_equal(r.drop_credentials, !c->same_origin);
        if (st == PH_OK) {
            assert_true(r.verdict.has_rule);
            assert_string_equal(r.verdict.rule_file, "redirect.yaml");
        } else {
            assert_string_not_equal(r.verdict.detail, "");
            assert_int_equal(d.status, PH_E_DENIED);
        }
    }
    /* The hop limit is the option's. */
    ph_redirect_options two = {.max_hops = 2};
    ph_redirect r;
    assert_int_equal(ph_redirect_check(G, "default", "http://a.example/", "/x", 1, &two, &r, NULL),
                     PH_OK);
    assert_int_equal(ph_redirect_check(G, "default", "http://a.example/", "/x", 2, &two, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_REDIRECT_LIMIT);
    /* An unknown list is the decision's refusal. */
    assert_int_equal(ph_redirect_check(G, "nope", "http://a.example/", "/x", 0, NULL, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_UNKNOWN_LIST);
}

static void redirect_reasons_have_codes_and_statuses(void **state)
{
    (void)state;
    static const struct {
        ph_reason r;
        const char *code;
        int status;
    } want[] = {
        {PH_REASON_REDIRECT_DOWNGRADE, "redirect_downgrade", 403},
        {PH_REASON_REDIRECT_LIMIT, "redirect_limit", 502},
        {PH_REASON_REDIRECT_BAD_LOCATION, "redirect_bad_location", 502},
        {PH_REASON_REDIRECT_BODY_CROSS_ORIGIN, "redirect_body_cross_origin", 403},
    };
    char *docs = ph_test_read_file(ph_test_source_path("docs/worker.md"), NULL);
    assert_non_null(docs);
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        assert_string_equal(ph_reason_code(want[i].r), want[i].code);
        assert_int_equal(ph_reason_http_status(want[i].r), want[i].status);
        ph_reason back;
        assert_int_equal(ph_reason_from_code(want[i].code, &back), PH_OK);
        assert_int_equal(back, want[i].r);
        char row[96];
        snprintf(row, sizeof row, "| `%s` | %d |", want[i].code, want[i].status);
        if (strstr(docs, row) == NULL)
            fail_msg("docs/worker.md has no row \"%s\"", row);
    }
    free(docs);
}

/* What follows a redirect: every header on the same origin, a short list
 * to another; the body only on the same origin unless asked for. */
static void headers_and_body_stay_on_their_origin(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool same, body, follows;
    } cases[] = {
        {"Authorization", false, true, false},   {"X-Api-Key", false, true, false},
        {"Private-Token", false, false, false},  {"cookie", false, true, false},
        {"Proxy-Authorization", false, true, false}, {"Host", false, true, false},
        {"X-Api-Key", true, true, true},         {"Authorization", true, false, true},
        {"Accept", false, false, true},          {"user-agent", false, false, true},
        {"Accept-Language", false, true, true},  {"ACCEPT-ENCODING", false, true, true},
        {"Content-Type", false, true, true},     {"Content-Type", false, false, false},
        {"Content-Length", true, false, false},  {"Transfer-Encoding", true, true, true},
        {"Accepts", false, true, false},         {"Accep", false, true, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (ph_redirect_header_follows(cases[i].name, strlen(cases[i].name), cases[i].same,
                                       cases[i].body) != cases[i].follows)
            fail_msg("%s (same origin %d, body %d): expected follows=%d", cases[i].name,
                     cases[i].same, cases[i].body, cases[i].follows);
    /* A length, not a terminator: "Accept: x" as a whole line. */
    assert_true(ph_redirect_header_follows("Accept: x", 6, false, false));
    assert_false(ph_redirect_header_follows(NULL, 0, true, true));
    /* The accessors enumerate exactly what the function keeps. */
    size_t n = 0;
    for (const char *h; (h = ph_redirect_cross_origin_header(n)) != NULL; n++)
        assert_true(ph_redirect_header_follows(h, strlen(h), false, false));
    assert_int_equal(n, 4);
    size_t m = 0;
    for (const char *h; (h = ph_redirect_body_header(m)) != NULL; m++) {
        assert_true(ph_redirect_header_follows(h, strlen(h), false, true));
        assert_false(ph_redirect_header_follows(h, strlen(h), true, false));
    }
    assert_int_equal(m, 4);
    assert_null(ph_redirect_cross_origin_header((size_t)-1));
    /* The method rule. */
    assert_string_equal(ph_redirect_next_method(303, "POST"), "GET");
    assert_string_equal(ph_redirect_next_method(303, "HEAD"), "HEAD");
    assert_string_equal(ph_redirect_next_method(302, "PUT"), "GET");
    assert_string_equal(ph_redirect_next_method(301, "POST"), "GET");
    assert_string_equal(ph_redirect_next_method(301, "PUT"), "PUT");
    assert_string_equal(ph_redirect_next_method(307, "POST"), "POST");
    assert_string_equal(ph_redirect_next_method(308, "PATCH"), "PATCH");
    assert_null(ph_redirect_next_method(307, NULL));
    /* A body re-sent to another origin: refused unless asked for. */
    ph_redirect r;
    ph_redirect_options body = {.resend_body = true};
    assert_int_equal(ph_redirect_check(G, "default", "https://a.example/t", "https://b.example/t",
                                       0, &body, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_REDIRECT_BODY_CROSS_ORIGIN);
    assert_true(r.drop_credentials);
    assert_int_equal(ph_redirect_check(G, "default", "https://a.example/t", "/u", 0, &body, &r,
                                       NULL),
                     PH_OK);
    assert_true(r.same_origin);
    body.allow_body_cross_origin = true;
    assert_int_equal(ph_redirect_check(G, "default", "https://a.example/t", "https://b.example/t",
                                       0, &body, &r, NULL),
                     PH_OK);
    assert_true(r.drop_credentials);
    /* The other refusals come first: an IP literal is still ip_literal. */
    body.allow_body_cross_origin = false;
    assert_int_equal(ph_redirect_check(G, "default", "https://a.example/t",
                                       "https://169.254.169.254/", 0, &body, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_IP_LITERAL);
}

/* Thousands of checks from 8 threads: every one decides as on one thread. */
#define THREADS 8
#define PER_THREAD 2000
static void *checker(void *arg)
{
    unsigned *errors = arg;
    for (unsigned i = 0; i < PER_THREAD; i++) {
        ph_redirect r;
        const char *loc = (i % 3 == 0)   ? "http://b.example/x"
                          : (i % 3 == 1) ? "http://169.254.169.254/"
                                         : "../y";
        ph_status st = ph_redirect_check(G, "default", "https://a.example/p/q", loc, i % 12,
                                         NULL, &r, NULL);
        bool want_ok = i % 12 < 10 && i % 3 == 2;
        ph_reason want = i % 12 >= 10  ? PH_REASON_REDIRECT_LIMIT
                         : i % 3 == 0 ? PH_REASON_REDIRECT_DOWNGRADE
                         : i % 3 == 1 ? PH_REASON_IP_LITERAL
                                      : PH_REASON_ALLOWED;
        if ((st == PH_OK) != want_ok || r.verdict.reason != want)
            (*errors)++;
        ph_url_request req = {.url = "https://a.example/", .url_len = 18, .list = "default"};
        ph_decision d;
        if (ph_decide_url(G, &req, &d) != PH_OK || !d.verdict.allowed)
            (*errors)++;
    }
    return NULL;
}

static void thousands_of_checks_from_8_threads(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    unsigned errors[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, checker, &errors[i]), 0);
    unsigned total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        total += errors[i];
    }
    printf("%u redirect checks and %u URL checks from %d threads, %u errors\n",
           THREADS * PER_THREAD, THREADS * PER_THREAD, THREADS, total);
    assert_int_equal(total, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rfc3986_examples),
        cmocka_unit_test(references_read_differently_are_refused),
        cmocka_unit_test(redirect_rules),
        cmocka_unit_test(redirect_reasons_have_codes_and_statuses),
        cmocka_unit_test(headers_and_body_stay_on_their_origin),
        cmocka_unit_test(thousands_of_checks_from_8_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
