/* test_decide.c - one decision for both enforcement points (DESIGN
 * section 2), without processes: every hostile destination of the corpora
 * and every reason code, decided by
 *   proxy:   ph_decide_connect with a grant in Proxy-Authorization, on a
 *            guard opened as pinhole-proxy opens it (table + key file);
 *   worker:  ph_decide_connect naming the list (a worker, policyc
 *            explain/test), on a guard opened with the table only; for URL
 *            rows also ph_decide_url on the URL itself, with a grant on the
 *            proxy's guard and with the list named on the worker's;
 *   recheck: ph_decide_again on the host and port the proxy's decision
 *            parsed (what a reload asks of an open tunnel);
 * must give identical verdicts (allowed, reason, canonical host and port,
 * rule, policy id) and identical HTTP statuses (ph_reason_http_status).
 *
 * Inputs: tests/data/urls/hostile.tsv (column 2), differential.tsv
 * (column 0; URLs are also sent as the CONNECT a client would send) and
 * tests/proxy/data/parity-extra.tsv, under tests/proxy/data/parity-allowlist.yaml;
 * then the grant refusals. Every reason the decision can give must occur,
 * and every reason's status must be the one docs/pinhole-proxy.md lists.
 * Also: the policy object reloads table and keys as one version, a
 * decision made again says why the connection ends, and a connection's
 * grant memo (ph_decide_url_memo) decides as ph_decide_url does. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "guard_fixture.h"
#include "pinhole/grant.h"
#include "pinhole/guard.h"
#include "test_support.h"
#include "url_tsv.h"

#define INPUT_MAX 20000

typedef struct fixture {
    char table[4096], keys[4096];
    ph_guard *proxy, *worker;
    ph_keyring *kr;
    char auth[PH_GRANT_TOKEN_MAX + 16], absent_auth[PH_GRANT_TOKEN_MAX + 16],
        expired_auth[PH_GRANT_TOKEN_MAX + 16];
    int64_t now;
    const char *file;
    unsigned decided, mismatches;
    unsigned seen[PH_REASON_COUNT_];
} fixture;

static fixture F;

static void write_keys(const char *path, const char *kid, uint8_t fill)
{
    uint8_t key[32];
    memset(key, fill, sizeof key);
    char line[256];
    assert_int_equal(ph_grant_format_key_line(kid, key, sizeof key, line, sizeof line, NULL), PH_OK);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    assert_int_equal(ph_test_write_file(tmp, line, strlen(line)), 0);
    assert_int_equal(chmod(tmp, 0600), 0);
    assert_int_equal(rename(tmp, path), 0);
}

static void bearer(const char *list, int64_t nb, int64_t exp, char *out, size_t cap)
{
    ph_grant g = { .not_before = nb, .expires = exp };
    snprintf(g.tenant, sizeof g.tenant, "t1");
    snprintf(g.lease, sizeof g.lease, "l1");
    snprintf(g.list, sizeof g.list, "%s", list);
    char tok[PH_GRANT_TOKEN_MAX + 1];
    assert_int_equal(ph_grant_issue(F.kr, NULL, &g, tok, sizeof tok, NULL, NULL), PH_OK);
    snprintf(out, cap, "Bearer %s", tok);
}

static int setup(void **state)
{
    ph_test_dir_setup(state);
    snprintf(F.table, sizeof F.table, "%s/policy.ptab", ph_test_dir);
    snprintf(F.keys, sizeof F.keys, "%s/grant.keys", ph_test_dir);
    size_t len;
    char *yaml = ph_test_read_file(ph_test_source_path("tests/proxy/data/parity-allowlist.yaml"),
                                   &len);
    ph_fixture_write_table(F.table, yaml, "parity-allowlist.yaml");
    free(yaml);
    write_keys(F.keys, "k1", 0x5a);
    assert_int_equal(ph_keyring_load_file(F.keys, &F.kr, NULL), PH_OK);
    ph_guard_options po = { .grant_keys_path = F.keys };
    assert_int_equal(ph_guard_open(F.table, &po, &F.proxy, NULL), PH_OK);
    assert_int_equal(ph_guard_open(F.table, NULL, &F.worker, NULL), PH_OK);
    F.now = (int64_t)time(NULL);
    bearer("parity", F.now - 10, F.now + 3600, F.auth, sizeof F.auth);
    bearer("absent", F.now - 10, F.now + 3600, F.absent_auth, sizeof F.absent_auth);
    bearer("parity", F.now - 7200, F.now - 3600, F.expired_auth, sizeof F.expired_auth);
    return 0;
}

static int teardown(void **state)
{
    ph_guard_close(&F.proxy);
    ph_guard_close(&F.worker);
    ph_keyring_free(&F.kr);
    return ph_test_dir_teardown(state);
}

static ph_decision proxy_decides(const char *auth, const char *t, size_t len)
{
    ph_connect_request req = {
        .authority = t,
        .authority_len = len,
        .proxy_authorization = auth,
        .proxy_authorization_len = auth != NULL ? strlen(auth) : 0,
        .now = F.now,
    };
    ph_decision d;
    ph_status st = ph_decide_connect(F.proxy, &req, &d);
    assert_int_equal(st, d.allowed ? PH_OK : PH_E_DENIED);
    assert_int_equal(d.http_status, ph_reason_http_status(d.reason));
    assert_int_equal(d.next, d.allowed ? PH_NEXT_RESOLVE : PH_NEXT_NONE);
    F.seen[d.reason]++;
    return d;
}

static bool same_verdict(const ph_verdict *a, const ph_verdict *b)
{
    return a->allowed == b->allowed && a->reason == b->reason && strcmp(a->host, b->host) == 0 &&
           a->port == b->port && a->has_rule == b->has_rule && a->rule_index == b->rule_index &&
           a->rule_line == b->rule_line && strcmp(a->rule_file, b->rule_file) == 0 &&
           (a->policy_id[0] == '\0' || b->policy_id[0] == '\0' ||
            strcmp(a->policy_id, b->policy_id) == 0);
}

/* Decides the CONNECT authority t[0..len) with a grant, with the list
 * named, and again from what the first decision parsed. */
