/* test_revocation.c - the revocation list: the file refused whole on any bad
 * line; entries lapse at their until; the guard refuses a verified grant of
 * a revoked lease (lease_revoked, 407) and says an open connection of it
 * ends (PH_ENDING_LEASE_REVOKED); a corrupt list is refused whole on reload
 * with the old list in force; and reload storms: deciders never see a
 * verdict that no version explains. */
#include "test_support.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guard_fixture.h"
#include "pinhole/file_atomic.h"
#include "pinhole/grant.h"
#include "pinhole/guard.h"
#include "pinhole/revocation.h"

static const char POLICY[] = "version: 1\nlists:\n  default:\n    rules:\n"
                             "      - host: api.example.com\n        ports: [443]\n";
#define NOW INT64_C(1800000000)

static ph_revocations *parse_ok(const char *text)
{
    ph_revocations *r = NULL;
    ph_diag d = { 0 };
    ph_status st = ph_revocations_parse(text, strlen(text), &r, &d);
    if (st != PH_OK)
        fail_msg("refused: %s", d.message);
    return r;
}

static void parse_refuses_whole(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *needle; /* in the message */
    } bad[] = {
        {"t1 l1 1900000000\nt1\tl2 1900000000\n", "line 2 column 3"},
        {"t1 l1 1900000000\r\n", "line 1 column 17"},
        {"t1  l1 1900000000\n", "line 1: more than three fields"},
        {"t1 l1\n", "expected TENANT LEASE UNTIL"},
        {"t1 l1 1 2\n", "more than three fields"},
        {"t/1 l1 1900000000\n", "the tenant must be"},
        {"t1 l1! 1900000000\n", "the lease must be"},
        {"t1 l1 01900000000\n", "UNTIL must be"},
        {"t1 l1 -1\n", "UNTIL must be"},
        {"t1 l1 253402300800\n", "UNTIL must be"},
        {"t1 l1 1900000000 \n", "more than three fields"},
        {" t1 l1 1900000000\n", "line 1"},
        {"t1 l\xc3\xa9 1900000000\n", "non-ASCII byte 0xc3"},
        {"# ok\n\nt1 l1 19000\x00" "00000\n", "control or non-ASCII byte 0x00"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t len = strlen(bad[i].text);
        if (i == sizeof bad / sizeof *bad - 1)
            len = 24; /* the NUL and what follows it */
        ph_revocations *r = (ph_revocations *)1;
        ph_diag d = { 0 };
        ph_status st = ph_revocations_parse(bad[i].text, len, &r, &d);
        if (st != PH_E_FORMAT || r != NULL || strstr(d.message, bad[i].needle) == NULL)
            fail_msg("case %zu: status %d, message '%s'", i, (int)st, d.message);
    }
    /* A 65-byte lease: one over the grant's bound. */
    char line[200];
    snprintf(line, sizeof line, "t1 %065d 1900000000\n", 0);
    ph_revocations *r = NULL;
    assert_int_equal(ph_revocations_parse(line, strlen(line), &r, NULL), PH_E_FORMAT);
    /* One entry over the limit: refused whole. */
    size_t cap = (size_t)(PH_REVOCATIONS_MAX + 1) * 24, at = 0;
    char *big = malloc(cap);
    for (int i = 0; i <= PH_REVOCATIONS_MAX; i++)
        at += (size_t)snprintf(big + at, cap - at, "t l%d 1900000000\n", i);
    ph_diag d = { 0 };
    assert_int_equal(ph_revocations_parse(big, at, &r, &d), PH_E_LIMIT);
    assert_null(r);
    free(big);
}

