/*
 * bench_replay - how fast `policyc replay` reads the proxy's connection log:
 * lines/s through the reader, the line parse (jansson) and the grouping, on
 * LINES lines (default 1,000,000, rounded up to a multiple of 65536: one
 * block of lines read again and again) of the proxy's own format over 1000
 * destinations, in memory (no disk in the figure), then the groups decided
 * on a 1000-rule table. Beside it, in the same run: the guard's decision
 * rate (ph_decide_connect, the list named, as replay calls it) and jansson's
 * parse alone (the floor of the line parse). The target is >= 1,000,000
 * lines/s on one core.
 *
 * Usage: bench_replay [LINES]
 * Prints figures; asserts nothing about time. Exit 0, or 2 on setup failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "compile.h"
#include "decide.h"
#include "load.h"
#include "replay.h"

#include "bench_util.h"

#define DESTS 1000

static volatile uint64_t sink;

static ph_table *build(void)
{
    size_t cap = 128 + DESTS * 80, at = 0;
    char *y = malloc(cap);
    if (y == NULL)
        return NULL;
    at += (size_t)snprintf(y + at, cap - at, "version: 1\nlists:\n  default:\n    rules:\n");
    for (size_t i = 0; i < DESTS; i++)
        at += (size_t)snprintf(y + at, cap - at,
                               "      - host: h%zu.example.net\n        ports: [443]\n", i);
    pc_policy *policy = NULL;
    pc_diagnostics diags;
    pc_diagnostics_init(&diags);
    ph_status st = pc_policy_load_buffer(y, at, "bench.yaml", &policy, &diags);
    free(y);
    pc_diagnostics_free(&diags);
    uint8_t *image = NULL;
    size_t tlen = 0;
    ph_table *t = NULL;
    if (st == PH_OK)
        st = pc_compile(policy, &image, &tlen, NULL);
    if (st == PH_OK)
        st = ph_table_open_buffer(image, tlen, &t, NULL);
    pc_policy_free(&policy);
    free(image);
    return st == PH_OK ? t : NULL;
}

/* `lines` lines as the proxy writes them: 3 in 4 allowed, the rest refused
 * (a host of the table on port 80). */
static char *make_log(size_t lines, size_t *len)
{
    size_t cap = lines * 560 + 1, at = 0;
    char *b = malloc(cap);
    if (b == NULL)
        return NULL;
    unsigned seed = 7;
    for (size_t i = 0; i < lines; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned d = (seed >> 8) % DESTS;
        bool ok = (seed >> 20) % 4 != 0;
        at += (size_t)snprintf(
            b + at, cap - at,
            "{\"time\":\"2026-12-02T03:%02zu:%02zu.%03zuZ\",\"event\":\"connection\","
            "\"conn_id\":%zu,\"peer\":\"127.0.0.1:%zu\",\"tenant\":\"t1\",\"lease\":\"lease1\","
            "\"list\":\"default\",\"host\":\"h%u.example.net\",\"port\":%u,"
            "\"dialed\":%s,\"checked\":%s,\"status\":%u,\"verdict\":\"%s\",\"reason\":\"%s\","
            "\"detail\":%s,\"rule\":%s,\"policy_id\":"
            "\"143c0ae60224c6b2a6d98e843a8c5225146228b71dc4c3a86704d30930054783\","
            "\"bytes_up\":%zu,\"bytes_down\":%zu,\"duration_s\":0.%03zu,\"end\":%s,\"sni\":%s}\n",
            (i / 60000) % 60, (i / 1000) % 60, i % 1000, i + 1, 30000 + i % 30000, d,
            ok ? 443u : 80u, ok ? "\"10.0.0.1:443\"" : "null", ok ? "[\"10.0.0.1\"]" : "null",
            ok ? 200u : 403u, ok ? "allowed" : "refused", ok ? "allowed" : "port_not_allowed",
            ok ? "null" : "\"list default allows it but not port 80\"",
            ok ? "\"bench.yaml:5\"" : "null", i % 5000, i % 90000, i % 1000,
            ok ? "\"closed\"" : "null", ok ? "\"h.example.net\"" : "null");
    }
    *len = at;
    return b;
}

