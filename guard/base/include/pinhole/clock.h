/*
 * pinhole/clock.h - the monotonic clock, for deadlines, timeouts, intervals
 * and latencies. Never wall-clock time for those: it jumps when the clock is
 * set. (Expiry of grants and artifacts is wall-clock time, by design, and
 * does not use this.)
 */
#ifndef PINHOLE_CLOCK_H
#define PINHOLE_CLOCK_H

#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_MONOTONIC in nanoseconds, microseconds and milliseconds: from an
 * unspecified origin (boot, usually), never decreasing, not counting time
 * the machine was suspended. Differences of two readings are durations. */
PH_API int64_t ph_monotonic_ns(void);
PH_API int64_t ph_monotonic_us(void);
PH_API int64_t ph_monotonic_ms(void);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_CLOCK_H */
