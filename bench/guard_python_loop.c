/* guard_python_loop.c - the C side of bench_guard_python: the loop a C
 * worker would run, called through ctypes on the guard the Python side
 * uses, so both figures share guard, table and URLs. */
#include <stddef.h>
#include <stdint.h>

#include "pinhole/guard.h"

#include "bench_util.h"

/* Checks urls[i % n] against list for about `seconds`; returns checks/s
 * and adds the number allowed to *allowed. Borrowed arguments. */
__attribute__((visibility("default"))) double ph_bench_check_rate(ph_guard *g, const char *list,
                                                                  const char *const *urls,
                                                                  const size_t *lens, size_t n,
                                                                  double seconds,
                                                                  uint64_t *allowed);

double ph_bench_check_rate(ph_guard *g, const char *list, const char *const *urls,
                           const size_t *lens, size_t n, double seconds, uint64_t *allowed)
{
    uint64_t done = 0, ok = 0, batch = 1024;
    double t0 = bench_now_s(), t;
    do {
        for (uint64_t i = 0; i < batch; i++) {
            size_t k = (size_t)((done + i) % n);
            ph_verdict v;
            ph_guard_check_url(g, list, urls[k], lens[k], &v, NULL);
            ok += v.allowed;
        }
        done += batch;
        t = bench_now_s() - t0;
    } while (t < seconds);
    *allowed += ok;
    return (double)done / t;
}