/* The block of lines is read `reps` times over, as that many log files (a
 * 1M-line log would take half a GiB of memory on a shared machine). */
#define BLOCK 65536

int main(int argc, char **argv)
{
    size_t want = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 1000000;
    size_t reps = (want + BLOCK - 1) / BLOCK, lines = reps * BLOCK;
    if (want == 0) {
        fprintf(stderr, "usage: bench_replay [LINES > 0]\n");
        return 2;
    }
    ph_table *t = build();
    pc_decider dc;
    size_t len = 0;
    char *log = make_log(BLOCK, &len);
    if (t == NULL || log == NULL || pc_decider_open(&t, &dc, NULL) != PH_OK) {
        fprintf(stderr, "bench_replay: setup failed\n");
        return 2;
    }

    /* The reader + parse + grouping, best of 3. */
    double best = 0, decide_s = 0;
    uint64_t groups = 0, refused = 0;
    for (int round = 0; round < 3; round++) {
        pc_replay rp;
        pc_replay_init(&rp, 0, NULL);
        double t0 = bench_now_s();
        for (size_t r = 0; r < reps; r++) {
            pc_log_mem m = {log, len, 0, 0};
            if (pc_replay_read(&rp, "bench", pc_log_mem_read, &m, NULL) != PH_OK)
                break;
        }
        if (rp.kinds[PC_LOG_DECIDED] != lines) {
            fprintf(stderr, "bench_replay: %llu of %zu lines decided\n",
                    (unsigned long long)rp.kinds[PC_LOG_DECIDED], lines);
            return 2;
        }
        double rate = (double)lines / (bench_now_s() - t0);
        best = rate > best ? rate : best;
        t0 = bench_now_s();
        pc_replay_decide(&rp, &dc, NULL);
        decide_s = bench_now_s() - t0;
        groups = rp.ngroups;
        refused = rp.changes[PC_REPLAY_NEWLY_REFUSED];
        pc_replay_free(&rp);
    }

    /* jansson alone on the same lines: the parse's floor. */
    double t0 = bench_now_s();
    size_t n = 0;
    for (const char *p = log, *end = log + len; p < end; n++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        json_t *o = json_loadb(p, (size_t)(nl - p), JSON_REJECT_DUPLICATES, NULL);
        sink += o != NULL;
        json_decref(o);
        p = nl + 1;
    }
    double jansson = (double)n / (bench_now_s() - t0);

    /* The guard's decision on the same destinations, as replay asks it. */
    char dests[DESTS][64];
    for (unsigned i = 0; i < DESTS; i++)
        snprintf(dests[i], sizeof dests[i], "h%u.example.net:%u", i, i % 4 ? 443u : 80u);
    uint64_t decided = 0, batch = 1u << 16;
    t0 = bench_now_s();
    double el;
    do {
        for (uint64_t i = 0; i < batch; i++) {
            ph_decision d;
            pc_decide(&dc, "default", dests[i % DESTS], &d);
            sink += d.allowed;
        }
        decided += batch;
        el = bench_now_s() - t0;
    } while (el < 1.0);
    double decide_rate = (double)decided / el;

    printf("bench_replay: %zu lines (%.0f MiB, %llu destinations), one thread, best of 3\n", lines,
           (double)len * (double)reps / (1024 * 1024), (unsigned long long)groups);
    printf("  policyc replay read + parse + group:  %10.0f lines/s  %6.0f ns  (target >= "
           "1000000 /s: %s)\n",
           best, 1e9 / best, best >= 1e6 ? "met" : "NOT met");
    printf("  baseline json_loadb alone:            %10.0f lines/s  %6.0f ns\n", jansson,
           1e9 / jansson);
    printf("  guard ph_decide_connect (list named): %10.0f /s       %6.0f ns\n", decide_rate,
           1e9 / decide_rate);
    printf("  deciding the %llu groups:             %10.3f ms  (%llu newly refused: none expected)\n",
           (unsigned long long)groups, decide_s * 1e3, (unsigned long long)refused);
    pc_decider_close(&dc);
    free(log);
    return 0;
}
