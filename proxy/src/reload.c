/* reload.c - the policy the proxy enforces: the allowlist table (a guard)
 * and the grant keyring, and reloading both on SIGHUP or POST /reload.
 *
 * A reload is whole or nothing: the new table is opened and verified (a
 * guard of its own) and the new key file parsed before anything changes;
 * only when both loaded are the two put in force, together, by swapping two
 * pointers under the write side of one rwlock. A failure of either changes
 * nothing: the old table and keys keep serving, the failure is logged
 * (reload_failed) and counted. Readers hold the read side for the
 * microseconds of one decision (an HMAC and a table lookup), so a decision
 * never sees the new table with the old keys or the reverse. The lock
 * prefers writers, so a steady stream of decisions cannot hold a reload off.
 */
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>

#include "diag-int.h"
#include "proxy-int.h"

static ph_guard *g_guard;
static ph_keyring *g_keyring;
static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static char g_table_path[PX_PATH_MAX];
static char g_key_path[PX_PATH_MAX];
static void (*g_hook)(void *arg);
static void *g_hook_arg;
static struct stat g_key_identity; /* of the key file in force */

/* Whether two stats name the same unchanged file (replaced files, as
 * pinhole-guard keygen --rotate writes them, get a new inode). */
static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Opens both files; on failure nothing is returned. */
static ph_status load_both(const char *table, const char *key, ph_guard **g, ph_keyring **kr,
                           ph_diag *diag, const char **which)
{
    ph_guard_options opts = { 0 };
    *which = "table";
    ph_status st = ph_guard_open(table, &opts, g, diag);
    if (st != PH_OK)
        return st;
    *which = "grant keys";
    st = ph_keyring_load_file(key, kr, diag);
    if (st != PH_OK)
        ph_guard_close(g);
    return st;
}

ph_status px_policy_init(const px_config *cfg, ph_diag *diag)
{
    const char *which;
    ph_status st = load_both(cfg->table, cfg->grant_key, &g_guard, &g_keyring, diag, &which);
    if (st != PH_OK)
        return st;
    snprintf(g_table_path, sizeof g_table_path, "%s", cfg->table);
    snprintf(g_key_path, sizeof g_key_path, "%s", cfg->grant_key);
    (void)stat(g_key_path, &g_key_identity);
    return PH_OK;
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
    ph_guard *g = NULL;
    ph_keyring *kr = NULL;
    const char *which;
    /* The key file's identity, taken before it is read: a file replaced
     * after this is seen as changed by the next reload. */
    struct stat key_identity = { 0 };
    (void)stat(g_key_path, &key_identity);
    ph_status st = load_both(g_table_path, g_key_path, &g, &kr, diag, &which);
    if (st != PH_OK) {
        px_metrics_reload(false);
        px_log_event("error", "reload_failed", "%s: %s; the old table and keys stay in force",
                     which, diag->message);
        return st;
    }
    char old_id[PH_TABLE_ID_HEX_LEN + 1], new_id[PH_TABLE_ID_HEX_LEN + 1];
    ph_guard_policy_id(g, new_id);
    pthread_rwlock_wrlock(&g_lock);
    ph_guard *old_guard = g_guard;
    ph_keyring *old_keyring = g_keyring;
    g_guard = g;
    g_keyring = kr;
    pthread_rwlock_unlock(&g_lock);
    /* No reader can hold the old ones: readers use them only under the
     * read side, and the swap waited for every one of them. */
    ph_guard_policy_id(old_guard, old_id);
    ph_guard_close(&old_guard);
    ph_keyring_free(&old_keyring);
    bool table_changed = strcmp(old_id, new_id) != 0;
    bool keys_changed = !same_file(&key_identity, &g_key_identity);
    g_key_identity = key_identity;
    px_metrics_reload(true);
    px_log_event("info", "reload", "table %s, policy %s; grant keys %s, %zu key(s)",
                 table_changed ? "replaced" : "unchanged", new_id,
                 keys_changed ? "replaced" : "unchanged", ph_keyring_count(kr));
    /* Open connections are decided again only when something changed. */
    if (g_hook && (table_changed || keys_changed))
        g_hook(g_hook_arg);
    return PH_OK;
}

void px_policy_shutdown(void)
{
    ph_guard_close(&g_guard);
    ph_keyring_free(&g_keyring);
}

void px_policy_decide(const char *auth_value, size_t auth_len, int64_t now,
                      const char *authority, size_t authority_len, ph_grant *grant,
                      bool *grant_ok, ph_reason *grant_reason, ph_diag *grant_diag,
                      ph_verdict *v, ph_status *check_status)
{
    ph_diag check_diag = { 0 };
    pthread_rwlock_rdlock(&g_lock);
    *grant_ok = ph_grant_verify_proxy_authorization(g_keyring, auth_value, auth_len, now, NULL,
                                                    grant, grant_reason, grant_diag) == PH_OK;
    if (*grant_ok)
        *check_status = ph_guard_check_authority(g_guard, grant->list, authority,
                                                 authority_len, v, &check_diag);
    pthread_rwlock_unlock(&g_lock);
}

void px_policy_id(char out[PH_TABLE_ID_HEX_LEN + 1])
{
    pthread_rwlock_rdlock(&g_lock);
    if (g_guard == NULL)
        out[0] = '\0';
    else
        ph_guard_policy_id(g_guard, out);
    pthread_rwlock_unlock(&g_lock);
}
