/* artifact_id.c - artifact ids: 128 random bits as 32 lowercase hex chars.
 * The one canonical form is the only accepted form, so an id can never carry
 * a path separator, a dot, an uppercase twin or a NUL into a backend. */
#include <string.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "ids-int.h"
#include "pinhole/artifact_store.h"

bool ph_artifact_id_valid(const char *id, size_t id_len)
{
    if (id == NULL || id_len != PH_ARTIFACT_ID_LEN)
        return false;
    for (size_t i = 0; i < id_len; i++) {
        char c = id[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

ph_status ph_artifact_id_generate(char id[static PH_ARTIFACT_ID_LEN + 1], ph_diag *diag)
{
    if (!ph_hex_random(PH_ARTIFACT_ID_LEN / 2, id))
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "getrandom failed: no artifact id");
    return PH_OK;
}

ph_status ph_artifact_check_pair(const void *tenant_id, size_t tenant_id_len,
                                 const char *artifact_id, size_t id_len, ph_diag *diag)
{
    if (tenant_id == NULL || tenant_id_len == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "tenant id is empty");
    if (tenant_id_len > PH_ARTIFACT_TENANT_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "tenant id longer than %d bytes",
                           PH_ARTIFACT_TENANT_MAX);
    if (!ph_artifact_id_valid(artifact_id, id_len))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "artifact id must be exactly 32 lowercase hex characters");
    return PH_OK;
}

ph_status ph_artifact_ref_make(ph_artifact_ref *out, const void *tenant_id, size_t tenant_id_len,
                               const char *artifact_id, size_t id_len, ph_diag *diag)
{
    memset(out, 0, sizeof *out);
    ph_status st = ph_artifact_check_pair(tenant_id, tenant_id_len, artifact_id, id_len, diag);
    if (st != PH_OK)
        return st;
    out->tenant_id = tenant_id;
    out->tenant_id_len = tenant_id_len;
    memcpy(out->artifact_id, artifact_id, PH_ARTIFACT_ID_LEN);
    out->artifact_id[PH_ARTIFACT_ID_LEN] = '\0';
    return PH_OK;
}

ph_artifact_ref ph_artifact_metadata_ref(const ph_artifact_metadata *m)
{
    ph_artifact_ref r;
    memset(&r, 0, sizeof r);
    r.tenant_id = m->tenant_id;
    r.tenant_id_len = m->tenant_id_len;
    memcpy(r.artifact_id, m->artifact_id, sizeof r.artifact_id);
    return r;
}
