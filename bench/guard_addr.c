/*
 * bench_guard_addr - how fast the guard classifies addresses against the
 * denylist (target >= 20 million/s on one thread) and parses URLs with the
 * strict parser (the guard's URL check targets >= 2 million/s including a
 * table lookup, so parsing must be a small part of 500 ns).
 *
 * Each figure comes with a baseline measured in the same run, so the ratio
 * means something on any machine: classification against a naive linear
 * scan of the same table, URL parsing against a bare split that only finds
 * the host (no validation). Prints figures; asserts nothing about time.
 *
 * Exit status: 0 on success, 2 on a usage error.
 */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinhole/addr.h"
#include "pinhole/url.h"

#include "bench_util.h"

#define ADDRS 4096 /* power of two: index with a mask */

/* Keeps results alive so the compiler cannot drop the work. */
static volatile uint64_t sink;

typedef struct sample {
    int family;
    uint8_t bytes[16];
} sample;

/* A realistic mix: mostly public addresses (what DNS usually returns), some
 * private and special ones, both families. */
static void make_addresses(sample *s, unsigned seed)
{
    for (size_t i = 0; i < ADDRS; i++) {
        for (int k = 0; k < 16; k++)
            s[i].bytes[k] = (uint8_t)(rand_r(&seed) >> 5);
        switch (i % 8) {
        case 0: case 1: case 2: case 3: /* any IPv4 */
            s[i].family = AF_INET;
            break;
        case 4: /* private / special IPv4 */
            s[i].family = AF_INET;
            s[i].bytes[0] = (uint8_t[]){10, 127, 169, 172, 192, 100, 198, 0}[i / 8 % 8];
            break;
        case 5: case 6: /* global unicast IPv6 */
            s[i].family = AF_INET6;
            s[i].bytes[0] = (uint8_t)(0x20 | (s[i].bytes[0] & 0x07));
            break;
        default: /* any IPv6 (mostly outside 2000::/3: denied) */
            s[i].family = AF_INET6;
            break;
        }
    }
}

/* Baseline: the obvious implementation, a linear scan for the longest
 * containing prefix. */
static const ph_addr_block *naive(const sample *s)
{
    const ph_addr_block *best = NULL;
    size_t n = ph_addr_block_count();
    for (size_t i = 0; i < n; i++) {
        const ph_addr_block *b = ph_addr_block_at(i);
        if (b->family != s->family || (best && best->prefix_len >= b->prefix_len))
            continue;
        unsigned full = b->prefix_len / 8, rest = b->prefix_len % 8;
        if (memcmp(b->addr, s->bytes, full) != 0)
            continue;
        if (rest && ((b->addr[full] ^ s->bytes[full]) & (0xff00 >> rest)))
            continue;
        best = b;
    }
    return best;
}

static double bench_classify(const sample *s, uint64_t n)
{
    double t0 = bench_now_s();
    uint64_t denied = 0;
    ph_addr_verdict v;
    for (uint64_t i = 0; i < n; i++) {
        const sample *x = &s[i & (ADDRS - 1)];
        ph_status st = x->family == AF_INET ? ph_addr_classify_v4(x->bytes, &v)
                                            : ph_addr_classify_v6(x->bytes, &v);
        denied += st != PH_OK;
    }
    sink += denied;
    return (double)n / (bench_now_s() - t0);
}

static double bench_naive(const sample *s, uint64_t n)
{
    double t0 = bench_now_s();
    uint64_t denied = 0;
    for (uint64_t i = 0; i < n; i++)
        denied += naive(&s[i & (ADDRS - 1)]) != NULL;
    sink += denied;
    return (double)n / (bench_now_s() - t0);
}

static const char *const urls[] = {
    "https://api.github.com/repos/o/r/issues?state=open",
    "https://mcp.example.com:8443/sse",
    "http://files.pythonhosted.org/packages/aa/bb/pkg-1.0.tar.gz",
    "https://registry.npmjs.org/left-pad",
    "HTTPS://Objects.GitHubUserContent.com/x",
    "https://xn--bcher-kva.example/",
    "http://127.0.0.1/",              /* ip_literal */
    "http://good.com@evil.com/",      /* parse_error */
};
#define NURLS (sizeof urls / sizeof *urls)

static double bench_url(uint64_t n)
{
    size_t lens[NURLS];
    for (size_t i = 0; i < NURLS; i++)
        lens[i] = strlen(urls[i]);
    double t0 = bench_now_s();
    uint64_t ok = 0;
    ph_url u;
    for (uint64_t i = 0; i < n; i++)
        ok += ph_url_parse(urls[i % NURLS], lens[i % NURLS], &u, NULL) == PH_OK;
    sink += ok;
    return (double)n / (bench_now_s() - t0);
}

/* Baseline: find "://", then the host up to ':' or '/', and copy it. */
static double bench_bare_split(uint64_t n)
{
    size_t lens[NURLS];
    for (size_t i = 0; i < NURLS; i++)
        lens[i] = strlen(urls[i]);
    char host[PH_HOST_MAX + 1];
    double t0 = bench_now_s();
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = urls[i % NURLS], *end = s + lens[i % NURLS];
        const char *h = strstr(s, "://");
        if (h == NULL)
            continue;
        h += 3;
        size_t k = 0;
        while (h + k < end && h[k] != '/' && h[k] != ':' && k < PH_HOST_MAX) {
            host[k] = h[k];
            k++;
        }
        host[k] = '\0';
        total += k + (uint8_t)host[0];
    }
    sink += total;
    return (double)n / (bench_now_s() - t0);
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: bench_guard_addr [--iterations N] [--help]\n"
               "Measures denylist classification and strict URL parsing on one thread.\n"
               "  -n, --iterations N   classifications to time (default 50000000;\n"
               "                       URL parses use N/10)\n"
               "  -h, --help           show this help\n"
               "Exit status: 0 success, 2 usage error.\n");
}

int main(int argc, char **argv)
{
    uint64_t n = 50000000;
    static const struct option opts[] = {
        {"iterations", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *end = NULL;
            unsigned long long v = strtoull(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v == 0) {
                fprintf(stderr, "bench_guard_addr: bad --iterations '%s'\n", optarg);
                return 2;
            }
            n = v;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }

    static sample s[ADDRS];
    make_addresses(s, 42);
    bench_classify(s, ADDRS); /* build the index outside the timing */
    double fast = bench_classify(s, n);
    double slow = bench_naive(s, n / 10);
    printf("addr classify:  %.1f M/s  (%.1f ns each; %zu blocks; mixed v4/v6, public/special)\n",
           fast / 1e6, 1e9 / fast, ph_addr_block_count());
    printf("  baseline (linear scan of the same table): %.1f M/s  -> %.1fx\n", slow / 1e6,
           fast / slow);
    printf("  target >= 20 M/s: %s\n", fast >= 20e6 ? "met" : "NOT met");

    double up = bench_url(n / 10);
    double bare = bench_bare_split(n / 10);
    printf("url parse:      %.2f M/s  (%.0f ns each; %zu URLs of %s)\n", up / 1e6, 1e9 / up,
           (size_t)NURLS, "typical shapes incl. refusals");
    printf("  baseline (bare host split, no validation): %.2f M/s  -> parse costs %.1fx\n",
           bare / 1e6, bare / up);
    printf("test-loopback build: %s\n", ph_build_is_test_loopback() ? "yes" : "no");
    return 0;
}
