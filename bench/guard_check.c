/*
 * bench_guard_check - how fast libpinhole decides a URL without DNS:
 * ph_decide_url (strict parse + table lookup + verdict with provenance, on
 * a pinned policy version, the list named by a trusted caller as a worker
 * names it) on one thread; the target is >= 5 million decisions/s.
 *
 * Baselines measured in the same run, so the ratios mean something on any
 * machine: the parse alone (ph_url_parse) and the lookup alone
 * (ph_table_lookup on pre-parsed hosts). Also printed: grant verification
 * (HMAC-SHA256 + parse), which the proxy does once per request.
 *
 * Usage: bench_guard_check [RULES] [SECONDS]   (default 10000 rules, 1 s per figure,
 *        spread over interleaved rounds; the best round is printed)
 * Prints figures; asserts nothing about time. Exit 0, or 2 on setup failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compile.h"
#include "load.h"
#include "pinhole/grant.h"
#include "pinhole/guard.h"

#include "bench_util.h"

#define URLS 4096 /* power of two */

static volatile uint64_t sink;

/* rules/4 wildcards "*.wN.example.com", the rest exact "hN.example.net". */
static char *generate(size_t rules, size_t *len)
{
    size_t cap = 128 + rules * 80, at = 0;
    char *y = malloc(cap);
    if (y == NULL)
        return NULL;
    at += (size_t)snprintf(y + at, cap - at, "version: 1\nlists:\n  default:\n    rules:\n");
    for (size_t i = 0; i < rules; i++) {
        if (i % 4 == 0)
            at += (size_t)snprintf(y + at, cap - at,
                                   "      - host: \"*.w%zu.example.com\"\n        ports: [443]\n",
                                   i);
        else
            at += (size_t)snprintf(y + at, cap - at,
                                   "      - host: h%zu.example.net\n        ports: [443, 8443]\n",
                                   i);
    }
    *len = at;
    return y;
}

static ph_table *build(size_t rules)
{
    size_t ylen = 0, tlen = 0;
    char *yaml = generate(rules, &ylen);
    pc_policy *policy = NULL;
    pc_diagnostics diags;
    pc_diagnostics_init(&diags);
    ph_status st = yaml != NULL ? pc_policy_load_buffer(yaml, ylen, "bench.yaml", &policy, &diags)
                                : PH_E_NOMEM;
    free(yaml);
    pc_diagnostics_free(&diags);
    uint8_t *image = NULL;
    ph_table *t = NULL;
    if (st == PH_OK)
        st = pc_compile(policy, &image, &tlen, NULL);
    if (st == PH_OK)
        st = ph_table_open_buffer(image, tlen, &t, NULL);
    pc_policy_free(&policy);
    free(image);
    return st == PH_OK ? t : NULL;
}

/* A mix: 50% exact hits, 25% wildcard hits, 15% misses, 10% wrong port. */
static void make_urls(char urls[URLS][96], size_t rules)
{
    unsigned seed = 42;
    for (size_t i = 0; i < URLS; i++) {
        size_t r = (size_t)rand_r(&seed) % rules;
        size_t exact = r % 4 == 0 ? r + 1 : r;
        switch (i % 20) {
        case 0: case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9:
            snprintf(urls[i], 96, "https://h%zu.example.net/v1/mcp?x=1", exact);
            break;
        case 10: case 11: case 12: case 13: case 14:
            snprintf(urls[i], 96, "https://api.w%zu.example.com/", r - r % 4);
            break;
        case 15: case 16: case 17:
            snprintf(urls[i], 96, "https://miss%zu.example.org/", r);
            break;
        default:
            snprintf(urls[i], 96, "http://h%zu.example.net:8080/", exact);
            break;
        }
    }
}

typedef struct bench_ctx {
    ph_guard *g;
    const ph_table *t;
    char (*urls)[96];
    size_t lens[URLS];
    ph_url parsed[URLS];
    ph_keyring *kr;
    char token[PH_GRANT_TOKEN_MAX + 1];
    size_t token_len;
} bench_ctx;

static uint64_t run_decide(bench_ctx *c, uint64_t n)
{
    uint64_t allowed = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t k = i & (URLS - 1);
        ph_url_request r = { .url = c->urls[k], .url_len = c->lens[k], .list = "default",
                             .now = 1800000100 };
        ph_decision d;
        ph_decide_url(c->g, &r, &d);
        allowed += d.allowed;
    }
    return allowed;
}

static uint64_t run_parse(bench_ctx *c, uint64_t n)
{
    uint64_t ok = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t k = i & (URLS - 1);
        ph_url u;
        ok += ph_url_parse(c->urls[k], c->lens[k], &u, NULL) == PH_OK;
    }
    return ok;
}