static void entries_lapse_and_merge(void **state)
{
    (void)state;
    ph_revocations *r = parse_ok("# a comment\n\nt2 l1 1800000100\nt1 l1 1800000010\n"
                                 "t1 l1 1800000005\nt1 l2 1000\n");
    assert_int_equal(ph_revocations_count(r), 3); /* t1/l1 twice is one entry */
    assert_int_equal(ph_revocations_live(r, NOW), 2);      /* t1/l2 lapsed */
    assert_int_equal(ph_revocations_live(r, NOW + 10), 1); /* t1/l1 lapsed too */
    assert_int_equal(ph_revocations_live(r, 1800000100), 0);
    assert_int_equal(ph_revocations_live(NULL, NOW), 0);
    ph_revocations *empty = parse_ok("");
    assert_int_equal(ph_revocations_count(empty), 0);
    assert_false(ph_revocations_revoked(empty, "t1", "l1", NOW));
    ph_revocations_free(&empty);
    empty = parse_ok("# nothing revoked\n\n");
    assert_int_equal(ph_revocations_count(empty), 0);
    ph_revocations_free(&empty);
    assert_true(ph_revocations_revoked(r, "t1", "l1", NOW));
    assert_true(ph_revocations_revoked(r, "t1", "l1", NOW + 9));
    assert_false(ph_revocations_revoked(r, "t1", "l1", NOW + 10)); /* the later until won */
    assert_false(ph_revocations_revoked(r, "t1", "l2", NOW));      /* lapsed */
    assert_false(ph_revocations_revoked(r, "t1", "l3", NOW));
    assert_false(ph_revocations_revoked(r, "t2", "l2", NOW));
    assert_false(ph_revocations_revoked(NULL, "t1", "l1", NOW));
    assert_int_equal(ph_revocations_add(r, "t0", "z", 1900000000, NULL), PH_OK);
    assert_int_equal(ph_revocations_add(r, "t1", "l1", 1700000000, NULL), PH_OK); /* kept later */
    assert_int_equal(ph_revocations_add(r, "t 1", "l1", 1900000000, NULL), PH_E_INVAL);
    assert_int_equal(ph_revocations_add(r, "t1", "l1", -1, NULL), PH_E_INVAL);
    char *text;
    size_t len;
    assert_int_equal(ph_revocations_format(r, NOW, &text, &len, NULL), PH_OK);
    /* Sorted, the lapsed one dropped. */
    assert_string_equal(text, "t0 z 1900000000\nt1 l1 1800000010\nt2 l1 1800000100\n");
    ph_revocations *again = parse_ok(text);
    assert_int_equal(ph_revocations_count(again), 3);
    free(text);
    ph_revocations_free(&again);
    ph_revocations_free(&r);
    assert_null(r);
}

static void file_rules(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/rev.list", ph_test_dir);
    ph_revocations *r = NULL;
    ph_diag d = { 0 };
    assert_int_equal(ph_revocations_load_file(path, &r, &d), PH_E_NOT_FOUND);
    assert_int_equal(ph_test_write_file(path, "t1 l1 1900000000\n", 17), 0);
    assert_int_equal(chmod(path, 0664), 0);
    assert_int_equal(ph_revocations_load_file(path, &r, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "chmod 644"));
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(ph_revocations_load_file(path, &r, &d), PH_OK);
    assert_int_equal(ph_revocations_count(r), 1);
    ph_revocations_free(&r);
    assert_int_equal(ph_revocations_load_file(ph_test_dir, &r, &d), PH_E_INVAL);
}

/* ---- the guard ------------------------------------------------------------ */

typedef struct gfix {
    char table[4200], keys[4200], rev[4200];
    ph_keyring *kr;
    char auth_a[PH_GRANT_TOKEN_MAX + 16], auth_b[PH_GRANT_TOKEN_MAX + 16];
} gfix;

static gfix G;

static void write_file(const char *path, const char *text, mode_t mode)
{
    assert_int_equal(ph_file_write_atomic(path, text, strlen(text), mode, PH_WRITE_REPLACE, NULL),
                     PH_OK);
}

static void bearer(const char *lease, char *out, size_t cap)
{
    ph_grant g = { .not_before = NOW - 10, .expires = NOW + 3600 };
    snprintf(g.tenant, sizeof g.tenant, "t1");
    snprintf(g.lease, sizeof g.lease, "%s", lease);
    snprintf(g.list, sizeof g.list, "default");
    char tok[PH_GRANT_TOKEN_MAX + 1];
    assert_int_equal(ph_grant_issue(G.kr, NULL, &g, tok, sizeof tok, NULL, NULL), PH_OK);
    snprintf(out, cap, "Bearer %s", tok);
}

static int gsetup(void **state)
{
    ph_test_dir_setup(state);
    snprintf(G.table, sizeof G.table, "%s/policy.ptab", ph_test_dir);
    snprintf(G.keys, sizeof G.keys, "%s/grant.keys", ph_test_dir);
    snprintf(G.rev, sizeof G.rev, "%s/revocations", ph_test_dir);
    ph_fixture_write_table(G.table, POLICY, "allow.yaml");
    uint8_t key[32];
    memset(key, 0x5a, sizeof key);
    char line[256];
    assert_int_equal(ph_grant_format_key_line("k1", key, sizeof key, line, sizeof line, NULL),
                     PH_OK);
    write_file(G.keys, line, 0600);
    assert_int_equal(ph_keyring_load_file(G.keys, &G.kr, NULL), PH_OK);
    bearer("lease-a", G.auth_a, sizeof G.auth_a);
    bearer("lease-b", G.auth_b, sizeof G.auth_b);
    return 0;
}

