/* test_resolver_driver.c - the resolver driver's own completion and cancel
 * paths against a real DNS server (dnsmasq on a loopback port, label
 * "e2e"): asynchronous completion, cache hits (positive and negative),
 * synchronous c-ares completion (.onion, descriptor exhaustion), the
 * query deadline, cancellation before and after an answer is ready, a
 * callback cancelling and starting other queries, and the loop callbacks.
 * The rule under test: a callback runs only from ph_resolver_process, never
 * inside ph_resolver_start, c-ares or ph_resolver_cancel. */
#include "test_support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "dnsmasq_fixture.h"
#include "pinhole/resolve.h"

static ph_dnsmasq dns = {-1, ""};
static int blackhole_fd = -1;
static char blackhole_server[64];

static int setup(void **state)
{
    (void)state;
    ph_dnsmasq_start(&dns);
    blackhole_fd = ph_udp_blackhole(blackhole_server);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_dnsmasq_stop(&dns);
    if (blackhole_fd >= 0)
        close(blackhole_fd);
    return 0;
}

/* One callback's record. in_call is set around the calls that must never
 * call back (start, cancel); the callback fails the test if it sees it. */
typedef struct rec {
    int calls;
    ph_resolve_answer a;
    bool *in_call;
    /* optional action inside the callback */
    ph_resolver *r;
    ph_resolve_query **cancel_this;
    struct rec *start_rec;
} rec;

static bool in_api = false;

static void on_answer(void *arg, const ph_resolve_answer *a)
{
    rec *c = arg;
    if (in_api)
        fail_msg("callback ran inside ph_resolver_start or ph_resolver_cancel");
    c->calls++;
    c->a = *a;
    if (c->cancel_this != NULL && *c->cancel_this != NULL) {
        ph_resolver_cancel(*c->cancel_this);
        *c->cancel_this = NULL;
    }
    if (c->start_rec != NULL) {
        ph_resolve_query *q = NULL;
        in_api = true;
        assert_int_equal(ph_resolver_start(c->r, "allowed.test", 80, on_answer, c->start_rec, &q,
                                           NULL),
                         PH_OK);
        in_api = false;
        c->start_rec = NULL;
    }
}

static ph_resolve_query *start(ph_resolver *r, const char *name, rec *c)
{
    ph_resolve_query *q = NULL;
    in_api = true;
    assert_int_equal(ph_resolver_start(r, name, 443, on_answer, c, &q, NULL), PH_OK);
    in_api = false;
    assert_non_null(q);
    assert_int_equal(c->calls, 0);
    return q;
}

static void cancel(ph_resolve_query *q)
{
    in_api = true;
    ph_resolver_cancel(q);
    in_api = false;
}

/* Drives r with poll until *calls > 0 or max_ms. */
static void drive(ph_resolver *r, const int *calls, long max_ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (*calls == 0) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long spent = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        if (spent > max_ms)
            fail_msg("no answer within %ld ms", max_ms);
        long ms = ph_resolver_timeout_ms(r);
        ph_resolver_fd fds[16];
        size_t n = ph_resolver_fds(r, fds, 16);
        struct pollfd p[16];
        for (size_t i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = fds[i].fd,
                                   .events = (short)((fds[i].events & PH_RESOLVER_READ) ? POLLIN
                                                                                         : 0)};
        int rc = poll(p, (nfds_t)n, ms < 0 || ms > 50 ? 50 : (int)ms);
        if (rc <= 0) {
            ph_resolver_process(r, -1, 0);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            if (p[i].revents)
                ph_resolver_process(r, p[i].fd, PH_RESOLVER_READ);
    }
}

static ph_resolver *new_resolver(const char *server, unsigned timeout_ms, unsigned cache)
{
    ph_resolver_config cfg = {.servers = server,
                              .timeout_ms = timeout_ms,
                              .cache_entries = cache,
                              .cache_max_ttl_s = 300,
                              .negative_ttl_s = 5};
    ph_resolver *r = NULL;
    ph_diag d = {0};
    assert_int_equal(ph_resolver_new(&cfg, NULL, &r, &d), PH_OK);
    return r;
}

