/*
 * test_url_differential.c - the strict parser against two other parsers.
 *
 * tests/data/urls/differential.tsv is the curated result of the differential
 * campaign (scripts/url-differential.mjs, docs/url.md): hostile URLs, each a
 * distinct trick, with our verdict and the host:port that the WHATWG URL
 * Standard (Node.js, recorded offline) and libcurl's URL API (RFC 3986 style)
 * extracted. This test checks:
 *   - every row gets exactly its verdict (and host:port when accepted);
 *   - every accepted row was recorded with WHATWG and curl agreeing with us;
 *   - libcurl, now, extracts the same host and port for every accepted row;
 *   - mutants: every accepted row with a delimiter, whitespace or unicode
 *     byte sequence inserted at each position, or one byte replaced, is either
 *     refused or extracted identically by libcurl (thousands of URLs).
 *
 * The same binary is the campaign's oracle: `test_url_differential --oracle`
 * reads hex-encoded URLs, one per line, and prints for each
 * "verdict<TAB>host:port<TAB>curl host:port" (see scripts/url-differential.mjs).
 */
#include "test_support.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/hex.h"
#include "pinhole/url.h"
#include "url_tsv.h"

#define CELL_MAX 512

/* Our verdict on url[0..len): "ok", "ip_literal" or "parse_error"; hostport
 * gets "host:port" when accepted, "-" otherwise. */
static const char *ours(const char *url, size_t len, char *hostport, size_t cap)
{
    ph_url u;
    ph_status st = ph_url_parse(url, len, &u, NULL);
    if (st != PH_OK) {
        snprintf(hostport, cap, "-");
        return u.reason == PH_REASON_IP_LITERAL ? "ip_literal" : "parse_error";
    }
    snprintf(hostport, cap, "%s:%u", u.host, (unsigned)u.port);
    return "ok";
}

/* What libcurl's URL API, default flags (unknown schemes refused), extracts
 * from the NUL-terminated url: "host:port" ("[v6%zone]:port" for IPv6), or
 * "fail:N" with the CURLUcode. */
static void curl_host_port(const char *url, char *out, size_t cap)
{
    CURLU *h = curl_url();
    assert_non_null(h);
    char *host = NULL, *port = NULL, *zone = NULL;
    CURLUcode rc = curl_url_set(h, CURLUPART_URL, url, 0);
    if (rc == CURLUE_OK)
        rc = curl_url_get(h, CURLUPART_HOST, &host, 0);
    if (rc == CURLUE_OK)
        rc = curl_url_get(h, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    if (rc != CURLUE_OK) {
        snprintf(out, cap, "fail:%d", (int)rc);
    } else if (curl_url_get(h, CURLUPART_ZONEID, &zone, 0) == CURLUE_OK && zone != NULL &&
               host[0] == '[') {
        snprintf(out, cap, "%.*s%%%s]:%s", (int)(strlen(host) - 1), host, zone, port);
    } else {
        snprintf(out, cap, "%s:%s", host, port);
    }
    curl_free(host);
    curl_free(port);
    curl_free(zone);
    curl_url_cleanup(h);
}

/* ours ("host:port", lowercase) names the same host and port as theirs:
 * libcurl keeps the host's case, and DNS and TLS ignore ASCII case. */
static bool same_host_port(const char *ours_hp, const char *theirs)
{
    size_t i = 0;
    for (; ours_hp[i] != '\0'; i++)
        if (ph_ascii_lower((unsigned char)theirs[i]) != ours_hp[i])
            return false;
    return theirs[i] == '\0';
}

/* ---- the table ---- */

typedef struct row_stats {
    unsigned rows, ok, ip_literal, parse_error, failures;
    unsigned whatwg_fail, curl_fail; /* refused rows the other parser refuses too */
} row_stats;

static void check_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    static char input[PH_URL_MAX_LEN + 64];
    row_stats *s = ctx;
    if (ncol < 5)
        fail_msg("differential.tsv:%u: expected at least 5 columns, got %zu", line, ncol);
    const char *expect = cols[1], *want_hp = cols[2], *whatwg = cols[3], *curl = cols[4];
    size_t len = url_tsv_unescape(cols[0], input, sizeof input, "differential.tsv", line);
    char hp[CELL_MAX];
    const char *got = ours(input, len, hp, sizeof hp);
    s->rows++;
    if (strcmp(got, expect) != 0 || strcmp(hp, want_hp) != 0) {
        print_error("differential.tsv:%u: %s: expected %s %s, got %s %s\n", line, cols[0], expect,
                    want_hp, got, hp);
        s->failures++;
        return;
    }
    if (strcmp(expect, "ok") == 0) {
        s->ok++;
        /* the campaign only keeps an accepted URL when both parsers agreed */
        if (strcmp(whatwg, hp) != 0 || !same_host_port(hp, curl)) {
            print_error("differential.tsv:%u: %s accepted as %s but recorded WHATWG %s, curl %s\n",
                        line, cols[0], hp, whatwg, curl);
            s->failures++;
        }
        return;
    }
    if (strcmp(expect, "ip_literal") == 0)
        s->ip_literal++;
    else
        s->parse_error++;
    s->whatwg_fail += strcmp(whatwg, "fail") == 0;
    s->curl_fail += strncmp(curl, "fail", 4) == 0;
}