static int gteardown(void **state)
{
    ph_keyring_free(&G.kr);
    return ph_test_dir_teardown(state);
}

static ph_reason decide(ph_guard *g, const char *auth, int64_t now)
{
    ph_connect_request req = {
        .authority = "api.example.com:443",
        .authority_len = strlen("api.example.com:443"),
        .proxy_authorization = auth,
        .proxy_authorization_len = strlen(auth),
        .now = now,
    };
    ph_decision d;
    ph_decide_connect(g, &req, &d);
    if (d.reason == PH_REASON_LEASE_REVOKED) {
        assert_int_equal(d.http_status, 407);
        assert_true(d.has_grant); /* the log names the lease */
        assert_string_equal(d.grant.lease, auth == G.auth_a ? "lease-a" : "lease-b");
        assert_non_null(strstr(d.log_detail, "revocation list"));
    }
    return d.reason;
}

static ph_guard *open_guard(void)
{
    ph_guard_options po = { .grant_keys_path = G.keys, .revocations_path = G.rev };
    ph_guard *g = NULL;
    ph_diag d = { 0 };
    if (ph_guard_open(G.table, &po, &g, &d) != PH_OK)
        fail_msg("guard open: %s", d.message);
    return g;
}

static void guard_refuses_a_revoked_lease(void **state)
{
    (void)state;
    write_file(G.rev, "t1 lease-a 1800000060\n", 0644);
    ph_guard *g = open_guard();
    assert_int_equal(decide(g, G.auth_a, NOW), PH_REASON_LEASE_REVOKED);
    assert_int_equal(decide(g, G.auth_b, NOW), PH_REASON_ALLOWED);
    assert_int_equal(decide(g, G.auth_a, NOW + 60), PH_REASON_ALLOWED); /* lapsed */
    assert_string_equal(ph_reason_code(PH_REASON_LEASE_REVOKED), "lease_revoked");
    assert_true(ph_guard_lease_revoked(g, "t1", "lease-a", NOW));
    assert_false(ph_guard_lease_revoked(g, "t1", "lease-b", NOW));
    /* An open connection of lease A ends; B's goes on. */
    ph_recheck_request rr = { .host = "api.example.com", .port = 443,
                              .proxy_authorization = G.auth_a,
                              .proxy_authorization_len = strlen(G.auth_a), .now = NOW };
    ph_decision d;
    ph_ending e;
    assert_int_equal(ph_decide_again(g, &rr, &d, &e), PH_E_DENIED);
    assert_int_equal(e, PH_ENDING_LEASE_REVOKED);
    assert_string_equal(ph_ending_code(e), "lease_revoked");
    rr.proxy_authorization = G.auth_b;
    rr.proxy_authorization_len = strlen(G.auth_b);
    assert_int_equal(ph_decide_again(g, &rr, &d, &e), PH_OK);
    assert_int_equal(e, PH_ENDING_NONE);
    ph_policy_info info;
    ph_guard_policy_info(g, &info);
    assert_int_equal(info.revocations, 1);
    assert_int_equal(ph_guard_revocations_live(g, NOW), 1);
    assert_int_equal(ph_guard_revocations_live(g, NOW + 60), 0);
    ph_guard_close(&g);

    /* A list needs keys; a missing list fails the open. */
    ph_guard_options po = { .revocations_path = G.rev };
    assert_int_equal(ph_guard_open(G.table, &po, &g, NULL), PH_E_INVAL);
    po.grant_keys_path = G.keys;
    char missing[4300];
    snprintf(missing, sizeof missing, "%s.missing", G.rev);
    po.revocations_path = missing;
    assert_int_equal(ph_guard_open(G.table, &po, &g, NULL), PH_E_NOT_FOUND);
    assert_null(g);
}