static void test_async_completion(void **state)
{
    (void)state;
    ph_resolver *r = new_resolver(dns.server, 2000, 0);
    rec c = {0};
    start(r, "allowed.test", &c);
    assert_true(ph_resolver_timeout_ms(r) >= 0);
    drive(r, &c.calls, 3000);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.a.st, PH_OK);
    assert_int_equal(c.a.reason, PH_REASON_ALLOWED);
    assert_false(c.a.from_cache);
    assert_int_equal(c.a.addrs.count, 1);
    const struct sockaddr_in *sin = (const void *)&c.a.addrs.addr[0];
    assert_int_equal(ntohs(sin->sin_port), 443);
    /* Mixed answers are refused whole, by the same driver. */
    rec m = {0};
    start(r, "rebind.test", &m);
    drive(r, &m.calls, 3000);
    assert_int_equal(m.a.reason, PH_REASON_DENIED_ADDRESS);
    assert_int_equal(m.a.addrs.count, 0);
    assert_non_null(strstr(m.a.detail, "192.168.1.1"));
    assert_int_equal(ph_resolver_timeout_ms(r), -1); /* nothing pending */
    ph_resolver_free(&r);
    assert_null(r);
}

static void test_cache_hit_is_delivered_later(void **state)
{
    (void)state;
    ph_resolver *r = new_resolver(dns.server, 2000, 64);
    rec first = {0}, miss = {0};
    start(r, "dual.test", &first);
    start(r, "missing.test", &miss);
    drive(r, &first.calls, 3000);
    drive(r, &miss.calls, 3000);
    assert_int_equal(miss.a.reason, PH_REASON_DNS_FAILURE);
    assert_false(miss.a.from_cache);

    rec hit = {0}, neg = {0};
    start(r, "dual.test", &hit);   /* answered at once, delivered later */
    start(r, "missing.test", &neg); /* NXDOMAIN is cached too */
    assert_int_equal(ph_resolver_timeout_ms(r), 0);
    ph_resolver_fd fds[4];
    assert_int_equal(ph_resolver_fds(r, fds, 4), 0); /* DNS not asked */
    ph_resolver_process(r, -1, 0);
    assert_int_equal(hit.calls, 1);
    assert_int_equal(neg.calls, 1);
    assert_true(hit.a.from_cache);
    assert_int_equal(hit.a.addrs.count, 2);
    assert_true(neg.a.from_cache);
    assert_int_equal(neg.a.reason, PH_REASON_DNS_FAILURE);
    ph_resolver_free(&r);
}

static void test_onion_completes_inside_cares_but_calls_back_later(void **state)
{
    (void)state;
    ph_resolver *r = new_resolver(blackhole_server, 2000, 16);
    rec c = {0};
    start(r, "abcdefghij.onion", &c); /* c-ares refuses it inside ares_getaddrinfo */
    assert_int_equal(ph_resolver_timeout_ms(r), 0);
    ph_resolver_process(r, -1, 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.a.reason, PH_REASON_DNS_FAILURE);
    /* Cancelled after it was answered, before delivery: never called. */
    rec d = {0};
    ph_resolve_query *q = start(r, "abcdefghij.onion", &d);
    cancel(q);
    ph_resolver_process(r, -1, 0);
    assert_int_equal(d.calls, 0);
    ph_resolver_free(&r);
}

