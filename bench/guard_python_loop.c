/* guard_python_loop.c - the C side of bench_guard_python: the loop a C
 * worker would run, called through ctypes on the guard the Python side
 * uses, so both figures share guard, table and URLs. */
#include <stddef.h>
#include <stdint.h>

#include "pinhole/guard.h"

#include "bench_util.h"

/* Decides urls[i % n] against list (ph_decide_url, the list named, as
 * Guard.check_url does) for about `seconds`; returns decisions/s
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
            ph_url_request req = {.url = urls[k], .url_len = lens[k], .list = list};
            ph_decision d;
            ph_decide_url(g, &req, &d);
            ok += d.allowed;
        }
        done += batch;
        t = bench_now_s() - t0;
    } while (t < seconds);
    *allowed += ok;
    return (double)done / t;
}
