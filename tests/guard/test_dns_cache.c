/* test_dns_cache.c - the guard's DNS cache, shared by the worker calls
 * (ph_decision_resolve, ph_dial_url): a tiny DNS server of the
 * test's own on a kernel-assigned UDP port counts the queries it is asked,
 * so "answered from the cache" is "the server was not asked". */
#include "test_support.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "guard_fixture.h"
#include "pinhole/dial.h"
#include "pinhole/guard.h"

/* ---- the test's DNS server ------------------------------------------------ */

/* What the server answers for a name (A queries; AAAA: no data, or the
 * same rcode). */
typedef struct record {
    const char *name;
    int rcode;            /* 0 NOERROR, 3 NXDOMAIN */
    uint32_t ttl;
    const char *addrs[3]; /* IPv4, NULL-terminated */
} record;

static const record RECORDS[] = {
    {"long.dc.test", 0, 3600, {"93.184.215.14", NULL}},
    {"short.dc.test", 0, 3600, {"93.184.215.15", NULL}},
    {"nottl.dc.test", 0, 0, {"93.184.215.16", NULL}},
    {"mixed.dc.test", 0, 3600, {"93.184.215.14", "10.0.0.5", NULL}},
    {"nx.dc.test", 3, 0, {NULL}},
    {"off.dc.test", 0, 3600, {"93.184.215.17", NULL}},
    {"t1.dc.test", 0, 3600, {"93.184.215.21", NULL}},
    {"t2.dc.test", 0, 3600, {"93.184.215.22", NULL}},
    {"t3.dc.test", 0, 3600, {"93.184.215.23", "10.1.1.1", NULL}},
    {"reload.dc.test", 0, 3600, {"93.184.215.24", NULL}},
};
#define NRECORDS (sizeof RECORDS / sizeof *RECORDS)

static int server_fd = -1;
static char server[64];
static pthread_t server_thread;
static atomic_bool server_stop;
static atomic_uint asked[NRECORDS + 1]; /* A queries per record; last: unknown names */

/* The dotted name of the question at q (wire format), into out; the
 * question's end offset, or 0 when malformed. */
static size_t question_name(const uint8_t *p, size_t n, char *out, size_t cap)
{
    size_t i = 12, o = 0;
    while (i < n && p[i] != 0) {
        size_t l = p[i++];
        if (l > 63 || i + l > n || o + l + 2 > cap)
            return 0;
        if (o > 0)
            out[o++] = '.';
        memcpy(out + o, p + i, l);
        o += l;
        i += l;
    }
    out[o] = '\0';
    return i + 5 <= n ? i + 5 : 0; /* the root label, QTYPE, QCLASS */
}

static void answer_one(const uint8_t *q, size_t n, const struct sockaddr *from, socklen_t flen)
{
    char name[256];
    size_t qend = question_name(q, n, name, sizeof name);
    if (qend == 0)
        return;
    unsigned qtype = (unsigned)(q[qend - 4] << 8 | q[qend - 3]);
    size_t k = 0;
    while (k < NRECORDS && strcmp(RECORDS[k].name, name) != 0)
        k++;
    const record *rec = k < NRECORDS ? &RECORDS[k] : NULL;
    if (qtype == 1)
        atomic_fetch_add(&asked[k], 1);
    uint8_t r[512];
    memcpy(r, q, qend);
    int rcode = rec != NULL ? rec->rcode : 3;
    r[2] = (uint8_t)(0x84 | (q[2] & 0x01)); /* QR, opcode 0, AA, RD copied */
    r[3] = (uint8_t)(0x80 | rcode);         /* RA, rcode */
    r[4] = 0, r[5] = 1;                      /* one question */
    r[8] = r[9] = r[10] = r[11] = 0;         /* no authority, no additional */
    size_t o = qend, an = 0;
    if (rec != NULL && rcode == 0 && qtype == 1) {
        for (size_t i = 0; rec->addrs[i] != NULL; i++) {
            uint8_t rr[16] = {0xc0, 0x0c, 0, 1, 0, 1};
            rr[6] = (uint8_t)(rec->ttl >> 24), rr[7] = (uint8_t)(rec->ttl >> 16);
            rr[8] = (uint8_t)(rec->ttl >> 8), rr[9] = (uint8_t)rec->ttl;
            rr[10] = 0, rr[11] = 4;
            assert_int_equal(inet_pton(AF_INET, rec->addrs[i], rr + 12), 1);
            memcpy(r + o, rr, sizeof rr);
            o += sizeof rr;
            an++;
        }
    }
    r[6] = 0, r[7] = (uint8_t)an;
    (void)sendto(server_fd, r, o, 0, from, flen);
}

