/* monotonic-int.h - milliseconds on the monotonic clock, for the deadlines
 * of resolution, connection and reload intervals (never wall-clock time,
 * which can jump). */
#ifndef PINHOLE_MONOTONIC_INT_H
#define PINHOLE_MONOTONIC_INT_H

#include <stdint.h>
#include <time.h>

static inline int64_t ph_monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Microseconds on the same clock, for latencies. */
static inline int64_t ph_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