static void test_descriptor_exhaustion_calls_back_later(void **state)
{
    (void)state;
    ph_resolver *r = new_resolver(dns.server, 2000, 0);
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    int fds[64], n = 0;
    /* Fill every descriptor up to a low limit: c-ares cannot open its
     * socket and fails the lookup inside ares_getaddrinfo. */
    int top = dup(0);
    assert_true(top >= 0);
    close(top);
    low = old;
    low.rlim_cur = (rlim_t)top + 32;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fd;
    while (n < 64 && (fd = dup(0)) >= 0)
        fds[n++] = fd;
    assert_int_equal(errno, EMFILE);
    rec c = {0};
    start(r, "allowed.test", &c);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(ph_resolver_timeout_ms(r), 0);
    ph_resolver_process(r, -1, 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(c.a.reason, PH_REASON_DNS_FAILURE);
    ph_resolver_free(&r);
}

static void test_deadline_then_cancel_and_free_in_flight(void **state)
{
    (void)state;
    ph_resolver *r = new_resolver(blackhole_server, 300, 16);
    rec c = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    start(r, "allowed.test", &c);
    drive(r, &c.calls, 3000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long took = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    assert_int_equal(c.a.reason, PH_REASON_DNS_TIMEOUT);
    assert_true(took >= 280 && took < 2000);
    /* A timeout is not cached: the next query goes to DNS again. */
    rec again = {0};
    ph_resolve_query *q = start(r, "allowed.test", &again);
    assert_true(ph_resolver_timeout_ms(r) >= 0);
    ph_resolver_process(r, -1, 0);
    assert_int_equal(again.calls, 0); /* not from a cache */
    cancel(q); /* the owner goes away while c-ares still works */
    for (int i = 0; i < 5; i++)
        ph_resolver_process(r, -1, 0);
    assert_int_equal(again.calls, 0);
    /* A query still live at free: freed, never called. */
    rec left = {0};
    start(r, "dual.test", &left);
    ph_resolver_free(&r);
    assert_int_equal(left.calls, 0);
}

static void test_callback_cancels_and_starts_others(void **state)
{
    (void)state;
    ph_resolver *r = new_resolver(dns.server, 2000, 16);
    rec warm = {0};
    start(r, "allowed.test", &warm);
    drive(r, &warm.calls, 3000);
    /* Two cache hits ready together: the first one's callback cancels the
     * second (which must then never run) and starts a third (answered at
     * once from the cache, delivered on the next pass, not this one). */
    rec second = {0}, third = {0};
    rec first = {.r = r, .start_rec = &third};
    ph_resolve_query *q2 = NULL;
    first.cancel_this = &q2;
    start(r, "allowed.test", &first);
    q2 = start(r, "allowed.test", &second);
    ph_resolver_process(r, -1, 0);
    assert_int_equal(first.calls, 1);
    assert_int_equal(second.calls, 0);
    assert_int_equal(third.calls, 0);
    assert_int_equal(ph_resolver_timeout_ms(r), 0);
    ph_resolver_process(r, -1, 0);
    assert_int_equal(third.calls, 1);
    assert_true(third.a.from_cache);
    ph_resolver_free(&r);
}

/* The callback interface: what an event loop is asked to watch and arm. */
typedef struct loop_rec {
    int watch_on, watch_off;
    long last_ms;
    int timer_calls;
} loop_rec;

static void lw(void *arg, int fd, unsigned events)
{
    loop_rec *l = arg;
    assert_true(fd >= 0);
    if (events)
        l->watch_on++;
    else
        l->watch_off++;
}

static void lt(void *arg, long ms)
{
    loop_rec *l = arg;
    l->timer_calls++;
    l->last_ms = ms;
}

static void test_loop_callbacks(void **state)
{
    (void)state;
    loop_rec l = {0};
    ph_resolver_loop loop = {lw, lt, &l};
    ph_resolver_config cfg = {.servers = dns.server, .timeout_ms = 2000, .cache_entries = 8,
                              .cache_max_ttl_s = 60};
    ph_resolver *r = NULL;
    assert_int_equal(ph_resolver_new(&cfg, &loop, &r, NULL), PH_OK);
    rec c = {0};
    start(r, "allowed.test", &c);
    assert_true(l.watch_on >= 1);    /* the UDP socket to watch */
    assert_true(l.timer_calls >= 1);
    assert_true(l.last_ms > 0);      /* a retransmission / deadline timer */
    drive(r, &c.calls, 3000);
    assert_int_equal(l.last_ms, -1); /* nothing left: timer disarmed */
    rec hit = {0};
    start(r, "allowed.test", &hit);
    assert_int_equal(l.last_ms, 0);  /* ready at once: "next iteration" */
    ph_resolver_process(r, -1, 0);
    assert_int_equal(hit.calls, 1);
    ph_resolver_free(&r);
    assert_true(l.watch_off >= 1);   /* the socket is closed at free */
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ph_resolver_config bad = {.servers = "dns.example:53"};
    ph_resolver *r = (ph_resolver *)&bad;
    ph_diag d = {0};
    assert_int_equal(ph_resolver_new(&bad, NULL, &r, &d), PH_E_INVAL);
    assert_null(r);
    assert_non_null(strstr(d.message, "dns.example"));
    r = new_resolver(dns.server, 500, 0);
    rec c = {0};
    ph_resolve_query *q = NULL;
    assert_int_equal(ph_resolver_start(r, "Not_Canonical..", 80, on_answer, &c, &q, NULL),
                     PH_E_INVAL);
    assert_null(q);
    assert_int_equal(ph_resolver_start(r, "::1", 80, on_answer, &c, &q, NULL), PH_E_INVAL);
    assert_int_equal(ph_resolver_timeout_ms(r), -1);
    ph_resolver_cancel(NULL);
    ph_resolver_free(&r);
    ph_resolver_free(&r); /* NULL: nothing */
}

int main(void)
{
    if (!ph_dnsmasq_installed())
        return 77;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_completion),
        cmocka_unit_test(test_cache_hit_is_delivered_later),
        cmocka_unit_test(test_onion_completes_inside_cares_but_calls_back_later),
        cmocka_unit_test(test_descriptor_exhaustion_calls_back_later),
        cmocka_unit_test(test_deadline_then_cancel_and_free_in_flight),
        cmocka_unit_test(test_callback_cancels_and_starts_others),
        cmocka_unit_test(test_loop_callbacks),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