static void test_every_row_gets_its_verdict(void **state)
{
    (void)state;
    row_stats s = {0};
    url_tsv_for_each_row("differential.tsv", check_row, &s);
    print_message("differential.tsv: %u rows (%u ok, %u ip_literal, %u parse_error); among the "
                  "refused, WHATWG fails on %u and curl on %u\n",
                  s.rows, s.ok, s.ip_literal, s.parse_error, s.whatwg_fail, s.curl_fail);
    assert_int_equal(s.failures, 0);
    assert_true(s.rows >= 300);
    assert_true(s.ok >= 20 && s.ip_literal >= 20 && s.parse_error >= 100);
}

/* ---- libcurl, live ---- */

typedef struct accepted {
    char *url[1024];
    size_t n;
} accepted;

static void collect_accepted(char **cols, size_t ncol, unsigned line, void *ctx)
{
    static char input[PH_URL_MAX_LEN + 64];
    accepted *a = ctx;
    if (ncol < 2 || strcmp(cols[1], "ok") != 0)
        return;
    size_t len = url_tsv_unescape(cols[0], input, sizeof input, "differential.tsv", line);
    assert_true(a->n < sizeof a->url / sizeof a->url[0]);
    assert_int_equal(strlen(input), len);
    a->url[a->n] = strdup(input);
    assert_non_null(a->url[a->n]);
    a->n++;
}

static void free_accepted(accepted *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->url[i]);
    a->n = 0;
}

/* Our accepted URL u: libcurl must extract exactly our host:port. Returns 1
 * on disagreement (and prints it), 0 on agreement or when we refuse. */
static unsigned disagrees_with_curl(const char *u, size_t len, const char *what)
{
    char hp[CELL_MAX], chp[CELL_MAX];
    if (strcmp(ours(u, len, hp, sizeof hp), "ok") != 0)
        return 0;
    curl_host_port(u, chp, sizeof chp);
    if (same_host_port(hp, chp))
        return 0;
    print_error("%s: \"%s\": we accept %s, libcurl extracts %s\n", what, u, hp, chp);
    return 1;
}

static void test_curl_agrees_on_every_accepted_row(void **state)
{
    (void)state;
    accepted a = {0};
    url_tsv_for_each_row("differential.tsv", collect_accepted, &a);
    unsigned bad = 0;
    for (size_t i = 0; i < a.n; i++)
        bad += disagrees_with_curl(a.url[i], strlen(a.url[i]), "accepted row");
    print_message("libcurl %s: %zu accepted rows, %u extracted differently\n",
                  curl_version_info(CURLVERSION_NOW)->version, a.n, bad);
    assert_true(a.n >= 20);
    free_accepted(&a);
    assert_int_equal(bad, 0);
}

/* What the mutants insert: every delimiter of the URL grammars, whitespace
 * and controls WHATWG strips, percent-encoded delimiters, and UTF-8 for the
 * characters IDNA maps to ASCII (ideographic and fullwidth full stops,
 * fullwidth letters and digits, soft hyphen, zero-width characters). */
