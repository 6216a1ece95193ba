/* test_resolve_guard.c - the decision (ph_decide_url) and the step after it
 * (ph_decision_resolve) end to end: allowlist, then resolution against
 * dnsmasq, then the address check (label "e2e"). */
#include "test_support.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dnsmasq_fixture.h"
#include "guard_fixture.h"
#include "pinhole/guard.h"
#include "pinhole/resolve.h"

static const char POLICY[] = "version: 1\n"
                             "lists:\n"
                             "  default:\n"
                             "    rules:\n"
                             "      - host: allowed.test\n"
                             "        ports: [443]\n"
                             "      - host: rebind.test\n"
                             "        ports: [443]\n"
                             "      - host: missing.test\n"
                             "        ports: [443]\n";

static ph_dnsmasq dns = {-1, ""};

static int setup(void **state)
{
    (void)state;
    ph_dnsmasq_start(&dns);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_dnsmasq_stop(&dns);
    return 0;
}

static ph_guard *guard(const char *servers, unsigned timeout_ms)
{
    ph_table *t = ph_fixture_table(POLICY, "allow.yaml");
    ph_guard_options o = {.dns_servers = servers, .dns_timeout_ms = timeout_ms};
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_from_table(&t, &o, &g, NULL), PH_OK);
    return g;
}

/* Decides url (the list named) and resolves an allowed one; *v is the
 * decision's verdict at the end. */
static ph_reason check(ph_guard *g, const char *url, ph_verdict *v, ph_pinned_addrs *a)
{
    ph_url_request req = {.url = url, .url_len = strlen(url), .list = "default"};
    ph_decision d;
    a->count = 0;
    ph_status st = ph_decide_url(g, &req, &d);
    bool decided = st == PH_OK;
    if (decided)
        st = ph_decision_resolve(g, &d, a);
    *v = d.verdict;
    assert_int_equal(st, v->allowed ? PH_OK : PH_E_DENIED);
    assert_int_equal(d.allowed, v->allowed);
    assert_int_equal(d.reason, v->reason);
    assert_int_equal(d.http_status, ph_reason_http_status(d.reason));
    assert_int_equal(d.next, d.allowed ? PH_NEXT_RESOLVE : PH_NEXT_NONE);
    if (!v->allowed)
        assert_int_equal(a->count, 0);
    /* A refused resolution: the decision's log line and its verdict's
     * detail are the resolver's line; the client is told the code only. */
    if (decided && !d.allowed) {
        assert_string_equal(d.log_detail, v->detail);
        assert_string_equal(d.client_detail, "");
    }
    return v->reason;
}

static void test_allowed_name_is_pinned(void **state)
{
    (void)state;
    ph_guard *g = guard(dns.server, 2000);
    ph_verdict v;
    ph_pinned_addrs a;
    assert_int_equal(check(g, "https://allowed.test/mcp", &v, &a), PH_REASON_ALLOWED);
    assert_int_equal(a.count, 1);
    char text[64];
    assert_int_equal(ph_pinned_addr_string(&a, 0, text, sizeof text), PH_OK);
    assert_string_equal(text, "93.184.215.14");
    assert_string_equal(v.rule_host, "allowed.test");
    ph_guard_close(&g);
}

static void test_refusals_after_the_allowlist(void **state)
{
    (void)state;
    ph_guard *g = guard(dns.server, 2000);
    ph_verdict v;
    ph_pinned_addrs a;
    assert_int_equal(check(g, "https://rebind.test/", &v, &a), PH_REASON_DENIED_ADDRESS);
    assert_non_null(strstr(v.detail, "192.168.1.1"));
    assert_true(v.has_rule); /* the name was allowlisted; its answer was not */
    assert_int_equal(check(g, "https://missing.test/", &v, &a), PH_REASON_DNS_FAILURE);
    ph_guard_close(&g);
}