static void *serve(void *arg)
{
    (void)arg;
    while (!atomic_load(&server_stop)) {
        struct pollfd p = {.fd = server_fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        uint8_t q[512];
        struct sockaddr_storage from;
        socklen_t flen = sizeof from;
        ssize_t n = recvfrom(server_fd, q, sizeof q, 0, (struct sockaddr *)&from, &flen);
        if (n >= 12 && (q[2] & 0x80) == 0)
            answer_one(q, (size_t)n, (struct sockaddr *)&from, flen);
    }
    return NULL;
}

static unsigned queries(const char *name)
{
    for (size_t k = 0; k < NRECORDS; k++)
        if (strcmp(RECORDS[k].name, name) == 0)
            return atomic_load(&asked[k]);
    fail_msg("no record %s", name);
    return 0;
}

static int group_setup(void **state)
{
    (void)state;
    server_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (server_fd < 0)
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sin;
    if (bind(server_fd, (struct sockaddr *)&sin, sizeof sin) != 0 ||
        getsockname(server_fd, (struct sockaddr *)&sin, &len) != 0)
        return -1;
    snprintf(server, sizeof server, "127.0.0.1:%u", (unsigned)ntohs(sin.sin_port));
    return pthread_create(&server_thread, NULL, serve, NULL) == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    atomic_store(&server_stop, true);
    pthread_join(server_thread, NULL);
    close(server_fd);
    return 0;
}

/* ---- the guard ------------------------------------------------------------ */

static const char POLICY[] = "version: 1\n"
                             "lists:\n"
                             "  default:\n"
                             "    rules:\n"
                             "      - host: \"*.dc.test\"\n"
                             "        ports: [443]\n";

static ph_guard *guard(const ph_guard_options *extra)
{
    ph_guard_options o = {0};
    if (extra != NULL)
        o = *extra;
    o.dns_servers = server;
    o.dns_timeout_ms = 2000;
    ph_table *t = ph_fixture_table(POLICY, "allow.yaml");
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_from_table(&t, &o, &g, NULL), PH_OK);
    return g;
}

/* The worker's decision on url (the list named), then the step after an
 * allowed one: the decision's status, *d filled. */
static ph_status decide_and_resolve(ph_guard *g, const char *url, ph_decision *d,
                                    ph_pinned_addrs *a)
{
    ph_url_request req = {.url = url, .url_len = strlen(url), .list = "default"};
    a->count = 0;
    ph_status st = ph_decide_url(g, &req, d);
    return st == PH_OK ? ph_decision_resolve(g, d, a) : st;
}

