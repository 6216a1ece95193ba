/* test_url_hostile.c - every row of tests/data/urls/hostile.tsv (hostile and
 * ordinary URLs and CONNECT authorities, built from public SSRF knowledge)
 * gets exactly its expected verdict: ok with host and port, parse_error or
 * ip_literal. The format is described in docs/url.md. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/url.h"
#include "url_tsv.h"

static unsigned failures;

typedef struct verdict {
    const char *expect; /* "ok", "parse_error", "ip_literal" */
    const char *host;
    unsigned port;
} verdict;

static void check_row(const char *type, const char *input, size_t len, const verdict *want,
                      unsigned line)
{
    ph_diag diag = {0};
    ph_status st;
    ph_reason reason;
    const char *host;
    unsigned port;
    ph_url u;
    ph_authority a;
    if (strcmp(type, "url") == 0) {
        st = ph_url_parse(input, len, &u, &diag);
        reason = u.reason, host = u.host, port = u.port;
    } else if (strcmp(type, "authority") == 0) {
        st = ph_authority_parse(input, len, &a, &diag);
        reason = a.reason, host = a.host, port = a.port;
    } else {
        fail_msg("hostile.tsv:%u: unknown type %s", line, type);
        return;
    }
    const char *got = ph_reason_code(reason);
    if (strcmp(want->expect, "ok") == 0 && strcmp(got, "allowed") == 0)
        got = "ok";
    if (strcmp(got, want->expect) != 0) {
        print_error("hostile.tsv:%u: %s: expected %s, got %s (%s)\n", line, input,
                    want->expect, got, st == PH_OK ? "accepted" : diag.message);
        failures++;
        return;
    }
    if (strcmp(want->expect, "ok") == 0) {
        assert_int_equal(st, PH_OK);
        if (strcmp(host, want->host) != 0 || port != want->port)
            fail_msg("hostile.tsv:%u: expected %s:%u, got %s:%u", line, want->host, want->port,
                     host, port);
        return;
    }
    /* Refusals: the status matches the reason, nothing dialable is left in
     * the result, and the diagnostic says something and points inside. */
    assert_int_equal(st, strcmp(want->expect, "ip_literal") == 0 ? PH_E_DENIED : PH_E_INVAL);
    assert_string_equal(host, "");
    assert_int_equal(port, 0);
    assert_true(diag.message[0] != '\0');
    if (diag.offset > len)
        fail_msg("hostile.tsv:%u: diagnostic offset %zu past the input (%zu)", line, diag.offset,
                 len);
}

typedef struct tally {
    unsigned ok, ip_literal, parse_error;
} tally;

static void check_tsv_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    static char input[16384];
    tally *t = ctx;
    if (ncol < 3)
        fail_msg("hostile.tsv:%u: fewer than 3 columns", line);
    verdict want = {.expect = cols[1], .host = ncol > 3 ? cols[3] : "",
                    .port = ncol > 4 ? (unsigned)strtoul(cols[4], NULL, 10) : 0};
    size_t len = url_tsv_unescape(cols[2], input, sizeof input, "hostile.tsv", line);
    check_row(cols[0], input, len, &want, line);
    if (strcmp(want.expect, "ok") == 0)
        t->ok++;
    else if (strcmp(want.expect, "ip_literal") == 0)
        t->ip_literal++;
    else
        t->parse_error++;
}

static void test_every_row_gets_its_verdict(void **state)
{
    (void)state;
    tally t = {0};
    unsigned rows = url_tsv_for_each_row("hostile.tsv", check_tsv_row, &t);
    print_message("hostile.tsv: %u rows (%u ok, %u ip_literal, %u parse_error)\n", rows, t.ok,
                  t.ip_literal, t.parse_error);
    assert_int_equal(failures, 0);
    assert_true(rows >= 150);
    assert_true(t.ok > 0 && t.ip_literal > 0 && t.parse_error > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_row_gets_its_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
