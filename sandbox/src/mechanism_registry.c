/* mechanism_registry.c - which adapter serves which SandboxMechanism value.
 * Every adapter (fake, gvisor, docker) implements ph_mechanism_ops
 * (sandbox-int.h) and runs the contract suite in tests/sandbox unchanged. */
#include "sandbox-int.h"
#include "mechanism_gvisor-int.h"

const ph_mechanism_ops *ph_mechanism_ops_for(ph_sandbox_mechanism m)
{
    switch (m) {
    case PH_MECHANISM_FAKE:
        return &ph_mechanism_fake;
    case PH_MECHANISM_GVISOR:
        return &ph_mechanism_gvisor;
    case PH_MECHANISM_DOCKER:
        return &ph_mechanism_docker;
    }
    return NULL;
}

ph_status ph_sandbox_mechanism_available(ph_sandbox_mechanism m, ph_diag *diag)
{
    const ph_mechanism_ops *ops = ph_mechanism_ops_for(m);
    if (ops == NULL)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0,
                           "mechanism %s is not implemented in this build",
                           ph_sandbox_mechanism_name(m));
    return ops->available(diag);
}