static void test_no_dns_for_what_the_allowlist_refuses(void **state)
{
    (void)state;
    char server[64];
    int hole = ph_udp_blackhole(server);
    ph_guard *g = guard(server, 400);
    ph_verdict v;
    ph_pinned_addrs a;
    assert_int_equal(check(g, "https://private.test/", &v, &a), PH_REASON_NOT_ALLOWLISTED);
    assert_int_equal(check(g, "https://allowed.test:8443/", &v, &a),
                     PH_REASON_PORT_NOT_ALLOWED);
    assert_int_equal(check(g, "https://10.0.0.1/", &v, &a), PH_REASON_IP_LITERAL);
    struct pollfd p = {.fd = hole, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 50), 0);
    /* An allowed name does query, and silence is dns_timeout. */
    assert_int_equal(check(g, "https://allowed.test/", &v, &a), PH_REASON_DNS_TIMEOUT);
    assert_int_equal(poll(&p, 1, 0), 1);
    close(hole);
    ph_guard_close(&g);
}

static void on_answer(void *arg, const ph_resolve_answer *a) { *(ph_resolve_answer *)arg = *a; }

/* ph_guard_resolver_new: an event loop's resolver with the guard's
 * settings and its DNS cache, which it keeps after the guard is closed. */
static void test_guard_resolver_shares_the_cache(void **state)
{
    (void)state;
    ph_resolver *r = (ph_resolver *)&dns;
    assert_int_equal(ph_guard_resolver_new(NULL, NULL, &r, NULL), PH_E_INVAL);
    assert_null(r);
    ph_guard *g = guard(dns.server, 2000);
    ph_verdict v;
    ph_pinned_addrs a;
    assert_int_equal(check(g, "https://allowed.test/", &v, &a), PH_REASON_ALLOWED);
    assert_int_equal(ph_guard_resolver_new(g, NULL, &r, NULL), PH_OK);
    ph_guard_close(&g);
    ph_resolve_answer got = {.st = PH_E_INTERNAL};
    ph_resolve_query *q = NULL;
    assert_int_equal(ph_resolver_start(r, "allowed.test", 443, on_answer, &got, &q, NULL), PH_OK);
    ph_resolver_process(r, -1, 0); /* a cache hit is delivered on the next turn */
    assert_int_equal(got.st, PH_OK);
    assert_true(got.from_cache);
    char text[64];
    assert_int_equal(ph_pinned_addr_string(&got.addrs, 0, text, sizeof text), PH_OK);
    assert_string_equal(text, "93.184.215.14");
    /* A name not in the cache asks the guard's DNS server. */
    got.st = PH_E_INTERNAL;
    assert_int_equal(ph_resolver_start(r, "rebind.test", 443, on_answer, &got, &q, NULL), PH_OK);
    for (int i = 0; i < 400 && got.st == PH_E_INTERNAL; i++) {
        ph_resolver_fd fds[8];
        size_t n = ph_resolver_fds(r, fds, 8);
        struct pollfd p[8];
        for (size_t k = 0; k < n; k++)
            p[k] = (struct pollfd){.fd = fds[k].fd, .events = POLLIN};
        int ready = poll(p, (nfds_t)n, 10);
        for (size_t k = 0; ready > 0 && k < n; k++)
            if (p[k].revents != 0)
                ph_resolver_process(r, p[k].fd, PH_RESOLVER_READ);
        ph_resolver_process(r, -1, 0);
    }
    assert_int_equal(got.st, PH_E_DENIED);
    assert_int_equal(got.reason, PH_REASON_DENIED_ADDRESS);
    assert_false(got.from_cache);
    ph_resolver_free(&r);
}

int main(void)
{
    if (!ph_dnsmasq_installed())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_name_is_pinned),
        cmocka_unit_test(test_refusals_after_the_allowlist),
        cmocka_unit_test(test_no_dns_for_what_the_allowlist_refuses),
        cmocka_unit_test(test_guard_resolver_shares_the_cache),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
