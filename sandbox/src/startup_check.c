/* startup_check.c - the Milestone 1 gate: production refuses mechanisms that
 * share the host kernel (docker) or do not isolate at all (fake). */
#include "sandbox-int.h"

#include <string.h>

const char *ph_sandbox_mechanism_name(ph_sandbox_mechanism m)
{
    switch (m) {
    case PH_MECHANISM_GVISOR: return "gvisor";
    case PH_MECHANISM_DOCKER: return "docker";
    case PH_MECHANISM_FAKE: return "fake";
    }
    return "unknown";
}

ph_status ph_sandbox_mechanism_from_name(const char *name, ph_sandbox_mechanism *out,
                                         ph_diag *diag)
{
    static const ph_sandbox_mechanism all[] = {PH_MECHANISM_GVISOR, PH_MECHANISM_DOCKER,
                                               PH_MECHANISM_FAKE};
    for (size_t i = 0; name && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, ph_sandbox_mechanism_name(all[i])) == 0) {
            *out = all[i];
            return PH_OK;
        }
    }
    return ph_diag_set(diag, PH_E_INVAL, 0,
                       "unknown mechanism '%s' (expected gvisor, docker or fake)",
                       name ? name : "(null)");
}

const char *ph_service_mode_name(ph_service_mode m)
{
    return m == PH_SERVICE_MODE_PRODUCTION ? "production" : "development";
}

ph_status ph_service_mode_from_name(const char *name, ph_service_mode *out, ph_diag *diag)
{
    if (name && strcmp(name, "production") == 0) {
        *out = PH_SERVICE_MODE_PRODUCTION;
        return PH_OK;
    }
    if (name && strcmp(name, "development") == 0) {
        *out = PH_SERVICE_MODE_DEVELOPMENT;
        return PH_OK;
    }
    return ph_diag_set(diag, PH_E_INVAL, 0,
                       "unknown service mode '%s' (expected production or development)",
                       name ? name : "(null)");
}

ph_status ph_sandbox_startup_check(ph_service_mode mode, ph_sandbox_mechanism mechanism,
                                   ph_diag *diag)
{
    if (mode != PH_SERVICE_MODE_PRODUCTION && mode != PH_SERVICE_MODE_DEVELOPMENT)
        return ph_diag_set(diag, PH_E_INVAL, 0, "unknown service mode %d", (int)mode);
    switch (mechanism) {
    case PH_MECHANISM_GVISOR:
        return PH_OK;
    case PH_MECHANISM_DOCKER:
        if (mode == PH_SERVICE_MODE_PRODUCTION)
            return ph_diag_set(diag, PH_E_DENIED, 0,
                               "mechanism_refused_in_production: docker shares the host kernel "
                               "and is a development fallback only; use mechanism gvisor in "
                               "production");
        return PH_OK;
    case PH_MECHANISM_FAKE:
        if (mode == PH_SERVICE_MODE_PRODUCTION)
            return ph_diag_set(diag, PH_E_DENIED, 0,
                               "mechanism_refused_in_production: fake runs commands without "
                               "any isolation; use mechanism gvisor in production");
        return PH_OK;
    }
    return ph_diag_set(diag, PH_E_INVAL, 0, "unknown mechanism %d", (int)mechanism);
}
