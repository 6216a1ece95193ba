/* execd_registry.c - pinhole-execd's registry: environments, workspace
 * ids, leases and identities, each scoped to the identity and tenant that
 * created it; the mechanism services by hard cap; the counters and
 * latency histograms. Everything here is under g_mu unless it says
 * otherwise. */
#include "execd_state-int.h"

#include "pinhole/hex.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XD_MAX_SERVICES 24 /* the steps of xd_cap_bucket and the daemon's own */

typedef struct xd_svc {
    int64_t cap_ms;
    ph_execution_service *svc;
} xd_svc;

const xd_config *g_cfg;
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
xd_identity *g_identities;
xd_env *g_envs;
xd_ws *g_wss;
xd_lease *g_leases;
size_t g_live;     /* sandboxes that exist or are being created */
static xd_svc g_svcs[XD_MAX_SERVICES];
static size_t g_svc_count;
unsigned long g_requests, g_busy_total, g_errors_total;

/* Latency histograms of the three ExecutionEnvironment operations
 * (milliseconds; Prometheus cumulative buckets are summed when printed). */
static const int64_t g_bucket_ms[] = {1, 5, 10, 50, 100, 500, 1000, 5000, 30000, 120000};
#define XD_BUCKETS (sizeof g_bucket_ms / sizeof g_bucket_ms[0])
static const char *const g_hist_ops[] = {"environment.create", "environment.execute",
                                         "environment.destroy"};
#define XD_HIST_OPS (sizeof g_hist_ops / sizeof g_hist_ops[0])
static unsigned long g_hist[XD_HIST_OPS][XD_BUCKETS + 1]; /* last: over every bucket */
static unsigned long g_hist_sum_ms[XD_HIST_OPS];

void xd_observe(const char *op, int64_t ms)
{
    for (size_t i = 0; i < XD_HIST_OPS; i++) {
        if (strcmp(op, g_hist_ops[i]) != 0)
            continue;
        size_t b = 0;
        while (b < XD_BUCKETS && ms > g_bucket_ms[b])
            b++;
        __atomic_add_fetch(&g_hist[i][b], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_hist_sum_ms[i], (unsigned long)(ms > 0 ? ms : 0),
                           __ATOMIC_RELAXED);
    }
}

/* Appends the histograms in the text exposition format to out (cap bytes). */
void xd_print_histograms(char *out, size_t cap)
{
    size_t used = strlen(out);
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0,
                             "# TYPE pinhole_execd_op_duration_seconds histogram\n");
    for (size_t i = 0; i < XD_HIST_OPS; i++) {
        unsigned long cum = 0;
        for (size_t b = 0; b <= XD_BUCKETS && used < cap; b++) {
            cum += __atomic_load_n(&g_hist[i][b], __ATOMIC_RELAXED);
            char le[32];
            if (b < XD_BUCKETS)
                snprintf(le, sizeof le, "%g", (double)g_bucket_ms[b] / 1000.0);
            else
                snprintf(le, sizeof le, "+Inf");
            used += (size_t)snprintf(out + used, cap - used,
                                     "pinhole_execd_op_duration_seconds_bucket{op=\"%s\","
                                     "le=\"%s\"} %lu\n", g_hist_ops[i], le, cum);
        }
        if (used < cap)
            used += (size_t)snprintf(out + used, cap - used,
                                     "pinhole_execd_op_duration_seconds_sum{op=\"%s\"} %g\n"
                                     "pinhole_execd_op_duration_seconds_count{op=\"%s\"} %lu\n",
                                     g_hist_ops[i],
                                     (double)__atomic_load_n(&g_hist_sum_ms[i],
                                                             __ATOMIC_RELAXED) / 1000.0,
                                     g_hist_ops[i], cum);
    }
}

void xd_new_id(const char *prefix, char out[PH_EXECD_ID_MAX])
{
    size_t n = (size_t)snprintf(out, PH_EXECD_ID_MAX, "%s", prefix);
    if (n + 2 * 8 >= PH_EXECD_ID_MAX || !ph_hex_random(8, out + n))
        abort(); /* no randomness: ids would be guessable */
}

/* Under g_mu. The service for a connection's cap (created on first use). */
int64_t xd_cap_bucket(int64_t want_ms)
{
    /* Few distinct caps, so a peer cannot fill the service table with
     * caps of its own: the largest step at most the wanted one, and never
     * above the daemon's. */
    static const int64_t steps[] = {XD_CAP_MIN_MS, 200,    300,    500,     1000,    2000,
                                    5000,          10000,  20000,  30000,   60000,   120000,
                                    300000,        600000, 1800000, 3600000, 7200000};
    int64_t cap = g_cfg->hard_cap_ms;
    if (want_ms >= cap)
        return cap;
    int64_t got = want_ms; /* below the first step: refused by hello */
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && steps[i] <= want_ms; i++)
        got = steps[i];
    return got < cap ? got : cap;
}

