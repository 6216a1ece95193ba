/* sweep.c - expiry by expires_at (ADR-0029 decision 18) and the listing it
 * shares a walk with. No reference counting: an artifact lives exactly until
 * its expires_at, and an expired ref is already not-found at open. */
#include <stdlib.h>

#include "pinhole/diag.h"
#include "pinhole/artifact_metadata.h"
#include "store-int.h"

typedef struct sweep_walk {
    ph_artifact_store *store;
    int64_t now;
    ph_artifact_sweep_stats stats;
    ph_status error;
    ph_diag *diag;
} sweep_walk;

static bool sweep_one(void *arg, const char *key, const char *meta, size_t meta_len)
{
    sweep_walk *w = arg;
    ph_artifact_metadata *m = NULL;
    w->stats.examined++;
    if (meta == NULL || ph_artifact_metadata_decode(meta, meta_len, &m, NULL) != PH_OK) {
        w->stats.unreadable++; /* never delete what we cannot read: report it */
        return true;
    }
    if (ph_artifact_expired_at(m, w->now)) {
        ph_status st = w->store->backend->ops->remove(w->store->backend, key, w->diag);
        if (st == PH_OK)
            w->stats.expired++;
        else if (st != PH_E_NOT_FOUND && w->error == PH_OK)
            w->error = st; /* keep sweeping; report the first failure */
    }
    ph_artifact_metadata_free(&m);
    return true;
}

ph_status ph_artifact_sweep(ph_artifact_store *store, int64_t now, ph_artifact_sweep_stats *stats,
                            ph_diag *diag)
{
    sweep_walk w = {.store = store, .now = now, .diag = diag};
    ph_status st = store->backend->ops->list(store->backend, sweep_one, &w, diag);
    if (st == PH_OK)
        st = w.error;
    ph_status st2 = store->backend->ops->clean_staging(store->backend, &w.stats.staging_removed,
                                                       st == PH_OK ? diag : NULL);
    if (stats)
        *stats = w.stats;
    return st != PH_OK ? st : st2;
}

typedef struct list_walk {
    ph_artifact_visit_fn visit;
    void *arg;
    int64_t now;
} list_walk;

static bool list_one(void *arg, const char *key, const char *meta, size_t meta_len)
{
    list_walk *w = arg;
    ph_artifact_metadata *m = NULL;
    (void)key;
    if (meta == NULL || ph_artifact_metadata_decode(meta, meta_len, &m, NULL) != PH_OK)
        return true;
    bool more = ph_artifact_expired_at(m, w->now) || w->visit(w->arg, m); /* expired: not found */
    ph_artifact_metadata_free(&m);
    return more;
}

ph_status ph_artifact_list(ph_artifact_store *store, ph_artifact_visit_fn visit, void *arg,
                           ph_diag *diag)
{
    list_walk w = {.visit = visit, .arg = arg, .now = ph_artifact_store_now(store)};
    return store->backend->ops->list(store->backend, list_one, &w, diag);
}