static ph_decision decide_everywhere(const char *list, const char *auth, const char *t,
                                     size_t len, unsigned line)
{
    ph_decision p = proxy_decides(auth, t, len);
    if (p.path_offset != 0 || p.path_len != 0)
        p.reason = PH_REASON_COUNT_; /* a CONNECT has no path: counted as a mismatch below */
    ph_connect_request req = { .authority = t, .authority_len = len, .list = list };
    ph_decision c;
    ph_decide_connect(F.worker, &req, &c);
    /* Decided again from what the decision parsed (an open tunnel's
     * recheck), when it got that far. */
    ph_decision a = p;
    if (p.has_authority) {
        ph_recheck_request rr = { .host = p.verdict.host, .port = p.verdict.port,
                                  .proxy_authorization = auth,
                                  .proxy_authorization_len = auth != NULL ? strlen(auth) : 0,
                                  .now = F.now };
        ph_ending e;
        ph_status st = ph_decide_again(F.proxy, &rr, &a, &e);
        if ((st == PH_OK) != a.allowed || (e == PH_ENDING_NONE) != a.allowed)
            a.reason = PH_REASON_COUNT_; /* counted as a mismatch below */
    }
    F.decided++;
    if (p.allowed != c.allowed || p.reason != c.reason || p.http_status != c.http_status ||
        c.http_status != ph_reason_http_status(c.reason) ||
        !same_verdict(&p.verdict, &c.verdict) || a.reason != p.reason ||
        !same_verdict(&p.verdict, &a.verdict)) {
        F.mismatches++;
        printf("MISMATCH %s:%u \"%.*s\": proxy %s %d (%s:%u), worker %s %d (%s:%u), "
               "again %s\n",
               F.file, line, len > 100 ? 100 : (int)len, t, ph_reason_code(p.reason),
               p.http_status, p.verdict.host, p.verdict.port, ph_reason_code(c.reason),
               c.http_status, c.verdict.host, c.verdict.port,
               a.reason < PH_REASON_COUNT_ ? ph_reason_code(a.reason) : "(inconsistent)");
    }
    return p;
}

static void corpus_input(const char *in, bool is_url, unsigned line)
{
    static char t[INPUT_MAX], a[INPUT_MAX];
    size_t len = url_tsv_unescape(in, t, sizeof t, F.file, line);
    ph_decision verbatim = decide_everywhere("parity", F.auth, t, len, line);
    if (!is_url)
        return;
    /* A URL: the URL decision (plain HTTP through the proxy with a grant,
     * a worker naming the list), and the CONNECT a client sends. */
    (void)verbatim;
    ph_url_request ur = { .url = t, .url_len = len, .proxy_authorization = F.auth,
                          .proxy_authorization_len = strlen(F.auth), .now = F.now };
    ph_decision du;
    ph_decide_url(F.proxy, &ur, &du);
    F.seen[du.reason]++;
    ur.proxy_authorization = NULL;
    ur.proxy_authorization_len = 0;
    ur.list = "parity";
    ph_decision dl;
    ph_decide_url(F.worker, &ur, &dl);
    const ph_verdict *u = &dl.verdict;
    /* The decision carries the URL's path span, as the URL parser finds it
     * (what forwarding sends as the origin-form target). */
    ph_url pu;
    bool parsed = ph_url_parse(t, len, &pu, NULL) == PH_OK;
    bool path_ok = parsed ? du.path_offset == pu.path_offset && du.path_len == pu.path_len &&
                                dl.path_offset == pu.path_offset && dl.path_len == pu.path_len
                          : du.path_len == 0 || du.path_offset + du.path_len <= len;
    if (du.reason != dl.reason || du.http_status != dl.http_status ||
        dl.http_status != ph_reason_http_status(dl.reason) || dl.reason != u->reason ||
        dl.allowed != u->allowed || !same_verdict(&du.verdict, u) ||
        du.verdict.scheme != u->scheme || !path_ok) {
        F.mismatches++;
        printf("MISMATCH %s:%u URL: with a grant %s, with the list named %s\n", F.file, line,
               ph_reason_code(du.reason), ph_reason_code(dl.reason));
    }
    size_t alen = url_tsv_connect_authority(t, len, a, sizeof a);
    if (alen == 0) {
        if (u->allowed) {
            F.mismatches++;
            printf("MISMATCH %s:%u: URL allowed, no authority to CONNECT to\n", F.file, line);
        }
        return;
    }
    ph_decision d = decide_everywhere("parity", F.auth, a, alen, line);
    if (u->allowed && (!d.allowed || strcmp(u->host, d.verdict.host) != 0 ||
                       u->port != d.verdict.port || u->rule_index != d.verdict.rule_index)) {
        F.mismatches++;
        printf("MISMATCH %s:%u: URL allowed (%s:%u), its CONNECT %s\n", F.file, line, u->host,
               u->port, ph_reason_code(d.reason));
    }
}

