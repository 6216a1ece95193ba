/* clock.c - the monotonic clock (pinhole/clock.h). */
#include "pinhole/clock.h"

#include <time.h>

int64_t ph_monotonic_ns(void)
{
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail on Linux with a valid pointer. */
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ph_monotonic_us(void)
{
    return ph_monotonic_ns() / 1000;
}

int64_t ph_monotonic_ms(void)
{
    return ph_monotonic_ns() / 1000000;
}
