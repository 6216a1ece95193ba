/* e2e_dial.c - ph_dial_url end to end (label "e2e"): dnsmasq names local
 * servers on loopback, so this binary links the PINHOLE_TEST_LOOPBACK_UPSTREAM
 * build of libpinhole (127.0.0.0/8 and ::1 exempt from the denylist; every
 * other block still denied). Every refusal asserts its reason code. */
#include "test_support.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dnsmasq_fixture.h"
#include "pinhole/dial.h"

static ph_dnsmasq dns = {-1, ""};
static char *dir;
static char table[4200], hosts[4200];
static ph_guard *G;
/* The servers: v4 on 127.0.0.1:port; for the happy-eyeballs cases the same
 * port on ::1 refuses (bound, not listening); port_both listens on both;
 * port_hole has a full accept queue on 127.0.0.1 (a black hole);
 * port_v6hole has one on ::1 and a v4 listener; port_dead is bound on both
 * families and listens on neither (every attempt refused). */
static uint16_t port, port_both, port_hole, port_v6hole, port_dead;
static int l4 = -1, l6_refuse = -1, lb4 = -1, lb6 = -1, lh = -1, lv6h6 = -1, lv6h4 = -1,
           ld4 = -1, ld6 = -1;
static int fillers[32];
static size_t nfill;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A TCP socket bound to loopback of family af on *port (0: the kernel
 * picks, read back); listening with backlog when backlog >= 0. -1 when
 * the port is taken. */
