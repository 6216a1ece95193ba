/* reload.c - the policy the proxy enforces: the guard (allowlist table) and
 * the grant keyring, and reloading both on SIGHUP or POST /reload.
 *
 * The guard owns table swapping (reference counted: a check in flight keeps
 * the table it started with). The keyring is swapped here under a rwlock;
 * a verification holds the read side for the few microseconds of one HMAC.
 * A file that fails to load changes nothing: the old table or keyring stays,
 * the failure is logged and counted.
 */
#include <pthread.h>
#include <string.h>

#include "diag-int.h"
#include "proxy-int.h"

static ph_guard *g_guard;
static ph_keyring *g_keyring;
static pthread_rwlock_t g_keyring_lock = PTHREAD_RWLOCK_INITIALIZER;
static char g_key_path[PX_PATH_MAX];

ph_status px_policy_init(const px_config *cfg, ph_diag *diag)
{
    ph_guard_options opts = { 0 };
    ph_status st = ph_guard_open(cfg->table, &opts, &g_guard, diag);
    if (st != PH_OK)
        return st;
    st = ph_keyring_load_file(cfg->grant_key, &g_keyring, diag);
    if (st != PH_OK) {
        ph_guard_close(&g_guard);
        return st;
    }
    snprintf(g_key_path, sizeof g_key_path, "%s", cfg->grant_key);
    return PH_OK;
}

ph_status px_policy_reload(ph_diag *diag)
{
    bool reloaded = false;
    ph_status st = ph_guard_reload(g_guard, &reloaded, diag);
    if (st != PH_OK) {
        px_metrics_reload(false);
        px_log_event("error", "reload_failed", "table kept: %s", diag ? diag->message : "");
        return st;
    }
    ph_keyring *kr = NULL;
    st = ph_keyring_load_file(g_key_path, &kr, diag);
    if (st != PH_OK) {
        px_metrics_reload(false);
        px_log_event("error", "reload_failed", "grant keys kept: %s", diag ? diag->message : "");
        return st;
    }
    pthread_rwlock_wrlock(&g_keyring_lock);
    ph_keyring *old = g_keyring;
    g_keyring = kr;
    pthread_rwlock_unlock(&g_keyring_lock);
    ph_keyring_free(&old);
    px_metrics_reload(true);
    char id[PH_TABLE_ID_HEX_LEN + 1];
    px_policy_id(id);
    px_log_event("info", "reload", "table %s, policy %s", reloaded ? "replaced" : "unchanged", id);
    return PH_OK;
}

void px_policy_shutdown(void)
{
    ph_guard_close(&g_guard);
    ph_keyring_free(&g_keyring);
}

ph_status px_policy_check(const char *list, const char *authority, size_t len, ph_verdict *v,
                          ph_diag *diag)
{
    return ph_guard_check_authority(g_guard, list, authority, len, v, diag);
}

ph_status px_policy_verify_grant(const char *value, size_t len, int64_t now, ph_grant *out,
                                 ph_reason *reason, ph_diag *diag)
{
    pthread_rwlock_rdlock(&g_keyring_lock);
    ph_status st = ph_grant_verify_proxy_authorization(g_keyring, value, len, now, NULL, out,
                                                       reason, diag);
    pthread_rwlock_unlock(&g_keyring_lock);
    return st;
}

void px_policy_id(char out[PH_TABLE_ID_HEX_LEN + 1])
{
    if (g_guard == NULL) {
        out[0] = '\0';
        return;
    }
    ph_guard_policy_id(g_guard, out);
}
