/* test_url_hostile.c - every row of tests/data/urls/hostile.tsv (hostile and
 * ordinary URLs and CONNECT authorities, built from public SSRF knowledge)
 * gets exactly its expected verdict: ok with host and port, parse_error or
 * ip_literal. The format is described in docs/url.md. */
#include "test_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/url.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes the input column's escapes (\\ \t \r \n \xHH) into out; returns
 * the decoded length. Fails the test on a malformed escape. */
static size_t unescape(const char *in, char *out, size_t cap, unsigned line)
{
    size_t n = 0;
    for (size_t i = 0; in[i] != '\0'; i++) {
        assert_true(n < cap);
        if (in[i] != '\\') {
            out[n++] = in[i];
            continue;
        }
        char e = in[++i];
        if (e == '\\') {
            out[n++] = '\\';
        } else if (e == 't') {
            out[n++] = '\t';
        } else if (e == 'r') {
            out[n++] = '\r';
        } else if (e == 'n') {
            out[n++] = '\n';
        } else if (e == 'x' && hex_value(in[i + 1]) >= 0 && hex_value(in[i + 2]) >= 0) {
            out[n++] = (char)(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2]));
            i += 2;
        } else {
            fail_msg("hostile.tsv:%u: bad escape", line);
        }
    }
    assert_true(n < cap);
    out[n] = '\0'; /* for messages only: the parser gets the length */
    return n;
}

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

static void test_every_row_gets_its_verdict(void **state)
{
    (void)state;
    size_t flen = 0;
    char *file = ph_test_read_file(ph_test_source_path("tests/data/urls/hostile.tsv"), &flen);
    assert_non_null(file);
    unsigned line = 0, rows = 0, by_kind[3] = {0};
    static char input[16384];
    for (char *l = file, *next; l != NULL && *l != '\0'; l = next) {
        next = strchr(l, '\n');
        if (next != NULL)
            *next++ = '\0';
        line++;
        if (l[0] == '#' || l[0] == '\0')
            continue;
        char *cols[6] = {0};
        size_t ncol = 0;
        for (char *p = l; ncol < 6; ncol++) {
            cols[ncol] = p;
            char *tab = strchr(p, '\t');
            if (tab == NULL) {
                ncol++;
                break;
            }
            *tab = '\0';
            p = tab + 1;
        }
        assert_true(ncol >= 3);
        verdict want = {.expect = cols[1], .host = cols[3] ? cols[3] : "",
                        .port = cols[4] ? (unsigned)strtoul(cols[4], NULL, 10) : 0};
        size_t len = unescape(cols[2], input, sizeof input, line);
        check_row(cols[0], input, len, &want, line);
        rows++;
        bool is_ok = strcmp(want.expect, "ok") == 0;
        by_kind[is_ok ? 0 : strcmp(want.expect, "ip_literal") == 0 ? 1 : 2]++;
    }
    free(file);
    print_message("hostile.tsv: %u rows (%u ok, %u ip_literal, %u parse_error)\n", rows,
                  by_kind[0], by_kind[1], by_kind[2]);
    assert_int_equal(failures, 0);
    assert_true(rows >= 150);
    assert_true(by_kind[0] > 0 && by_kind[1] > 0 && by_kind[2] > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_row_gets_its_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