static int bound(int af, uint16_t *p, int backlog)
{
    int fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (af == AF_INET6) {
        int on = 1;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        s6->sin6_port = htons(*p);
        len = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s4->sin_port = htons(*p);
        len = sizeof *s4;
    }
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || (backlog >= 0 && listen(fd, backlog) != 0)) {
        close(fd);
        return -1;
    }
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *p = ntohs(af == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                              : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* Two sockets on one kernel-chosen port: family a first, then b on the
 * same number (retried when b's side is taken). */
static void pair(int a, int backlog_a, int b, int backlog_b, uint16_t *p, int *fa, int *fb)
{
    for (int i = 0; i < 20; i++) {
        *p = 0;
        *fa = bound(a, p, backlog_a);
        assert_true(*fa >= 0);
        *fb = bound(b, p, backlog_b);
        if (*fb >= 0)
            return;
        close(*fa);
    }
    fail_msg("no port free on both 127.0.0.1 and ::1");
}

/* Fills the accept queue of a backlog-0 listener on addr: further SYNs are
 * dropped, so a connection attempt hangs like one to a black-holed address. */
static void fill(int af, uint16_t p)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (af == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        s6->sin6_port = htons(p);
        len = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        s4->sin_port = htons(p);
        len = sizeof *s4;
    }
    for (int i = 0; i < 8 && nfill < sizeof fillers / sizeof *fillers; i++) {
        int f = socket(af, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        connect(f, (struct sockaddr *)&ss, len);
        fillers[nfill++] = f;
    }
}

static void compile_table(const char *yaml)
{
    char src[4300], cmd[9000];
    snprintf(src, sizeof src, "%s/allow.yaml", dir);
    assert_int_equal(ph_test_write_file(src, yaml, strlen(yaml)), 0);
    snprintf(cmd, sizeof cmd, "'%s' compile '%s' -o '%s' >/dev/null", PH_POLICYC, src, table);
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int setup(void **state)
{
    (void)state;
    dir = ph_test_mkdtemp();
    port = 0;
    pair(AF_INET, 16, AF_INET6, -1, &port, &l4, &l6_refuse);
    pair(AF_INET6, 16, AF_INET, 16, &port_both, &lb6, &lb4);
    port_hole = 0;
    lh = bound(AF_INET, &port_hole, 0);
    assert_true(lh >= 0);
    pair(AF_INET6, 0, AF_INET, 16, &port_v6hole, &lv6h6, &lv6h4);
    pair(AF_INET, -1, AF_INET6, -1, &port_dead, &ld4, &ld6);
    struct timespec pause = {0, 50 * 1000 * 1000};
    fill(AF_INET, port_hole);
    fill(AF_INET6, port_v6hole);
    nanosleep(&pause, NULL);
    snprintf(hosts, sizeof hosts, "%s/hosts", dir);
    ph_dnsmasq_set_hosts(NULL, hosts, "127.0.0.1 flip.test\n127.0.0.1 he.test\n::1 he.test\n");
    snprintf(table, sizeof table, "%s/allow.ptab", dir);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "version: 1\nlists:\n  default:\n    rules:\n"
             "      - host: loop.test\n        ports: [%u, %u]\n"
             "      - host: he.test\n        ports: [%u, %u, %u, %u]\n"
             "      - host: flip.test\n        ports: [%u]\n"
             "      - host: metadata.test\n        ports: [%u]\n"
             "      - host: rebind.test\n        ports: [%u]\n"
             "      - host: nxdomain.test\n        ports: [%u]\n",
             port, port_hole, port, port_both, port_v6hole, port_dead, port, port, port, port);
    compile_table(yaml);
    ph_dnsmasq_start_hosts(&dns, hosts);
    ph_guard_options o = {.dns_servers = dns.server, .dns_timeout_ms = 2000};
    ph_diag d;
    if (ph_guard_open(table, &o, &G, &d) != PH_OK)
        fail_msg("guard: %s", d.message);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ph_guard_close(&G);
    ph_dnsmasq_stop(&dns);
    for (size_t i = 0; i < nfill; i++)
        close(fillers[i]);
    int fds[] = {l4, l6_refuse, lb4, lb6, lh, lv6h6, lv6h4, ld4, ld6};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    ph_test_rmtree(dir);
    free(dir);
    return 0;
}

static ph_status dial(const char *host, uint16_t p, const ph_dial_options *o, int *fd,
                      ph_dial_result *r)
{
    char url[512];
    snprintf(url, sizeof url, "http://%s:%u/path", host, (unsigned)p);
    return ph_dial_url(G, "default", url, strlen(url), o, fd, r, NULL);
}

/* The peer accepted on listener l: the connection is real. */
static void assert_accepted(int l)
{
    struct pollfd p = {.fd = l, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 2000), 1);
    int c = accept(l, NULL, NULL);
    assert_true(c >= 0);
    close(c);
}

static void allowed_url_gives_a_blocking_connected_socket(void **state)
{
    (void)state;
    ph_dial_result r;
    int fd = -2;
    assert_int_equal(dial("loop.test", port, NULL, &fd, &r), PH_OK);
    assert_true(fd >= 0);
    assert_true(r.verdict.allowed);
    assert_int_equal(r.verdict.reason, PH_REASON_ALLOWED);
    assert_string_equal(r.verdict.host, "loop.test");
    assert_int_equal(r.verdict.port, port);
    assert_true(r.verdict.has_rule);
    assert_string_equal(r.verdict.rule_file, "allow.yaml");
    assert_int_equal(r.verdict.rule_line, 5);
    assert_string_equal(r.addr_text, "127.0.0.1");
    assert_int_equal(r.addr.ss_family, AF_INET);
    assert_int_equal(r.checked.count, 1);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_accepted(l4);
    assert_int_equal(write(fd, "x", 1), 1);
    close(fd);
    /* The authority form decides the same. */
    char auth[64];
    snprintf(auth, sizeof auth, "loop.test:%u", (unsigned)port);
    assert_int_equal(ph_dial_authority(G, "default", auth, strlen(auth), NULL, &fd, &r, NULL),
                     PH_OK);
    assert_int_equal(r.verdict.scheme, PH_SCHEME_NONE);
    assert_accepted(l4);
    close(fd);
}

static void refusals_carry_their_reason(void **state)
{
    (void)state;
    static const struct {
        const char *prefix; /* then ":<port>/" */
        unsigned fixed_port; /* 0: the listener's */
        ph_reason want;
    } cases[] = {
        {"http://private.test", 0, PH_REASON_NOT_ALLOWLISTED},
        {"http://loop.test", 1, PH_REASON_PORT_NOT_ALLOWED},
        {"http://127.0.0.1", 0, PH_REASON_IP_LITERAL},
        {"http://[::1]", 0, PH_REASON_IP_LITERAL},
        {"http://2130706433", 0, PH_REASON_IP_LITERAL},
        {"http://metadata.test", 0, PH_REASON_DENIED_ADDRESS}, /* 169.254.169.254 */
        {"http://rebind.test", 0, PH_REASON_DENIED_ADDRESS},   /* mixed: public + 192.168 */
        {"http://nxdomain.test", 0, PH_REASON_DNS_FAILURE},
        {"ftp://loop.test", 0, PH_REASON_PARSE_ERROR},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char url[256];
        snprintf(url, sizeof url, "%s:%u/", cases[i].prefix,
                 cases[i].fixed_port != 0 ? cases[i].fixed_port : (unsigned)port);
        ph_dial_result r;
        ph_diag d;
        int fd = -2;
        ph_status st = ph_dial_url(G, "default", url, strlen(url), NULL, &fd, &r, &d);
        if (st != PH_E_DENIED || r.verdict.reason != cases[i].want)
            fail_msg("%s: %s %s (%s)", url, ph_strerror(st), ph_reason_code(r.verdict.reason),
                     r.verdict.detail);
        assert_int_equal(fd, -1);
        assert_false(r.verdict.allowed);
        assert_int_equal(r.checked.count, 0);
        assert_string_equal(r.addr_text, "");
        assert_string_not_equal(d.message, "");
    }
    /* The denied address is named. */
    ph_dial_result r;
    int fd;
    assert_int_equal(dial("metadata.test", port, NULL, &fd, &r), PH_E_DENIED);
    assert_non_null(strstr(r.verdict.detail, "169.254.169.254"));
    /* An unknown list, and missing arguments. */
    assert_int_equal(ph_dial_url(G, "nope", "http://loop.test/", 17, NULL, &fd, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_UNKNOWN_LIST);
    assert_int_equal(ph_dial_url(G, "default", "http://loop.test/", 17, NULL, NULL, &r, NULL),
                     PH_E_INVAL);
    assert_int_equal(ph_dial_url(NULL, "default", "http://loop.test/", 17, NULL, &fd, &r, NULL),
                     PH_E_INVAL);
    assert_int_equal(fd, -1);
}

static void dns_timeout_within_the_deadline(void **state)
{
    (void)state;
    char server[64];
    int hole = ph_udp_blackhole(server);
    ph_guard_options o = {.dns_servers = server};
    ph_guard *g = NULL;
    assert_int_equal(ph_guard_open(table, &o, &g, NULL), PH_OK);
    ph_dial_options dopt = {.timeout_ms = 400};
    ph_dial_result r;
    int fd = -2;
    char url[128];
    snprintf(url, sizeof url, "http://loop.test:%u/", (unsigned)port);
    int64_t t0 = now_ms();
    assert_int_equal(ph_dial_url(g, "default", url, strlen(url), &dopt, &fd, &r, NULL),
                     PH_E_DENIED);
    int64_t took = now_ms() - t0;
    assert_int_equal(r.verdict.reason, PH_REASON_DNS_TIMEOUT);
    assert_int_equal(fd, -1);
    printf("dns_timeout after %lld ms (deadline 400)\n", (long long)took);
    assert_true(took >= 350 && took < 1500);
    ph_guard_close(&g);
    close(hole);
}

static void upstream_timeout_and_unreachable(void **state)
{
    (void)state;
    ph_dial_options o = {.timeout_ms = 500};
    ph_dial_result r;
    int fd = -2;
    int64_t t0 = now_ms();
    assert_int_equal(dial("loop.test", port_hole, &o, &fd, &r), PH_E_DENIED);
    int64_t took = now_ms() - t0;
    assert_int_equal(r.verdict.reason, PH_REASON_UPSTREAM_TIMEOUT);
    assert_int_equal(fd, -1);
    assert_int_equal(r.checked.count, 1); /* checked, then not reachable in time */
    printf("upstream_timeout after %lld ms (deadline 500)\n", (long long)took);
    assert_true(took >= 450 && took < 1500);
    /* Nothing listens on either family of he.test: every attempt is
     * refused at once, none waits for the stagger. */
    ph_dial_options slow = {.stagger_ms = 2000};
    t0 = now_ms();
    assert_int_equal(dial("he.test", port_dead, &slow, &fd, &r), PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_UPSTREAM_UNREACHABLE);
    assert_int_equal(r.checked.count, 2);
    assert_int_equal(fd, -1);
    assert_true(now_ms() - t0 < 1000);
}

static void happy_eyeballs_v6_refused_v4_at_once(void **state)
{
    (void)state;
    ph_dial_options o = {.stagger_ms = 1000};
    ph_dial_result r;
    int fd = -2;
    int64_t t0 = now_ms();
    assert_int_equal(dial("he.test", port, &o, &fd, &r), PH_OK);
    int64_t took = now_ms() - t0;
    assert_int_equal(r.checked.count, 2);
    assert_int_equal(r.addr.ss_family, AF_INET);
    assert_string_equal(r.addr_text, "127.0.0.1");
    printf("v6 refused, v4 connected after %lld ms (stagger 1000)\n", (long long)took);
    assert_true(took < 500); /* the refusal started v4 without waiting */
    assert_accepted(l4);
    close(fd);
}

static void happy_eyeballs_v6_black_hole_v4_after_stagger(void **state)
{
    (void)state;
    ph_dial_options o = {.stagger_ms = 300};
    ph_dial_result r;
    int fd = -2;
    int64_t t0 = now_ms();
    assert_int_equal(dial("he.test", port_v6hole, &o, &fd, &r), PH_OK);
    int64_t took = now_ms() - t0;
    assert_int_equal(r.addr.ss_family, AF_INET);
    printf("v6 black-holed, v4 connected after %lld ms (stagger 300)\n", (long long)took);
    /* v4 waited for the stagger: v6 was tried first and was pending. */
    assert_true(took >= 280 && took < 1000);
    assert_accepted(lv6h4);
    close(fd);
}

static void happy_eyeballs_both_listening_v6_wins(void **state)
{
    (void)state;
    for (int i = 0; i < 5; i++) {
        ph_dial_result r;
        int fd = -2;
        assert_int_equal(dial("he.test", port_both, NULL, &fd, &r), PH_OK);
        assert_int_equal(r.addr.ss_family, AF_INET6);
        assert_string_equal(r.addr_text, "::1");
        assert_accepted(lb6);
        close(fd);
    }
    /* v4 was never tried: nothing waits on the v4 listener. */
    struct pollfd p = {.fd = lb4, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 100), 0);
}

/* A name whose answer changes to the metadata address. G has the default
 * DNS cache (dnsmasq answers with TTL 60): within the TTL it dials the
 * answer it checked before, never the new one; a guard with the cache off
 * asks again and refuses the new answer. */
static void rebinding_second_dial_refused(void **state)
{
    (void)state;
    ph_dial_result r;
    int fd = -2;
    assert_int_equal(dial("flip.test", port, NULL, &fd, &r), PH_OK);
    assert_accepted(l4);
    close(fd);
    ph_dnsmasq_set_hosts(&dns, hosts,
                         "169.254.169.254 flip.test\n127.0.0.1 he.test\n::1 he.test\n");
    assert_true(ph_dnsmasq_wait_refused(&dns, "flip.test", PH_REASON_DENIED_ADDRESS));
    /* Cached: the checked address, not the new answer. */
    assert_int_equal(dial("flip.test", port, NULL, &fd, &r), PH_OK);
    assert_string_equal(r.addr_text, "127.0.0.1");
    assert_accepted(l4);
    close(fd);
    ph_guard_options o = {.dns_servers = dns.server, .dns_timeout_ms = 2000, .dns_cache_off = true};
    ph_guard *nocache = NULL;
    assert_int_equal(ph_guard_open(table, &o, &nocache, NULL), PH_OK);
    char url[512];
    snprintf(url, sizeof url, "http://flip.test:%u/path", (unsigned)port);
    assert_int_equal(ph_dial_url(nocache, "default", url, strlen(url), NULL, &fd, &r, NULL),
                     PH_E_DENIED);
    assert_int_equal(r.verdict.reason, PH_REASON_DENIED_ADDRESS);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(r.verdict.detail, "169.254.169.254"));
    ph_guard_close(&nocache);
}