ph_execution_service *xd_service_for(int64_t cap_ms, ph_diag *diag)
{
    for (size_t i = 0; i < g_svc_count; i++)
        if (g_svcs[i].cap_ms == cap_ms)
            return g_svcs[i].svc;
    if (g_svc_count == XD_MAX_SERVICES) {
        ph_diag_set(diag, PH_E_LIMIT, 0, "too many distinct hard caps in use");
        return NULL;
    }
    ph_service_config sc = {.mode = g_cfg->mode,
                            .mechanism = g_cfg->mechanism,
                            .hard_cap_ms = cap_ms,
                            .state_dir = g_cfg->state_dir,
                            .log = xd_sandbox_log,
                            .workspace_total_max_bytes = g_cfg->workspace_total_max_bytes,
                            .workspace_tenant_max_bytes = g_cfg->workspace_tenant_max_bytes};
    ph_execution_service *svc = NULL;
    if (ph_execution_service_open(&sc, &svc, diag) != PH_OK)
        return NULL;
    g_svcs[g_svc_count].cap_ms = cap_ms;
    g_svcs[g_svc_count++].svc = svc;
    return svc;
}

static bool owned(const char *owner, const char *tenant, const char *o_owner,
                  const char *o_tenant)
{
    return strcmp(owner, o_owner) == 0 && tenant != NULL && strcmp(tenant, o_tenant) == 0;
}

xd_env *xd_env_find(const char *id, const char *owner, const char *tenant)
{
    for (xd_env *e = g_envs; id && e; e = e->next)
        if (strcmp(e->id, id) == 0 && owned(owner, tenant, e->owner, e->tenant))
            return e;
    return NULL;
}

xd_lease *xd_lease_find(const char *id, const char *owner, const char *tenant)
{
    for (xd_lease *l = g_leases; id && l; l = l->next)
        if (strcmp(l->id, id) == 0 && owned(owner, tenant, l->owner, l->tenant))
            return l;
    return NULL;
}

xd_ws *xd_ws_find(const char *id, const char *owner, const char *tenant)
{
    for (xd_ws *w = g_wss; id && w; w = w->next)
        if (strcmp(w->id, id) == 0 && owned(owner, tenant, w->owner, w->tenant))
            return w;
    return NULL;
}

/* Under g_mu: unlinks e (not freed). */
void xd_env_unlink(xd_env *e)
{
    for (xd_env **p = &g_envs; *p; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            break;
        }
    }
    /* Its workspace ids go with it: they would answer not_found anyway, and
     * kept they would grow the registry (and every lookup) without bound. */
    for (xd_ws **p = &g_wss; *p;) {
        xd_ws *w = *p;
        if (strcmp(w->env_id, e->id) == 0) {
            *p = w->next;
            free(w);
        } else {
            p = &w->next;
        }
    }
}

size_t xd_ws_count(const char *env_id)
{
    size_t n = 0;
    for (const xd_ws *w = g_wss; w; w = w->next)
        n += strcmp(w->env_id, env_id) == 0;
    return n;
}

size_t xd_lease_count(const char *owner)
{
    size_t n = 0;
    for (const xd_lease *l = g_leases; l; l = l->next)
        n += owner == NULL || strcmp(l->owner, owner) == 0;
    return n;
}

xd_identity *xd_identity_find(const char *name)
{
    xd_identity *id = g_identities;
    while (id && strcmp(id->name, name) != 0)
        id = id->next;
    return id;
}

const char *xd_sandbox_reserve(const char *owner)
{
    xd_identity *id = xd_identity_find(owner);
    if (g_live >= g_cfg->max_sandboxes)
        return "the service is at --max-sandboxes";
    if (id != NULL && id->sandboxes >= g_cfg->max_sandboxes_per_identity)
        return "this identity is at --max-sandboxes-per-identity";
    g_live++;
    if (id != NULL)
        id->sandboxes++;
    return NULL;
}

void xd_sandbox_release(const char *owner)
{
    xd_identity *id = xd_identity_find(owner);
    g_live--;
    if (id != NULL && id->sandboxes > 0)
        id->sandboxes--;
}

void xd_lease_unlink(xd_lease *l)
{
    for (xd_lease **p = &g_leases; *p; p = &(*p)->next) {
        if (*p == l) {
            *p = l->next;
            return;
        }
    }
}

/* Under g_mu, lease busy: makes the environment record match whether the
 * lease has a sandbox now (a hold or the end may have destroyed it). */
void xd_lease_reconcile(xd_lease *l)
{
    if (l->env_id[0] && (l->lease == NULL || !ph_sandbox_lease_has_sandbox(l->lease))) {
        xd_env *e = xd_env_find(l->env_id, l->owner, l->tenant);
        if (e != NULL) {
            xd_env_unlink(e);
            free(e);
        }
        xd_sandbox_release(l->owner);
        l->env_id[0] = '\0';
    }
}

/* Destroys every object left (after the pool has stopped). */
size_t xd_destroy_all(void)
{
    size_t n = 0;
    while (g_leases) {
        xd_lease *l = g_leases;
        g_leases = l->next;
        n += ph_sandbox_lease_has_sandbox(l->lease);
        ph_sandbox_lease_end(&l->lease);
        ph_env_block_clear(&l->tier1);
        free(l);
    }
    while (g_envs) {
        xd_env *e = g_envs;
        g_envs = e->next;
        if (e->lease == NULL) {
            ph_environment_destroy(&e->env);
            n++;
        }
        free(e);
    }
    while (g_wss) {
        xd_ws *w = g_wss;
        g_wss = w->next;
        free(w);
    }
    while (g_identities) {
        xd_identity *id = g_identities;
        g_identities = id->next;
        free(id);
    }
    for (size_t i = 0; i < g_svc_count; i++)
        ph_execution_service_close(&g_svcs[i].svc);
    g_svc_count = 0;
    g_live = 0;
    return n;
}
