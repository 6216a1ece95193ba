/* store-int.h - the store object shared by the port's source files (private). */
#ifndef PINHOLE_ARTIFACTS_STORE_INT_H
#define PINHOLE_ARTIFACTS_STORE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "pinhole/artifact_backend.h"
#include "pinhole/artifact_metadata.h"
#include "pinhole/artifact_store.h"

struct ph_artifact_store {
    ph_artifact_backend *backend;
    int64_t default_ttl;
    uint64_t max_size;
    ph_artifact_clock_fn clock;
    void *clock_ctx;
};

/* Chunk size of every streamed copy. */
#define PH_ARTIFACT_CHUNK ((size_t)1024 * 1024)

/* Chunks in a put's or a large get's pipeline ring (pipeline-int.h): the
 * side ahead may run this many minus one chunks ahead of the other. */
#define PH_ARTIFACT_PIPELINE_SLOTS 3

int64_t ph_artifact_store_now(const ph_artifact_store *s);

/* The one expiry rule (ADR-0029 decision 18), for open, list and sweep: an
 * artifact is expired, hence not found, from the second now >= expires_at. */
static inline bool ph_artifact_expired_at(const ph_artifact_metadata *m, int64_t now)
{
    return now >= m->expires_at;
}

/* The one not-found answer: absent, other tenant and expired are
 * indistinguishable by status and message. */
ph_status ph_artifact_not_found(ph_diag *diag);

/* The storage key of a ref, refusing a malformed one (PH_E_INVAL) before
 * any backend call. */
ph_status ph_artifact_ref_key(const ph_artifact_ref *ref, char key[static PH_ARTIFACT_KEY_LEN + 1],
                              ph_diag *diag);

#endif