static ph_reason check(ph_guard *g, const char *name, ph_pinned_addrs *a)
{
    char url[300];
    snprintf(url, sizeof url, "https://%s/", name);
    ph_decision d;
    ph_pinned_addrs tmp;
    if (a == NULL)
        a = &tmp;
    ph_status st = decide_and_resolve(g, url, &d, a);
    assert_int_equal(st, d.verdict.allowed ? PH_OK : PH_E_DENIED);
    if (!d.verdict.allowed)
        assert_int_equal(a->count, 0);
    return d.verdict.reason;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Zero-initialized options: the cache is on; a second check within the TTL
 * does not ask DNS, and gives the same checked addresses. */
static void second_check_within_ttl_is_cached(void **state)
{
    (void)state;
    ph_guard *g = guard(NULL);
    ph_pinned_addrs a1, a2;
    unsigned before = queries("long.dc.test");
    assert_int_equal(check(g, "long.dc.test", &a1), PH_REASON_ALLOWED);
    assert_int_equal(queries("long.dc.test"), before + 1);
    assert_int_equal(check(g, "long.dc.test", &a2), PH_REASON_ALLOWED);
    assert_int_equal(check(g, "long.dc.test", &a2), PH_REASON_ALLOWED);
    assert_int_equal(queries("long.dc.test"), before + 1);
    assert_int_equal(a2.count, 1);
    char text[64];
    assert_int_equal(ph_pinned_addr_string(&a2, 0, text, sizeof text), PH_OK);
    assert_string_equal(text, "93.184.215.14");
    assert_int_equal(ntohs(((struct sockaddr_in *)&a2.addr[0])->sin_port), 443);
    /* An answer with TTL 0 is never kept. */
    before = queries("nottl.dc.test");
    assert_int_equal(check(g, "nottl.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(check(g, "nottl.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(queries("nottl.dc.test"), before + 2);
    ph_guard_close(&g);
    assert_null(g);
}

/* name is answered from the cache once, then asked again after 1 s (the
 * TTL o sets to 1 s), with the same reason every time. */
static void kept_one_second(const ph_guard_options *o, const char *name, ph_reason want)
{
    ph_guard *g = guard(o);
    unsigned before = queries(name);
    assert_int_equal(check(g, name, NULL), want);
    assert_int_equal(check(g, name, NULL), want);
    assert_int_equal(queries(name), before + 1);
    sleep_ms(1150);
    assert_int_equal(check(g, name, NULL), want);
    assert_int_equal(queries(name), before + 2);
    ph_guard_close(&g);
}

/* NXDOMAIN is kept for the negative TTL, then asked again. */
static void nxdomain_cached_for_negative_ttl(void **state)
{
    (void)state;
    ph_guard_options o = {.dns_negative_ttl_s = 1};
    kept_one_second(&o, "nx.dc.test", PH_REASON_DNS_FAILURE);
}

/* An answer with TTL 3600 is asked again after the cap (1 s). */
static void ttl_is_capped(void **state)
{
    (void)state;
    ph_guard_options o = {.dns_cache_max_ttl_s = 1};
    kept_one_second(&o, "short.dc.test", PH_REASON_ALLOWED);
}

/* A mixed answer (public + private) is cached as refused: refused again,
 * with the same reason and detail, without asking; ph_dial_url shares the
 * cache and refuses it without asking either (no connection attempted). */
static void denied_answer_cached_as_refused(void **state)
{
    (void)state;
    ph_guard *g = guard(NULL);
    unsigned before = queries("mixed.dc.test");
    assert_int_equal(check(g, "mixed.dc.test", NULL), PH_REASON_DENIED_ADDRESS);
    assert_int_equal(queries("mixed.dc.test"), before + 1);
    const char url[] = "https://mixed.dc.test/";
    ph_decision d;
    ph_pinned_addrs a;
    assert_int_equal(decide_and_resolve(g, url, &d, &a), PH_E_DENIED);
    assert_int_equal(d.reason, PH_REASON_DENIED_ADDRESS);
    assert_non_null(strstr(d.verdict.detail, "10.0.0.5"));
    int fd = -2;
    ph_dial_result r;
    assert_int_equal(ph_dial_url(g, "default", url, strlen(url), NULL, &fd, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(fd, -1);
    assert_int_equal(r.verdict.reason, PH_REASON_DENIED_ADDRESS);
    assert_int_equal(r.checked.count, 0);
    assert_non_null(strstr(r.verdict.detail, "10.0.0.5"));
    assert_int_equal(queries("mixed.dc.test"), before + 1);
    ph_guard_close(&g);
}

/* dns_cache_off: every check asks DNS. */
static void cache_off_asks_every_time(void **state)
{
    (void)state;
    ph_guard_options o = {.dns_cache_off = true};
    ph_guard *g = guard(&o);
    unsigned before = queries("off.dc.test");
    for (int i = 0; i < 5; i++)
        assert_int_equal(check(g, "off.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(queries("off.dc.test"), before + 5);
    ph_guard_close(&g);
}

/* A reload that puts a new policy in force empties the cache. */
static void reload_empties_the_cache(void **state)
{
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s/t.phpol", ph_test_dir);
    ph_fixture_write_table(path, POLICY, "allow.yaml");
    ph_guard_options o = {.dns_servers = server, .dns_timeout_ms = 2000};
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_open(path, &o, &g, NULL), PH_OK);
    unsigned before = queries("reload.dc.test");
    assert_int_equal(check(g, "reload.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(check(g, "reload.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(queries("reload.dc.test"), before + 1);
    bool reloaded = true;
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_OK); /* unchanged: kept */
    assert_false(reloaded);
    assert_int_equal(check(g, "reload.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(queries("reload.dc.test"), before + 1);
    ph_fixture_write_table(path, "version: 1\nlists:\n  default:\n    rules:\n"
                                 "      - host: \"*.dc.test\"\n        ports: [443, 8443]\n",
                           "allow.yaml");
    assert_int_equal(ph_guard_reload(g, &reloaded, NULL), PH_OK);
    assert_true(reloaded);
    assert_int_equal(check(g, "reload.dc.test", NULL), PH_REASON_ALLOWED);
    assert_int_equal(queries("reload.dc.test"), before + 2);
    ph_guard_close(&g);
}

/* 8 threads on one guard whose cache is small enough to evict (4 slots):
 * every answer right, every time. */
#define THREADS 8
#define PER_THREAD 400
static ph_guard *shared_guard;
static unsigned thread_errors[THREADS];

static void *hammer(void *arg)
{
    unsigned *errors = arg;
    static const struct {
        const char *name;
        ph_reason want;
        const char *addr;
    } cases[] = {
        {"t1.dc.test", PH_REASON_ALLOWED, "93.184.215.21"},
        {"t2.dc.test", PH_REASON_ALLOWED, "93.184.215.22"},
        {"t3.dc.test", PH_REASON_DENIED_ADDRESS, NULL},
        {"nx.dc.test", PH_REASON_DNS_FAILURE, NULL},
        {"nottl.dc.test", PH_REASON_ALLOWED, "93.184.215.16"},
        {"long.dc.test", PH_REASON_ALLOWED, "93.184.215.14"},
    };
    for (unsigned i = 0; i < PER_THREAD; i++) {
        size_t c = (i * 7u + (unsigned)(errors - thread_errors)) % (sizeof cases / sizeof *cases);
        char url[64];
        snprintf(url, sizeof url, "https://%s/", cases[c].name);
        ph_decision d;
        ph_pinned_addrs a;
        ph_status st = decide_and_resolve(shared_guard, url, &d, &a);
        const ph_verdict *v = &d.verdict;
        char text[64] = "";
        if (st == PH_OK && ph_pinned_addr_string(&a, 0, text, sizeof text) != PH_OK)
            text[0] = '?';
        bool ok = v->reason == cases[c].want &&
                  (cases[c].addr == NULL ? st == PH_E_DENIED && a.count == 0
                                         : st == PH_OK && a.count == 1 &&
                                               strcmp(text, cases[c].addr) == 0);
        if (!ok)
            (*errors)++;
    }
    return NULL;
}

static void eight_threads_share_the_cache(void **state)
{
    (void)state;
    ph_guard_options o = {.dns_cache_entries = 4};
    shared_guard = guard(&o);
    unsigned before = queries("t1.dc.test");
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &thread_errors[i]), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(thread_errors[i], 0);
    /* The cache answered most of them (eviction in 4 slots may ask again). */
    unsigned t1 = queries("t1.dc.test") - before;
    printf("t1.dc.test: %u DNS queries for ~%u checks\n", t1, THREADS * PER_THREAD / 6);
    assert_true(t1 >= 1);
    assert_true(t1 < THREADS * PER_THREAD / 6);
    ph_guard_close(&shared_guard);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(second_check_within_ttl_is_cached),
        cmocka_unit_test(nxdomain_cached_for_negative_ttl),
        cmocka_unit_test(ttl_is_capped),
        cmocka_unit_test(denied_answer_cached_as_refused),
        cmocka_unit_test(cache_off_asks_every_time),
        cmocka_unit_test(reload_empties_the_cache),
        cmocka_unit_test(eight_threads_share_the_cache),
    };
    int a = ph_test_dir_setup(NULL);
    if (a != 0)
        return 1;
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    ph_test_dir_teardown(NULL);
    return rc;
}