static void hostile_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    (void)ctx;
    assert_true(ncol >= 3);
    corpus_input(cols[2], strcmp(cols[0], "url") == 0, line);
}

static void differential_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    (void)ctx;
    assert_true(ncol >= 2);
    corpus_input(cols[0], true, line);
}

static void extra_row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    (void)ctx;
    assert_true(ncol >= 3);
    const char *auth = strcmp(cols[2], "absent") == 0 ? F.absent_auth : F.auth;
    ph_decision d = decide_everywhere(cols[2], auth, cols[0], strlen(cols[0]), line);
    ph_reason want;
    assert_int_equal(ph_reason_from_code(cols[1], &want), PH_OK);
    /* The later steps (resolution, the address check) are not the
     * decision's: a name that gets there is allowed by it. */
    if (want == PH_REASON_DNS_FAILURE || want == PH_REASON_DNS_TIMEOUT ||
        want == PH_REASON_DENIED_ADDRESS)
        want = PH_REASON_ALLOWED;
    if (d.reason != want) {
        F.mismatches++;
        printf("WRONG parity-extra.tsv:%u %s: expected %s, got %s\n", line, cols[0],
               ph_reason_code(want), ph_reason_code(d.reason));
    }
}

/* Reads the reason→status rows of docs/pinhole-proxy.md ("| 403 | `a`, `b` | ...") and
 * says whether status lists code. */
static bool docs_list(const char *docs, int status, const char *code)
{
    char row[16], quoted[64];
    snprintf(row, sizeof row, "\n| %d | ", status);
    snprintf(quoted, sizeof quoted, "`%s`", code);
    for (const char *p = strstr(docs, row); p != NULL; p = strstr(p + 1, row)) {
        const char *cell = p + strlen(row);
        const char *end = strstr(cell, " |");
        if (end == NULL)
            return false;
        const char *hit = strstr(cell, quoted);
        if (hit != NULL && hit < end)
            return true;
    }
    return false;
}

