/* timeout.c - decision 7: the timeout is the minimum of every bound, and the
 * model's value can lower it but never raise it. */
#include "sandbox-int.h"

const char *ph_timeout_bound_code(ph_timeout_bound b)
{
    switch (b) {
    case PH_TIMEOUT_BOUND_SERVICE_CAP: return "service_cap";
    case PH_TIMEOUT_BOUND_WALL_CLOCK: return "wall_clock";
    case PH_TIMEOUT_BOUND_RUN_BUDGET: return "run_budget";
    case PH_TIMEOUT_BOUND_MODEL: return "model";
    }
    return "unknown";
}

ph_timeout_choice ph_timeout_compose(int64_t hard_cap_ms, int64_t wall_clock_ms,
                                     int64_t run_budget_ms, int64_t model_seconds)
{
    /* The cap applies even when nothing else was supplied. A non-positive
     * cap is a configuration bug the service refuses at open; treat it as
     * one millisecond rather than "no limit" so it can never mean forever. */
    ph_timeout_choice c = {.ms = hard_cap_ms > 0 ? hard_cap_ms : 1,
                           .bound = PH_TIMEOUT_BOUND_SERVICE_CAP};
    if (wall_clock_ms >= 0 && wall_clock_ms < c.ms) {
        c.ms = wall_clock_ms;
        c.bound = PH_TIMEOUT_BOUND_WALL_CLOCK;
    }
    if (run_budget_ms != PH_SANDBOX_UNSET && run_budget_ms < c.ms) {
        c.ms = run_budget_ms < 0 ? 0 : run_budget_ms;
        c.bound = PH_TIMEOUT_BOUND_RUN_BUDGET;
    }
    if (model_seconds != PH_SANDBOX_UNSET) {
        /* Clamp to [1 s, cap]: a model asking for 0 or less gets one second,
         * a model asking for more than the cap gets the cap (and the cap is
         * reported as the winner, since the model did not lower anything). */
        int64_t cap_s = (hard_cap_ms > 0 ? hard_cap_ms : 1) / 1000;
        int64_t s = model_seconds < 1 ? 1 : model_seconds;
        if (cap_s >= 1 && s > cap_s)
            s = cap_s;
        if (s <= INT64_MAX / 1000 && s * 1000 < c.ms) {
            c.ms = s * 1000;
            c.bound = PH_TIMEOUT_BOUND_MODEL;
        }
    }
    return c;
}
