/* lease.c - decision 1: the workspace exists for a worker's lease on a run,
 * created at the first sandbox call and gone when the lease ends or a hold
 * outlasts approval_hold_seconds. */
#include "pinhole/sandbox_lease.h"
#include "sandbox-int.h"

#include <stdlib.h>
#include <string.h>

struct ph_sandbox_lease {
    ph_execution_service *svc;
    ph_spec_copy spec;
    int64_t approval_hold_seconds;
    ph_environment *env; /* NULL until the first call */
    bool held;
    int64_t held_since;
};

static void lease_free(ph_sandbox_lease *l)
{
    ph_spec_copy_clear(&l->spec);
    free(l);
}

ph_status ph_sandbox_lease_open(ph_execution_service *svc, const ph_environment_spec *spec,
                                int64_t approval_hold_seconds, ph_sandbox_lease **out,
                                ph_diag *diag)
{
    if (svc == NULL || spec == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_sandbox_lease_open: NULL argument");
    *out = NULL;
    if (approval_hold_seconds <= 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "approval_hold_seconds must be > 0");
    ph_sandbox_lease *l = calloc(1, sizeof *l);
    if (l == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    l->svc = svc;
    l->approval_hold_seconds = approval_hold_seconds;
    if (ph_spec_copy_init(&l->spec, spec) != PH_OK) {
        free(l);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    *out = l;
    return PH_OK;
}

ph_status ph_sandbox_lease_environment(ph_sandbox_lease *lease, ph_environment **env,
                                       ph_diag *diag)
{
    if (lease == NULL || env == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_sandbox_lease_environment: NULL argument");
    if (lease->env == NULL) {
        ph_status st = ph_environment_create(lease->svc, &lease->spec.spec, &lease->env, diag);
        if (st != PH_OK)
            return st;
    }
    *env = lease->env;
    return PH_OK;
}

ph_status ph_sandbox_lease_workspace(ph_sandbox_lease *lease, ph_workspace **ws, ph_diag *diag)
{
    ph_environment *env;
    if (ws == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "ph_sandbox_lease_workspace: NULL argument");
    *ws = NULL;
    ph_status st = ph_sandbox_lease_environment(lease, &env, diag);
    return st == PH_OK ? ph_environment_workspace(env, ws, diag) : st;
}

bool ph_sandbox_lease_has_sandbox(const ph_sandbox_lease *lease)
{
    return lease != NULL && lease->env != NULL;
}

void ph_sandbox_lease_hold_begin(ph_sandbox_lease *lease, int64_t now_seconds)
{
    if (lease == NULL || lease->held)
        return;
    lease->held = true;
    lease->held_since = now_seconds;
}

bool ph_sandbox_lease_hold_tick(ph_sandbox_lease *lease, int64_t now_seconds)
{
    if (lease == NULL || !lease->held || lease->env == NULL)
        return false;
    /* "Shorter than approval_hold_seconds" keeps it: a hold of exactly that
     * length is long enough to destroy. The times are the caller's: a
     * difference past int64 saturates (a hold from INT64_MIN to INT64_MAX
     * lasted longer than any limit; one from INT64_MAX back to INT64_MIN,
     * not at all) rather than overflow, which is undefined and wrapped to
     * the opposite answer. */
    int64_t held;
    if (__builtin_sub_overflow(now_seconds, lease->held_since, &held))
        held = now_seconds > lease->held_since ? INT64_MAX : INT64_MIN;
    if (held < lease->approval_hold_seconds)
        return false;
    ph_environment_destroy(&lease->env);
    return true;
}

bool ph_sandbox_lease_hold_end(ph_sandbox_lease *lease, int64_t now_seconds)
{
    bool destroyed = ph_sandbox_lease_hold_tick(lease, now_seconds);
    if (lease != NULL)
        lease->held = false;
    return destroyed;
}

void ph_sandbox_lease_end(ph_sandbox_lease **lease)
{
    if (lease == NULL || *lease == NULL)
        return;
    ph_environment_destroy(&(*lease)->env);
    lease_free(*lease);
    *lease = NULL;
}