static void corrupt_list_keeps_the_old_one(void **state)
{
    (void)state;
    write_file(G.rev, "t1 lease-a 1900000000\n", 0644);
    ph_guard *g = open_guard();
    ph_policy_info before;
    ph_guard_policy_info(g, &before);
    /* Corrupt: the new list would lift A's revocation and add B's, but a
     * bad line refuses it whole. */
    write_file(G.rev, "t1 lease-b 1900000000\nt1 lease-a 19x\n", 0644);
    ph_reload_report r;
    ph_diag d = { 0 };
    assert_int_equal(ph_guard_reload_policy(g, &r, &d), PH_E_FORMAT);
    assert_string_equal(r.failed_file, "revocations");
    assert_non_null(strstr(d.message, "line 2"));
    assert_int_equal(r.info.generation, before.generation);
    assert_int_equal(decide(g, G.auth_a, NOW), PH_REASON_LEASE_REVOKED);
    assert_int_equal(decide(g, G.auth_b, NOW), PH_REASON_ALLOWED);
    assert_int_equal(ph_guard_last_reload_error(g, NULL), PH_E_FORMAT);
    /* Group-writable: refused too. */
    write_file(G.rev, "t1 lease-b 1900000000\n", 0666);
    assert_int_equal(ph_guard_reload_policy(g, &r, &d), PH_E_INVAL);
    assert_int_equal(decide(g, G.auth_a, NOW), PH_REASON_LEASE_REVOKED);
    /* Fixed: in force, one swap. */
    write_file(G.rev, "t1 lease-b 1900000000\n", 0644);
    assert_int_equal(ph_guard_reload_policy(g, &r, &d), PH_OK);
    assert_true(r.reloaded && r.revocations_changed && !r.table_changed && !r.keys_changed);
    assert_int_equal(r.info.generation, before.generation + 1);
    assert_int_equal(decide(g, G.auth_a, NOW), PH_REASON_ALLOWED);
    assert_int_equal(decide(g, G.auth_b, NOW), PH_REASON_LEASE_REVOKED);
    /* Nothing replaced: nothing reloads. */
    assert_int_equal(ph_guard_reload_policy(g, &r, &d), PH_OK);
    assert_false(r.reloaded);
    ph_guard_close(&g);
}

/* Reload storms: deciders run without pause while the list is replaced
 * (revoking A, lifting it, corrupt in between) and reloaded 300 times.
 * A is allowed or lease_revoked, B always allowed: nothing else, ever. */
typedef struct storm {
    ph_guard *g;
    atomic_bool stop;
    atomic_ulong decisions, revoked, odd;
} storm;

static void *decider(void *arg)
{
    storm *s = arg;
    while (!atomic_load(&s->stop)) {
        ph_connect_request req = {
            .authority = "api.example.com:443",
            .authority_len = strlen("api.example.com:443"),
            .proxy_authorization = G.auth_a,
            .proxy_authorization_len = strlen(G.auth_a),
            .now = NOW,
        };
        ph_decision d;
        ph_decide_connect(s->g, &req, &d);
        if (d.reason == PH_REASON_LEASE_REVOKED)
            atomic_fetch_add(&s->revoked, 1);
        else if (d.reason != PH_REASON_ALLOWED)
            atomic_fetch_add(&s->odd, 1);
        req.proxy_authorization = G.auth_b;
        req.proxy_authorization_len = strlen(G.auth_b);
        ph_decide_connect(s->g, &req, &d);
        if (d.reason != PH_REASON_ALLOWED)
            atomic_fetch_add(&s->odd, 1);
        atomic_fetch_add(&s->decisions, 2);
    }
    return NULL;
}

static void reload_storm(void **state)
{
    (void)state;
    write_file(G.rev, "", 0644);
    static storm s;
    s.g = open_guard();
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, decider, &s), 0);
    unsigned ok = 0, failed = 0;
    for (int i = 0; i < 300; i++) {
        const char *text = i % 3 == 0   ? "t1 lease-a 1900000000\n"
                           : i % 3 == 1 ? "t1 lease-a 1900000000\nbroken line here too\n"
                                        : "# lifted\n";
        /* A new inode each time, so every reload sees a change. */
        write_file(G.rev, text, 0644);
        ph_status st = ph_guard_reload_policy(s.g, NULL, NULL);
        ok += st == PH_OK;
        failed += st == PH_E_FORMAT;
    }
    write_file(G.rev, "t1 lease-a 1900000000\n", 0644);
    assert_int_equal(ph_guard_reload_policy(s.g, NULL, NULL), PH_OK);
    atomic_store(&s.stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    print_message("reload storm: %u reloads in force, %u refused whole; %lu decisions, %lu "
                  "lease_revoked, %lu unexplained\n",
                  ok, failed, atomic_load(&s.decisions), atomic_load(&s.revoked),
                  atomic_load(&s.odd));
    assert_int_equal(ok, 200);
    assert_int_equal(failed, 100);
    assert_int_equal(atomic_load(&s.odd), 0);
    assert_int_equal(decide(s.g, G.auth_a, NOW), PH_REASON_LEASE_REVOKED);
    ph_guard_close(&s.g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_refuses_whole),
        cmocka_unit_test(entries_lapse_and_merge),
        cmocka_unit_test(file_rules),
        cmocka_unit_test(guard_refuses_a_revoked_lease),
        cmocka_unit_test(corrupt_list_keeps_the_old_one),
        cmocka_unit_test(reload_storm),
    };
    return cmocka_run_group_tests(tests, gsetup, gteardown);
}