static uint64_t run_lookup(bench_ctx *c, uint64_t n)
{
    uint64_t allowed = 0;
    for (uint64_t i = 0; i < n; i++) {
        const ph_url *u = &c->parsed[i & (URLS - 1)];
        ph_table_result r;
        ph_table_lookup(c->t, "default", u->host, u->host_len, u->port, &r);
        allowed += r.allowed;
    }
    return allowed;
}

static uint64_t run_grant(bench_ctx *c, uint64_t n)
{
    uint64_t ok = 0;
    for (uint64_t i = 0; i < n; i++)
        ok += ph_grant_verify(c->kr, c->token, c->token_len, 1800000100, "default", NULL, NULL,
                              NULL) == PH_OK;
    return ok;
}

/* Operations/s of fn over about `seconds`: the best of ROUNDS rounds, the
 * figures interleaved round by round, so that a burst of load from other
 * processes on a shared machine hits every figure alike rather than one. */
#define ROUNDS 5
#define FIGURES 4
static double rate_once(uint64_t (*fn)(bench_ctx *, uint64_t), bench_ctx *c, double seconds)
{
    uint64_t batch = 1024, done = 0;
    double t0 = bench_now_s(), t;
    do {
        sink += fn(c, batch);
        done += batch;
        t = bench_now_s() - t0;
        if (t < seconds / 10)
            batch *= 2;
    } while (t < seconds);
    return (double)done / t;
}

static void rates(uint64_t (*const fns[FIGURES])(bench_ctx *, uint64_t), bench_ctx *c,
                  double seconds, double best[FIGURES])
{
    for (int f = 0; f < FIGURES; f++)
        best[f] = 0;
    for (int r = 0; r < ROUNDS; r++)
        for (int f = 0; f < FIGURES; f++) {
            double x = rate_once(fns[f], c, seconds / ROUNDS);
            if (x > best[f])
                best[f] = x;
        }
}

int main(int argc, char **argv)
{
    size_t rules = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 10000;
    double seconds = argc > 2 ? strtod(argv[2], NULL) : 1.0;
    if (rules < 8 || seconds <= 0) {
        fprintf(stderr, "usage: bench_guard_check [RULES >= 8] [SECONDS > 0]\n");
        return 2;
    }
    static char urls[URLS][96];
    static bench_ctx c;
    ph_table *t = build(rules);
    if (t == NULL || ph_guard_from_table(&t, NULL, &c.g, NULL) != PH_OK) {
        fprintf(stderr, "bench_guard_check: cannot build the table\n");
        return 2;
    }
    make_urls(urls, rules);
    c.urls = urls;
    for (size_t i = 0; i < URLS; i++) {
        c.lens[i] = strlen(urls[i]);
        ph_url_parse(urls[i], c.lens[i], &c.parsed[i], NULL);
    }
    ph_guard_snapshot *snap = ph_guard_snapshot_acquire(c.g);
    c.t = ph_guard_snapshot_table(snap);

    uint8_t key[32] = {1};
    ph_grant g = {.tenant = "tenant-7", .lease = "lease.42", .list = "default",
                  .not_before = 1800000000, .expires = 1800000600};
    if (ph_keyring_new(&c.kr, NULL) != PH_OK ||
        ph_keyring_add(c.kr, "k1", key, 32, NULL) != PH_OK ||
        ph_grant_issue(c.kr, NULL, &g, c.token, sizeof c.token, &c.token_len, NULL) != PH_OK) {
        fprintf(stderr, "bench_guard_check: cannot issue a grant\n");
        return 2;
    }

    uint64_t allowed = run_decide(&c, URLS);
    uint64_t (*const fns[FIGURES])(bench_ctx *, uint64_t) = {run_decide, run_parse, run_lookup,
                                                              run_grant};
    double best[FIGURES];
    rates(fns, &c, seconds, best);
    double decide = best[0], parse = best[1], lookup = best[2], grant = best[3];
    printf("bench_guard_check: %zu rules, %d URLs (%.0f%% allowed), one thread, best of %d "
           "interleaved rounds\n",
           rules, URLS, 100.0 * (double)allowed / URLS, ROUNDS);
    printf("  ph_decide_url (parse + lookup + verdict):      %10.0f /s  %6.0f ns  (target >= "
           "5000000 /s: %s)\n",
           decide, 1e9 / decide, decide >= 5e6 ? "met" : "NOT met");
    printf("  baseline ph_url_parse alone:                   %10.0f /s  %6.0f ns\n", parse,
           1e9 / parse);
    printf("  baseline ph_table_lookup alone:                %10.0f /s  %6.0f ns\n", lookup,
           1e9 / lookup);
    printf("  decide / (parse + lookup) time ratio:          %10.2f\n",
           (1 / decide) / (1 / parse + 1 / lookup));
    printf("  ph_grant_verify (HMAC-SHA256):                 %10.0f /s  %6.0f ns\n", grant,
           1e9 / grant);
    ph_guard_snapshot_release(&snap);
    ph_guard_close(&c.g);
    ph_keyring_free(&c.kr);
    return 0;
}
