/* reload.c - the policy the proxy enforces: one libpinhole policy object
 * (a ph_guard opened with the allowlist table and the grant key file), and
 * reloading it on SIGHUP or POST /reload.
 *
 * The guard owns the versions: a reload loads every file (the table, the
 * keys and the revocation list) and puts them in force in one swap only
 * when all loaded (whole or nothing; a failure keeps the old version
 * serving, and is logged as reload_failed and counted),
 * and every decision pins one version from start to end (reference counted),
 * so no decision sees the new table with the old keys or the reverse. This
 * file only logs, counts, and runs the change hook that rechecks open
 * tunnels.
 */
#include <string.h>

#include "config.h"
#include "log_json.h"
#include "metrics.h"
#include "reload.h"

static ph_guard *g_policy;
static void (*g_hook)(void *arg);
static void *g_hook_arg;

ph_status px_policy_init(const px_config *cfg, ph_diag *diag)
{
    /* The proxy resolves through its workers' own resolvers (dns_async.c),
     * never through the guard's worker calls: no guard-level cache. */
    ph_guard_options opts = { .grant_keys_path = cfg->grant_key, .dns_cache_off = true,
                              .revocations_path = cfg->revocations[0] ? cfg->revocations : NULL };
    return ph_guard_open(cfg->table, &opts, &g_policy, diag);
}

void px_policy_on_change(void (*hook)(void *arg), void *arg)
{
    g_hook = hook;
    g_hook_arg = arg;
}

ph_status px_policy_reload(ph_diag *diag)
{
    ph_diag local = { 0 };
    if (diag == NULL)
        diag = &local;
    ph_reload_report r;
    ph_status st = ph_guard_reload_policy(g_policy, &r, diag);
    if (st != PH_OK) {
        px_metrics_reload(false);
        px_log_event("error", "reload_failed",
                     "%s: %s; the old table, keys and revocations stay in force",
                     r.failed_file != NULL ? r.failed_file : "policy", diag->message);
        return st;
    }
    px_metrics_reload(true);
    px_log_event("info", "reload",
                 "table %s, policy %s; grant keys %s, %zu key(s), keyring %.16s; "
                 "revocations %s, %zu entr%s; generation %llu",
                 r.table_changed ? "replaced" : "unchanged", r.info.policy_id,
                 r.keys_changed ? "replaced" : "unchanged", r.info.keys, r.info.keyring_id,
                 r.revocations_changed ? "replaced" : "unchanged", r.info.revocations,
                 r.info.revocations == 1 ? "y" : "ies", (unsigned long long)r.info.generation);
    /* Open connections are decided again only when something changed. */
    if (g_hook && (r.table_changed || r.keys_changed || r.revocations_changed))
        g_hook(g_hook_arg);
    return PH_OK;
}

void px_policy_shutdown(void) { ph_guard_close(&g_policy); }

ph_guard *px_policy(void) { return g_policy; }

void px_policy_id(char out[PH_TABLE_ID_HEX_LEN + 1])
{
    if (g_policy == NULL)
        out[0] = '\0';
    else
        ph_guard_policy_id(g_policy, out);
}
