/* bench_util.h - the clock and the order statistics every benchmark uses
 * (header only: each benchmark is one executable). */
#ifndef PINHOLE_BENCH_UTIL_H
#define PINHOLE_BENCH_UTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline double bench_now_ms(void) { return bench_now_s() * 1e3; }

/* qsort order of doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) and returns its q-quantile, the nearest rank (0.5: the
 * median, the upper middle for an even n). */
static inline double bench_quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[(int)(q * (n - 1) + 0.5)];
}

#endif