#define THREADS 8
#define PER_THREAD 40
static void *dialer(void *arg)
{
    unsigned *errors = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        ph_dial_result r;
        int fd = -2;
        if (i % 2 == 0) {
            if (dial("loop.test", port, NULL, &fd, &r) != PH_OK || fd < 0)
                (*errors)++;
            else
                close(fd);
        } else if (dial("metadata.test", port, NULL, &fd, &r) != PH_E_DENIED ||
                   r.verdict.reason != PH_REASON_DENIED_ADDRESS || fd != -1) {
            (*errors)++;
        }
    }
    return NULL;
}

/* Accepts and closes whatever the dialers connect. */
static atomic_bool accepting;
static void *acceptor(void *arg)
{
    (void)arg;
    while (atomic_load(&accepting)) {
        struct pollfd p = {.fd = l4, .events = POLLIN};
        if (poll(&p, 1, 20) == 1) {
            int c = accept(l4, NULL, NULL);
            if (c >= 0)
                close(c);
        }
    }
    return NULL;
}

static void dials_from_8_threads(void **state)
{
    (void)state;
    pthread_t t[THREADS], a;
    unsigned errors[THREADS] = {0};
    atomic_store(&accepting, true);
    assert_int_equal(pthread_create(&a, NULL, acceptor, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, dialer, &errors[i]), 0);
    unsigned total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        total += errors[i];
    }
    atomic_store(&accepting, false);
    pthread_join(a, NULL);
    printf("%d dials from %d threads, %u errors\n", THREADS * PER_THREAD, THREADS, total);
    assert_int_equal(total, 0);
}

int main(void)
{
    if (!ph_dnsmasq_installed())
        return 77;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 s6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (struct sockaddr *)&s6, sizeof s6) != 0) {
        printf("SKIP: no IPv6 loopback (::1) on this machine: %s\n", strerror(errno));
        return 77;
    }
    close(probe);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allowed_url_gives_a_blocking_connected_socket),
        cmocka_unit_test(refusals_carry_their_reason),
        cmocka_unit_test(dns_timeout_within_the_deadline),
        cmocka_unit_test(upstream_timeout_and_unreachable),
        cmocka_unit_test(happy_eyeballs_v6_refused_v4_at_once),
        cmocka_unit_test(happy_eyeballs_v6_black_hole_v4_after_stagger),
        cmocka_unit_test(happy_eyeballs_both_listening_v6_wins),
        cmocka_unit_test(rebinding_second_dial_refused),
        cmocka_unit_test(dials_from_8_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