static void every_corpus_row_and_reason_decides_alike(void **state)
{
    (void)state;
    F.file = "hostile.tsv";
    unsigned rows = url_tsv_for_each_row("hostile.tsv", hostile_row, NULL);
    F.file = "differential.tsv";
    rows += url_tsv_for_each_row("differential.tsv", differential_row, NULL);
    assert_true(rows > 100);
    F.file = "parity-extra.tsv";
    size_t len;
    char *extra = ph_test_read_file(ph_test_source_path("tests/proxy/data/parity-extra.tsv"), &len);
    assert_non_null(extra);
    unsigned line = 0;
    for (char *save = NULL, *l = strtok_r(extra, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        line++;
        if (l[0] == '#' || l[0] == '\0')
            continue;
        char *cols[4] = { 0 };
        size_t n = 0;
        for (char *s2 = NULL, *c = strtok_r(l, "\t", &s2); c && n < 4; c = strtok_r(NULL, "\t", &s2))
            cols[n++] = c;
        extra_row(cols, n, line, NULL);
    }
    free(extra);

    /* The grant's refusals, and the authority's ahead of them. */
    struct {
        const char *auth, *target;
        ph_reason want;
    } grants[] = {
        { NULL, "example.com:443", PH_REASON_NO_GRANT },
        { "Bearer v1.k1.AAAA.AAAA", "example.com:443", PH_REASON_GRANT_INVALID },
        { "Basic !!!", "example.com:443", PH_REASON_GRANT_INVALID },
        { F.expired_auth, "example.com:443", PH_REASON_GRANT_EXPIRED },
        { NULL, "127.0.0.1:443", PH_REASON_IP_LITERAL },
        { NULL, "exa mple.com:443", PH_REASON_PARSE_ERROR },
    };
    for (size_t i = 0; i < sizeof grants / sizeof *grants; i++) {
        ph_decision d = proxy_decides(grants[i].auth, grants[i].target, strlen(grants[i].target));
        assert_int_equal(d.reason, grants[i].want);
        assert_false(d.has_grant);
        assert_int_equal(d.http_status, grants[i].want == PH_REASON_IP_LITERAL   ? 403
                                        : grants[i].want == PH_REASON_PARSE_ERROR ? 400
                                                                                  : 407);
        /* The client is never told why a grant failed. */
        if (grants[i].want >= PH_REASON_NO_GRANT && grants[i].want <= PH_REASON_GRANT_EXPIRED)
            assert_string_equal(d.client_detail, "");
    }
    printf("%u destinations decided with a grant, with the list named and again, "
           "%u mismatches\n",
           F.decided, F.mismatches);
    assert_int_equal(F.mismatches, 0);

    /* Every reason the decision gives occurred (wildcard_dns needs a table
     * with a rule naming a service, which policyc refuses to write:
     * tests/policyc/test_wildcard_dns_ports.c decides one through policyc's
     * path); every reason's status is the documented one. */
    static const ph_reason decision_reasons[] = {
        PH_REASON_ALLOWED,         PH_REASON_PARSE_ERROR,      PH_REASON_IP_LITERAL,
        PH_REASON_NO_GRANT,        PH_REASON_GRANT_INVALID,    PH_REASON_GRANT_EXPIRED,
        PH_REASON_NOT_ALLOWLISTED, PH_REASON_PORT_NOT_ALLOWED, PH_REASON_UNKNOWN_LIST,
    };
    for (size_t i = 0; i < sizeof decision_reasons / sizeof *decision_reasons; i++)
        if (F.seen[decision_reasons[i]] == 0)
            fail_msg("no input was decided %s", ph_reason_code(decision_reasons[i]));
    /* The HTTP framing reasons belong to the proxy's forwarding (its parser
     * refuses before anything is decided, proxy/src/http1.c), the overload
     * ones to its accept: no decision gives them. */
    for (unsigned r = PH_REASON_HTTP_CL_TE; r < PH_REASON_COUNT_; r++)
        if (r != PH_REASON_REDIRECT_BODY_CROSS_ORIGIN && F.seen[r] != 0)
            fail_msg("a decision gave the proxy-only reason %s", ph_reason_code((ph_reason)r));
    char *docs = ph_test_read_file(ph_test_source_path("docs/pinhole-proxy.md"), &len);
    assert_non_null(docs);
    for (unsigned r = 1; r < PH_REASON_COUNT_; r++) {
        /* The redirect reasons are a worker's (the proxy follows no
         * redirect): docs/worker.md lists them, tests/guard/test_redirect.c
         * checks that table. */
        if (r == PH_REASON_REDIRECT_DOWNGRADE || r == PH_REASON_REDIRECT_LIMIT ||
            r == PH_REASON_REDIRECT_BAD_LOCATION || r == PH_REASON_REDIRECT_BODY_CROSS_ORIGIN)
            continue;
        int st = ph_reason_http_status((ph_reason)r);
        if (!docs_list(docs, st, ph_reason_code((ph_reason)r)))
            fail_msg("docs/pinhole-proxy.md does not list %s as %d", ph_reason_code((ph_reason)r),
                     st);
    }
    free(docs);
    assert_int_equal(ph_reason_http_status(PH_REASON_ALLOWED), 200);
    assert_int_equal(ph_reason_http_status(PH_REASON_COUNT_), 500);
}

/* The policy object: table and keys reload as one version, whole or nothing. */
static void table_and_keys_reload_as_one_version(void **state)
{
    (void)state;
    ph_policy_info before;
    ph_guard_policy_info(F.proxy, &before);
    assert_int_equal(before.keys, 1);
    assert_int_equal(strlen(before.keyring_id), PH_KEYRING_ID_HEX_LEN);
    ph_reload_report r;
    /* Nothing changed: nothing reloads. */
    assert_int_equal(ph_guard_reload_policy(F.proxy, &r, NULL), PH_OK);
    assert_false(r.reloaded);
    assert_int_equal(r.info.generation, before.generation);
    /* A bad key file keeps the old pair: the old grant still verifies. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.new", F.keys);
    assert_int_equal(ph_test_write_file(tmp, "k2 zz\n", 6), 0);
    assert_int_equal(chmod(tmp, 0600), 0);
    assert_int_equal(rename(tmp, F.keys), 0);
    ph_diag diag;
    assert_int_not_equal(ph_guard_reload_policy(F.proxy, &r, &diag), PH_OK);
    assert_string_equal(r.failed_file, "grant keys");
    assert_false(r.reloaded);
    assert_int_equal(r.info.generation, before.generation);
    assert_string_equal(r.info.keyring_id, before.keyring_id);
    assert_true(proxy_decides(F.auth, "example.com:443", 15).allowed);
    /* A new key: one new version; grants of the old key now fail. */
    write_keys(F.keys, "k2", 0x33);
    assert_int_equal(ph_guard_reload_policy(F.proxy, &r, NULL), PH_OK);
    assert_true(r.reloaded);
    assert_true(r.keys_changed);
    assert_false(r.table_changed);
    assert_int_equal(r.info.generation, before.generation + 1);
    assert_string_not_equal(r.info.keyring_id, before.keyring_id);
    ph_decision d = proxy_decides(F.auth, "example.com:443", 15);
    assert_int_equal(d.reason, PH_REASON_GRANT_INVALID);
    assert_int_equal(d.generation, before.generation + 1);
    /* A guard without a key file refuses a request that names no list. */
    ph_connect_request req = { .authority = "example.com:443", .authority_len = 15 };
    assert_int_equal(ph_decide_connect(F.worker, &req, &d), PH_E_INVAL);
    assert_false(d.allowed);
}

/* Version A: the parity table with key 0x5a; version B: a table without
 * example.com with key 0x33. A grant of A's key may only be allowed (A) or
 * invalid (B), never not_allowlisted (B's table with A's keys); a grant of
 * B's key never allowed (A's table with B's keys). */
typedef struct torn {
    ph_guard *g;
    char auth_a[PH_GRANT_TOKEN_MAX + 16], auth_b[PH_GRANT_TOKEN_MAX + 16];
    atomic_bool stop;
    atomic_uint decisions, torn;
} torn;

static void *decide_loop(void *arg)
{
    torn *t = arg;
    while (!atomic_load(&t->stop)) {
        for (int k = 0; k < 2; k++) {
            const char *auth = k == 0 ? t->auth_a : t->auth_b;
            ph_connect_request req = {
                .authority = "example.com:443",
                .authority_len = 15,
                .proxy_authorization = auth,
                .proxy_authorization_len = strlen(auth),
                .now = F.now,
            };
            ph_decision d;
            ph_decide_connect(t->g, &req, &d);
            bool ok = k == 0 ? (d.reason == PH_REASON_ALLOWED || d.reason == PH_REASON_GRANT_INVALID)
                             : (d.reason == PH_REASON_NOT_ALLOWLISTED ||
                                d.reason == PH_REASON_GRANT_INVALID);
            if (!ok)
                atomic_fetch_add(&t->torn, 1);
            atomic_fetch_add(&t->decisions, 1);
        }
    }
    return NULL;
}

static void a_decision_never_sees_a_torn_pair(void **state)
{
    (void)state;
    static const char other[] = "version: 1\nlists:\n  parity:\n    rules:\n"
                                "      - host: other.example\n        ports: [443]\n";
    size_t len;
    char *yaml = ph_test_read_file(ph_test_source_path("tests/proxy/data/parity-allowlist.yaml"),
                                   &len);
    char table[4200], keys[4200];
    snprintf(table, sizeof table, "%s/torn.ptab", ph_test_dir);
    snprintf(keys, sizeof keys, "%s/torn.keys", ph_test_dir);
    ph_fixture_write_table(table, yaml, "parity-allowlist.yaml");
    write_keys(keys, "ka", 0x5a);
    static torn t;
    ph_guard_options po = { .grant_keys_path = keys };
    assert_int_equal(ph_guard_open(table, &po, &t.g, NULL), PH_OK);
    /* Tokens of both keys (F.kr holds 0x5a under k1; issue with kids ka/kb). */
    ph_keyring *ka = NULL, *kb = NULL;
    uint8_t key[32];
    memset(key, 0x5a, sizeof key);
    assert_int_equal(ph_keyring_new(&ka, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(ka, "ka", key, sizeof key, NULL), PH_OK);
    memset(key, 0x33, sizeof key);
    assert_int_equal(ph_keyring_new(&kb, NULL), PH_OK);
    assert_int_equal(ph_keyring_add(kb, "kb", key, sizeof key, NULL), PH_OK);
    ph_grant g = { .not_before = F.now - 10, .expires = F.now + 3600 };
    snprintf(g.tenant, sizeof g.tenant, "t1");
    snprintf(g.lease, sizeof g.lease, "l1");
    snprintf(g.list, sizeof g.list, "parity");
    char tok[PH_GRANT_TOKEN_MAX + 1];
    assert_int_equal(ph_grant_issue(ka, NULL, &g, tok, sizeof tok, NULL, NULL), PH_OK);
    snprintf(t.auth_a, sizeof t.auth_a, "Bearer %s", tok);
    assert_int_equal(ph_grant_issue(kb, NULL, &g, tok, sizeof tok, NULL, NULL), PH_OK);
    snprintf(t.auth_b, sizeof t.auth_b, "Bearer %s", tok);
    ph_keyring_free(&ka);
    ph_keyring_free(&kb);

    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, decide_loop, &t), 0);
    unsigned swaps = 0;
    for (int i = 0; i < 60; i++) {
        bool b = i % 2 == 0;
        if (b)
            ph_fixture_write_table(table, other, "other.yaml");
        else
            ph_fixture_write_table(table, yaml, "parity-allowlist.yaml");
        write_keys(keys, b ? "kb" : "ka", b ? 0x33 : 0x5a);
        ph_reload_report r;
        assert_int_equal(ph_guard_reload_policy(t.g, &r, NULL), PH_OK);
        swaps += r.reloaded;
    }
    atomic_store(&t.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    printf("%u reloads, %u decisions, %u torn\n", swaps, atomic_load(&t.decisions),
           atomic_load(&t.torn));
    assert_int_equal(swaps, 60);
    assert_int_equal(atomic_load(&t.torn), 0);
    ph_policy_info info;
    ph_guard_policy_info(t.g, &info);
    assert_int_equal(info.generation, 61);
    ph_guard_close(&t.g);
    free(yaml);
}

/* ph_decide_again: why an open connection ends, from the guard. */
static void a_decision_made_again_says_why_it_ends(void **state)
{
    (void)state;
    struct {
        const char *auth, *list, *host;
        uint16_t port;
        ph_status st;
        ph_reason reason;
        ph_ending ending;
    } rows[] = {
        { F.auth, NULL, "example.com", 443, PH_OK, PH_REASON_ALLOWED, PH_ENDING_NONE },
        { F.expired_auth, NULL, "example.com", 443, PH_E_DENIED, PH_REASON_GRANT_EXPIRED,
          PH_ENDING_GRANT_EXPIRED },
        { "Bearer v1.k9.AAAA.AAAA", NULL, "example.com", 443, PH_E_DENIED,
          PH_REASON_GRANT_INVALID, PH_ENDING_KEY_REVOKED },
        { NULL, NULL, "example.com", 443, PH_E_DENIED, PH_REASON_NO_GRANT,
          PH_ENDING_KEY_REVOKED },
        { F.auth, NULL, "example.com", 444, PH_E_DENIED, PH_REASON_PORT_NOT_ALLOWED,
          PH_ENDING_POLICY_REVOKED },
        { F.auth, NULL, "not-listed.example", 443, PH_E_DENIED, PH_REASON_NOT_ALLOWLISTED,
          PH_ENDING_POLICY_REVOKED },
        { F.absent_auth, NULL, "example.com", 443, PH_E_DENIED, PH_REASON_UNKNOWN_LIST,
          PH_ENDING_POLICY_REVOKED },
        /* Not a destination a decision made: refused, never parsed. */
        { F.auth, NULL, "Example.com", 443, PH_E_INVAL, PH_REASON_PARSE_ERROR,
          PH_ENDING_POLICY_REVOKED },
        { F.auth, NULL, "127.0.0.1", 443, PH_E_INVAL, PH_REASON_PARSE_ERROR,
          PH_ENDING_POLICY_REVOKED },
        { F.auth, NULL, "example.com:443", 443, PH_E_INVAL, PH_REASON_PARSE_ERROR,
          PH_ENDING_POLICY_REVOKED },
        { F.auth, NULL, "example.com", 0, PH_E_INVAL, PH_REASON_PARSE_ERROR,
          PH_ENDING_POLICY_REVOKED },
    };
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        ph_recheck_request r = { .host = rows[i].host, .port = rows[i].port,
                                 .proxy_authorization = rows[i].auth,
                                 .proxy_authorization_len = rows[i].auth ? strlen(rows[i].auth) : 0,
                                 .now = F.now };
        ph_decision d;
        ph_ending e = PH_ENDING_NONE;
        assert_int_equal(ph_decide_again(F.proxy, &r, &d, &e), rows[i].st);
        assert_int_equal(d.reason, rows[i].reason);
        assert_int_equal(d.http_status, ph_reason_http_status(rows[i].reason));
        assert_int_equal(e, rows[i].ending);
    }
    /* A trusted caller naming the list: a refusal is the policy's. */
    ph_recheck_request r = { .host = "not-listed.example", .port = 443, .list = "parity" };
    ph_decision d;
    ph_ending e;
    assert_int_equal(ph_decide_again(F.worker, &r, &d, &e), PH_E_DENIED);
    assert_int_equal(e, PH_ENDING_POLICY_REVOKED);
    r.host = "example.com";
    assert_int_equal(ph_decide_again(F.worker, &r, &d, &e), PH_OK);
    assert_int_equal(e, PH_ENDING_NONE);
    assert_string_equal(d.verdict.host, "example.com");
    assert_true(d.verdict.has_rule);
    /* Both a list and a grant, or neither: refused. */
    r.proxy_authorization = F.auth;
    r.proxy_authorization_len = strlen(F.auth);
    assert_int_equal(ph_decide_again(F.proxy, &r, &d, &e), PH_E_INVAL);
    assert_int_equal(ph_decide_again(F.proxy, NULL, &d, NULL), PH_E_INVAL);
    assert_string_equal(ph_ending_code(PH_ENDING_NONE), "none");
    assert_string_equal(ph_ending_code(PH_ENDING_KEY_REVOKED), "key_revoked");
    assert_string_equal(ph_ending_code(PH_ENDING_GRANT_EXPIRED), "grant_expired");
    assert_string_equal(ph_ending_code(PH_ENDING_POLICY_REVOKED), "policy_revoked");
}