static const char *const inserts[] = {
    "@",  ":",  "/",  "?",  "#",  "\\", "[",  "]",  "%",  ".",  "..", "-",  "_",  ";",
    ",",  "&",  "=",  "+",  "!",  "$",  "'",  "(",  "*",  "~",  "|",  "^",  "`",  "{",
    "\"", "<",  ">",  "0",  "1",  "x",  "X",  "0x", "%2e", "%2f", "%40", "%3a", "%23",
    "%3f", "%5c", "%00", "%20", "%25", "@evil.com", ":@", ":80", ":0", "::", "#@",
    "?@", "\\@", "/@", " ", "\t", "\r", "\n", "\r\n", "\x01", "\x7f",
    "\xe3\x80\x82",     /* U+3002 ideographic full stop */
    "\xef\xbc\x8e",     /* U+FF0E fullwidth full stop */
    "\xef\xbd\xa1",     /* U+FF61 halfwidth ideographic full stop */
    "\xef\xbc\xa5",     /* U+FF25 fullwidth E */
    "\xef\xbc\x91",     /* U+FF11 fullwidth 1 */
    "\xc2\xad",         /* U+00AD soft hyphen (IDNA maps it to nothing) */
    "\xe2\x80\x8b",     /* U+200B zero-width space */
    "\xe2\x80\x8d",     /* U+200D zero-width joiner */
    "\xef\xbb\xbf",     /* U+FEFF byte order mark */
    "\xe2\x84\xaa",     /* U+212A Kelvin sign (maps to k) */
    "\xc3\x9f",         /* U+00DF sharp s */
    "\xff",
};

static void test_mutants_of_accepted_rows_agree_with_curl(void **state)
{
    (void)state;
    accepted a = {0};
    url_tsv_for_each_row("differential.tsv", collect_accepted, &a);
    static char m[PH_URL_MAX_LEN + 64];
    unsigned tried = 0, accepted_mutants = 0, bad = 0;
    for (size_t i = 0; i < a.n; i++) {
        const char *u = a.url[i];
        size_t n = strlen(u);
        if (n > 200)
            continue; /* long rows test limits, not delimiters */
        for (size_t pos = 0; pos <= n; pos++) {
            for (size_t k = 0; k < sizeof inserts / sizeof *inserts; k++) {
                size_t il = strlen(inserts[k]);
                /* insert at pos */
                memcpy(m, u, pos);
                memcpy(m + pos, inserts[k], il);
                memcpy(m + pos + il, u + pos, n - pos + 1);
                tried++;
                char hp[CELL_MAX];
                if (strcmp(ours(m, n + il, hp, sizeof hp), "ok") == 0)
                    accepted_mutants++;
                bad += disagrees_with_curl(m, n + il, "insertion mutant");
                /* replace the byte at pos */
                if (pos == n)
                    continue;
                memcpy(m, u, pos);
                memcpy(m + pos, inserts[k], il);
                memcpy(m + pos + il, u + pos + 1, n - pos);
                tried++;
                if (strcmp(ours(m, n + il - 1, hp, sizeof hp), "ok") == 0)
                    accepted_mutants++;
                bad += disagrees_with_curl(m, n + il - 1, "replacement mutant");
            }
        }
    }
    print_message("%u mutants of %zu accepted rows: %u accepted by us, %u of those extracted "
                  "differently by libcurl\n",
                  tried, a.n, accepted_mutants, bad);
    free_accepted(&a);
    assert_int_equal(bad, 0);
    assert_true(tried > 10000);
}

/* ---- oracle mode for scripts/url-differential.mjs ---- */

static int run_oracle(void)
{
    static char line[2 * PH_URL_MAX_LEN + 16], url[PH_URL_MAX_LEN + 8];
    while (fgets(line, sizeof line, stdin) != NULL) {
        size_t n = strcspn(line, "\r\n"), len = 0;
        if (n % 2 != 0 || n / 2 >= sizeof url) {
            fprintf(stderr, "oracle: bad input line\n");
            return 2;
        }
        for (size_t i = 0; i < n; i += 2) {
            int hi = ph_hex_value(line[i]), lo = ph_hex_value(line[i + 1]);
            if (hi < 0 || lo < 0) {
                fprintf(stderr, "oracle: bad hex\n");
                return 2;
            }
            url[len++] = (char)(hi * 16 + lo);
        }
        url[len] = '\0';
        char hp[CELL_MAX], chp[CELL_MAX];
        const char *verdict = ours(url, len, hp, sizeof hp);
        curl_host_port(url, chp, sizeof chp); /* sees up to an embedded NUL, as C callers do */
        printf("%s\t%s\t%s\n", verdict, hp, chp);
    }
    return ferror(stdin) ? 2 : 0;
}

int main(int argc, char **argv)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 2;
    int rc;
    if (argc == 2 && strcmp(argv[1], "--oracle") == 0) {
        rc = run_oracle();
    } else {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_every_row_gets_its_verdict),
            cmocka_unit_test(test_curl_agrees_on_every_accepted_row),
            cmocka_unit_test(test_mutants_of_accepted_rows_agree_with_curl),
        };
        rc = cmocka_run_group_tests(tests, NULL, NULL);
    }
    curl_global_cleanup();
    return rc;
}
