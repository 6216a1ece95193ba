/* ids-int.h - validation of the (tenant id, artifact id) pair (private). */
#ifndef PINHOLE_ARTIFACTS_IDS_INT_H
#define PINHOLE_ARTIFACTS_IDS_INT_H

#include "pinhole/artifact_store.h"

/* PH_E_INVAL for an empty tenant or a malformed artifact id, PH_E_LIMIT for
 * a tenant over PH_ARTIFACT_TENANT_MAX; the one wording of each refusal. */
ph_status ph_artifact_check_pair(const void *tenant_id, size_t tenant_id_len,
                                 const char *artifact_id, size_t id_len, ph_diag *diag);

#endif