/* ph_decide_url_memo: a connection's memo spares the grant's HMAC and
 * nothing else. Each step below changes one thing the decision depends on
 * and must see the decision ph_decide_url makes on it: other token bytes,
 * another host, the grant's expiry, a reload of the table, of the
 * revocation list, of the keys. */
static ph_decision memo_decides(ph_guard *g, ph_grant_memo *m, const char *url, const char *auth,
                                int64_t now)
{
    ph_url_request req = { .url = url, .url_len = strlen(url), .proxy_authorization = auth,
                           .proxy_authorization_len = strlen(auth), .now = now };
    ph_decision d, plain;
    ph_status st = ph_decide_url_memo(g, &req, m, &d);
    assert_int_equal(st, d.allowed ? PH_OK : PH_E_DENIED);
    assert_int_equal(ph_decide_url(g, &req, &plain), st);
    assert_int_equal(d.reason, plain.reason);
    assert_int_equal(d.generation, plain.generation);
    assert_int_equal(d.has_grant, plain.has_grant);
    if (d.has_grant)
        assert_memory_equal(&d.grant, &plain.grant, sizeof d.grant);
    return d;
}

static void a_grant_memo_spares_the_hmac_and_nothing_else(void **state)
{
    (void)state;
    static const char both[] = "version: 1\nlists:\n  parity:\n    rules:\n"
                               "      - host: memo.example\n        ports: [80]\n"
                               "      - host: other.example\n        ports: [80]\n";
    static const char other[] = "version: 1\nlists:\n  parity:\n    rules:\n"
                                "      - host: other.example\n        ports: [80]\n";
    char table[4200], keys[4200], rev[4200], line[200];
    snprintf(table, sizeof table, "%s/memo.ptab", ph_test_dir);
    snprintf(keys, sizeof keys, "%s/memo.keys", ph_test_dir);
    snprintf(rev, sizeof rev, "%s/memo.rev", ph_test_dir);
    ph_fixture_write_table(table, both, "memo.yaml");
    write_keys(keys, "k1", 0x5a); /* F.kr's key: F.auth verifies */
    assert_int_equal(ph_test_write_file(rev, "# none\n", 7), 0);
    assert_int_equal(chmod(rev, 0600), 0);
    ph_guard *g = NULL;
    ph_guard_options po = { .grant_keys_path = keys, .revocations_path = rev };
    assert_int_equal(ph_guard_open(table, &po, &g, NULL), PH_OK);
    ph_grant_memo m;
    memset(&m, 0, sizeof m);
    const char *url = "http://memo.example/a";
    int64_t now = F.now;

    ph_decision d = memo_decides(g, &m, url, F.auth, now);
    assert_true(d.allowed);
    assert_int_equal(m.generation, d.generation); /* remembered */
    assert_true(memo_decides(g, &m, "http://memo.example/b?q", F.auth, now).allowed);
    /* Other bytes (the signature's last character changed): verified. */
    char forged[sizeof F.auth];
    snprintf(forged, sizeof forged, "%s", F.auth);
    forged[strlen(forged) - 1] = forged[strlen(forged) - 1] == 'A' ? 'B' : 'A';
    assert_int_equal(memo_decides(g, &m, url, forged, now).reason, PH_REASON_GRANT_INVALID);
    /* Another host or port on the same connection: decided afresh. */
    assert_true(memo_decides(g, &m, "http://other.example/", F.auth, now).allowed);
    assert_int_equal(memo_decides(g, &m, "http://not-listed.example/", F.auth, now).reason,
                     PH_REASON_NOT_ALLOWLISTED);
    assert_int_equal(memo_decides(g, &m, "http://memo.example:81/", F.auth, now).reason,
                     PH_REASON_PORT_NOT_ALLOWED);
    /* The grant's expiry: past it the verifier decides (its skew first,
     * then grant_expired). */
    char brief[sizeof F.auth];
    bearer("parity", now - 10, now + 100, brief, sizeof brief);
    assert_true(memo_decides(g, &m, url, brief, now).allowed);
    assert_true(memo_decides(g, &m, url, brief, now + 100).allowed);
    assert_int_equal(memo_decides(g, &m, url, brief, now + 100 + PH_GRANT_CLOCK_SKEW_SECONDS).reason,
                     PH_REASON_GRANT_EXPIRED);
    /* A reload that removes the host. */
    assert_true(memo_decides(g, &m, url, F.auth, now).allowed);
    ph_fixture_write_table(table, other, "other.yaml");
    ph_reload_report r;
    assert_int_equal(ph_guard_reload_policy(g, &r, NULL), PH_OK);
    assert_true(r.reloaded);
    assert_int_equal(memo_decides(g, &m, url, F.auth, now).reason, PH_REASON_NOT_ALLOWLISTED);
    /* A reload of the revocation list that revokes the grant's lease. */
    assert_true(memo_decides(g, &m, "http://other.example/", F.auth, now).allowed);
    snprintf(line, sizeof line, "t1 l1 %lld\n", (long long)(now + 3600));
    assert_int_equal(ph_test_write_file(rev, line, strlen(line)), 0);
    assert_int_equal(chmod(rev, 0600), 0);
    assert_int_equal(ph_guard_reload_policy(g, &r, NULL), PH_OK);
    assert_true(r.revocations_changed);
    assert_int_equal(memo_decides(g, &m, "http://other.example/", F.auth, now).reason,
                     PH_REASON_LEASE_REVOKED);
    assert_int_equal(ph_test_write_file(rev, "# none\n", 7), 0);
    assert_int_equal(chmod(rev, 0600), 0);
    assert_int_equal(ph_guard_reload_policy(g, &r, NULL), PH_OK);
    assert_true(memo_decides(g, &m, "http://other.example/", F.auth, now).allowed);
    /* A reload of the keys that drops the grant's key. */
    write_keys(keys, "k2", 0x33);
    assert_int_equal(ph_guard_reload_policy(g, &r, NULL), PH_OK);
    assert_true(r.keys_changed);
    assert_int_equal(memo_decides(g, &m, "http://other.example/", F.auth, now).reason,
                     PH_REASON_GRANT_INVALID);
    ph_grant_memo_clear(&m);
    assert_int_equal(m.generation, 0);
    assert_int_equal(m.auth_len, 0);
    ph_guard_close(&g);
}

