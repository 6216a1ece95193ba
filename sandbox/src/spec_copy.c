/* spec_copy.c - an EnvironmentSpec that owns its strings, so an environment
 * and a lease never depend on the lifetime of the caller's spec. */
#include "sandbox-int.h"

#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *s, bool *fail)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *fail = true;
    return d;
}

ph_status ph_spec_copy_init(ph_spec_copy *c, const ph_environment_spec *s)
{
    bool fail = false;
    memset(c, 0, sizeof *c);
    c->spec = *s;
    c->spec.tenant = c->tenant = dup_or_null(s->tenant, &fail);
    c->spec.lease = c->lease = dup_or_null(s->lease, &fail);
    c->spec.network.grant_token = c->grant = dup_or_null(s->network.grant_token, &fail);
    /* The socket only means something with a grant. */
    c->spec.network.proxy_socket_path = c->socket =
        dup_or_null(s->network.grant_token ? s->network.proxy_socket_path : NULL, &fail);
    c->spec.passthrough_file = c->passthrough = dup_or_null(s->passthrough_file, &fail);
    if (fail) {
        ph_spec_copy_clear(c);
        return PH_E_NOMEM;
    }
    return PH_OK;
}

void ph_spec_copy_clear(ph_spec_copy *c)
{
    free(c->tenant);
    free(c->lease);
    free(c->grant);
    free(c->socket);
    free(c->passthrough);
    memset(c, 0, sizeof *c);
}