/* A memo names the keyring that verified it, not only a generation: two
 * guards are each at their generation 1, and a memo one of them filled
 * holds nothing for the other (whose keyring never verified the grant). */
static void a_grant_memo_holds_for_its_own_keyring_only(void **state)
{
    (void)state;
    static const char rules[] = "version: 1\nlists:\n  parity:\n    rules:\n"
                                "      - host: memo.example\n        ports: [80]\n";
    char table[4200], keys1[4200], keys2[4200];
    snprintf(table, sizeof table, "%s/memo2.ptab", ph_test_dir);
    snprintf(keys1, sizeof keys1, "%s/memo2a.keys", ph_test_dir);
    snprintf(keys2, sizeof keys2, "%s/memo2b.keys", ph_test_dir);
    ph_fixture_write_table(table, rules, "memo2.yaml");
    write_keys(keys1, "k1", 0x5a); /* F.kr's key: F.auth verifies */
    write_keys(keys2, "k1", 0x33); /* the same key id, another key */
    ph_guard *g1 = NULL, *g2 = NULL;
    ph_guard_options o1 = { .grant_keys_path = keys1 }, o2 = { .grant_keys_path = keys2 };
    assert_int_equal(ph_guard_open(table, &o1, &g1, NULL), PH_OK);
    assert_int_equal(ph_guard_open(table, &o2, &g2, NULL), PH_OK);
    ph_grant_memo m;
    memset(&m, 0, sizeof m);
    const char *url = "http://memo.example/";
    ph_decision d = memo_decides(g1, &m, url, F.auth, F.now);
    assert_true(d.allowed);
    assert_int_equal(m.generation, 1);
    d = memo_decides(g2, &m, url, F.auth, F.now);
    assert_int_equal(d.generation, 1);
    assert_int_equal(d.reason, PH_REASON_GRANT_INVALID);
    ph_grant_memo_clear(&m);
    ph_guard_close(&g1);
    ph_guard_close(&g2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_corpus_row_and_reason_decides_alike),
        /* before the reload test replaces the fixture's key */
        cmocka_unit_test(a_decision_made_again_says_why_it_ends),
        cmocka_unit_test(a_grant_memo_spares_the_hmac_and_nothing_else),
        cmocka_unit_test(a_grant_memo_holds_for_its_own_keyring_only),
        cmocka_unit_test(table_and_keys_reload_as_one_version),
        cmocka_unit_test(a_decision_never_sees_a_torn_pair),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
