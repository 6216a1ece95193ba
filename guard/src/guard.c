/* guard.c - the guard handle, the policy object: the current policy version
 * (the table and, for the proxy, the grant keyring and the revocation list),
 * reference counted, and reloading them as one unit when any file is
 * replaced. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pinhole/diag.h"
#include "dns_cache-int.h"
#include "pinhole/clock.h"
#include "guard-int.h"
#include "pinhole/resolve.h"
#include "resolve-int.h"

/* What identifies one version of a policy file (ctime too: a chmod that
 * makes a key file unacceptable is a change). */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} file_id;

struct ph_guard {
    pthread_mutex_t lock;        /* guards `current`: held for a pointer copy only */
    ph_guard_snapshot *current;
    pthread_mutex_t reload_lock; /* one reload at a time; guards loaded, last_error */
    char *path;                  /* NULL for ph_guard_from_table */
    char *keys_path;             /* the grant key file; NULL: no keyring */
    char *rev_path;              /* the revocation list; NULL: none */
    file_id loaded, keys_loaded, rev_loaded;
    ph_diag last_error;          /* status PH_OK when the last reload worked */
    char *dns_servers;
    ph_resolver_config resolver; /* servers, timeout, TTL caps; cache_entries 0 */
    ph_dns_cache *cache;         /* shared by every worker call; NULL: off */
    unsigned reload_interval_ms;
    _Atomic int64_t next_check_ms;
};

static ph_status stat_id(const char *path, file_id *id, ph_diag *diag)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return ph_diag_set(diag, errno == ENOENT ? PH_E_NOT_FOUND : PH_E_IO, 0, "%s: %s", path,
                           strerror(errno));
    memset(id, 0, sizeof *id);
    id->dev = sb.st_dev;
    id->ino = sb.st_ino;
    id->size = sb.st_size;
    id->mtime = sb.st_mtim;
    id->ctime = sb.st_ctim;
    return PH_OK;
}

static bool same_id(const file_id *a, const file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* The files of one policy version, loaded (each may be NULL but the
 * table). */
typedef struct loaded_files {
    ph_table *table;
    ph_keyring *keyring;
    ph_revocations *revocations;
} loaded_files;

static void loaded_free(loaded_files *f)
{
    ph_table_close(&f->table);
    ph_keyring_free(&f->keyring);
    ph_revocations_free(&f->revocations);
}

/* Wraps the files (all taken) in a snapshot holding one reference. On
 * failure they are freed. */
static ph_guard_snapshot *snapshot_new(loaded_files *f, uint64_t generation, ph_diag *diag)
{
    ph_guard_snapshot *s = calloc(1, sizeof *s);
    if (s == NULL) {
        loaded_free(f);
        ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        return NULL;
    }
    s->table = f->table;
    s->keyring = f->keyring;
    s->revocations = f->revocations;
    memset(f, 0, sizeof *f);
    s->generation = generation;
    atomic_init(&s->refs, 1);
    const char *hex = ph_table_policy_id_hex(s->table);
    snprintf(s->policy_id, sizeof s->policy_id, "%s", hex != NULL ? hex : "");
    if (s->keyring != NULL)
        ph_keyring_id(s->keyring, s->keyring_id);
    return s;
}

ph_guard_snapshot *ph_guard_snapshot_acquire(ph_guard *g)
{
    if (g == NULL)
        return NULL;
    pthread_mutex_lock(&g->lock);
    ph_guard_snapshot *s = g->current;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&g->lock);
    return s;
}

const ph_table *ph_guard_snapshot_table(const ph_guard_snapshot *s)
{
    return s != NULL ? s->table : NULL;
}

void ph_guard_snapshot_release(ph_guard_snapshot **s)
{
    if (s == NULL || *s == NULL)
        return;
    if (atomic_fetch_sub_explicit(&(*s)->refs, 1, memory_order_acq_rel) == 1) {
        ph_table_close(&(*s)->table);
        ph_keyring_free(&(*s)->keyring);
        ph_revocations_free(&(*s)->revocations);
        free(*s);
    }
    *s = NULL;
}

/* Installs s as current; the old snapshot loses the guard's reference. */
static void swap_in(ph_guard *g, ph_guard_snapshot *s)
{
    pthread_mutex_lock(&g->lock);
    ph_guard_snapshot *old = g->current;
    g->current = s;
    pthread_mutex_unlock(&g->lock);
    ph_guard_snapshot_release(&old);
}

/* Loads the table and (when the guard has them) the key file and the
 * revocation list, each file's identity taken before it is opened: if it is
 * replaced in between, the next reload sees a change and loads again (never
 * misses). All or nothing: on failure nothing is returned and *which (may
 * be NULL) names the file. */
static ph_status load_files(const ph_guard *g, file_id ids[static 3], loaded_files *f,
                            const char **which, ph_diag *diag)
{
    memset(f, 0, sizeof *f);
    if (which != NULL)
        *which = "table";
    ph_status st = stat_id(g->path, &ids[0], diag);
    if (st == PH_OK)
        st = ph_table_open(g->path, &f->table, diag);
    if (st == PH_OK && g->keys_path != NULL) {
        if (which != NULL)
            *which = "grant keys";
        st = stat_id(g->keys_path, &ids[1], diag);
        if (st == PH_OK)
            st = ph_keyring_load_file(g->keys_path, &f->keyring, diag);
    }
    if (st == PH_OK && g->rev_path != NULL) {
        if (which != NULL)
            *which = "revocations";
        st = stat_id(g->rev_path, &ids[2], diag);
        if (st == PH_OK)
            st = ph_revocations_load_file(g->rev_path, &f->revocations, diag);
    }
    if (st != PH_OK)
        loaded_free(f);
    return st;
}

static ph_status guard_new(const ph_guard_options *opts, ph_guard **out, ph_diag *diag)
{
    ph_guard *g = calloc(1, sizeof *g);
    if (g == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    pthread_mutex_init(&g->lock, NULL);
    pthread_mutex_init(&g->reload_lock, NULL);
    if (opts != NULL && opts->dns_servers != NULL) {
        /* Validate now, so a bad list fails open() rather than every check. */
        ares_channel ch = NULL;
        struct ares_options ao;
        int mask = 0;
        ph_resolver_channel_options(&ao, &mask, 0);
        ph_status st = PH_OK;
        if (ares_init_options(&ch, &ao, mask) != ARES_SUCCESS)
            st = ph_diag_set(diag, PH_E_IO, 0, "c-ares cannot start");
        else
            st = ph_resolver_set_servers(ch, opts->dns_servers, diag);
        if (ch != NULL)
            ares_destroy(ch);
        g->dns_servers = st == PH_OK ? strdup(opts->dns_servers) : NULL;
        if (st == PH_OK && g->dns_servers == NULL)
            st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        if (st != PH_OK) {
            ph_guard_close(&g);
            return st;
        }
    }
    g->resolver.servers = g->dns_servers;
    g->resolver.timeout_ms = opts != NULL ? opts->dns_timeout_ms : 0;
    if (opts == NULL || !opts->dns_cache_off) {
        unsigned entries = opts != NULL ? opts->dns_cache_entries : 0;
        unsigned max_ttl = opts != NULL ? opts->dns_cache_max_ttl_s : 0;
        unsigned neg_ttl = opts != NULL ? opts->dns_negative_ttl_s : 0;
        g->resolver.cache_max_ttl_s = max_ttl != 0 ? max_ttl : PH_GUARD_DNS_CACHE_MAX_TTL_S_DEFAULT;
        g->resolver.negative_ttl_s = neg_ttl != 0 ? neg_ttl : PH_GUARD_DNS_NEGATIVE_TTL_S_DEFAULT;
        ph_status st = ph_dns_cache_new(entries != 0 ? entries : PH_GUARD_DNS_CACHE_ENTRIES_DEFAULT,
                                        &g->cache, diag);
        if (st != PH_OK) {
            ph_guard_close(&g);
            return st;
        }
    }
    g->reload_interval_ms = opts != NULL ? opts->reload_interval_ms : 0;
    atomic_init(&g->next_check_ms, ph_monotonic_ms() + g->reload_interval_ms);
    *out = g;
    return PH_OK;
}

ph_status ph_guard_open(const char *table_path, const ph_guard_options *opts, ph_guard **out,
                        ph_diag *diag)
{
    if (table_path == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "guard open: missing argument");
    *out = NULL;
    ph_guard *g = NULL;
    ph_status st = guard_new(opts, &g, diag);
    if (st != PH_OK)
        return st;
    const char *keys = opts != NULL ? opts->grant_keys_path : NULL;
    const char *rev = opts != NULL ? opts->revocations_path : NULL;
    if (rev != NULL && keys == NULL) {
        ph_guard_close(&g);
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "a revocation list needs a grant key file (it revokes grants)");
    }
    g->path = strdup(table_path);
    g->keys_path = keys != NULL ? strdup(keys) : NULL;
    g->rev_path = rev != NULL ? strdup(rev) : NULL;
    if (g->path == NULL || (keys != NULL && g->keys_path == NULL) ||
        (rev != NULL && g->rev_path == NULL)) {
        ph_guard_close(&g);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    loaded_files f;
    file_id ids[3];
    memset(ids, 0, sizeof ids);
    st = load_files(g, ids, &f, NULL, diag);
    if (st == PH_OK) {
        g->loaded = ids[0];
        g->keys_loaded = ids[1];
        g->rev_loaded = ids[2];
        g->current = snapshot_new(&f, 1, diag);
        if (g->current == NULL)
            st = PH_E_NOMEM;
    }
    if (st != PH_OK) {
        ph_guard_close(&g);
        return st;
    }
    *out = g;
    return PH_OK;
}

ph_status ph_guard_from_table(ph_table **table, const ph_guard_options *opts, ph_guard **out,
                              ph_diag *diag)
{
    if (table == NULL || *table == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "guard: missing argument");
    *out = NULL;
    ph_guard *g = NULL;
    ph_status st = guard_new(opts, &g, diag);
    if (st != PH_OK)
        return st;
    g->reload_interval_ms = 0;
    loaded_files f = { .table = *table };
    *table = NULL;
    g->current = snapshot_new(&f, 1, diag);
    if (g->current == NULL) {
        ph_guard_close(&g);
        return PH_E_NOMEM;
    }
    *out = g;
    return PH_OK;
}

void ph_guard_close(ph_guard **g)
{
    if (g == NULL || *g == NULL)
        return;
    ph_guard_snapshot_release(&(*g)->current);
    pthread_mutex_destroy(&(*g)->lock);
    pthread_mutex_destroy(&(*g)->reload_lock);
    free((*g)->path);
    free((*g)->keys_path);
    free((*g)->rev_path);
    free((*g)->dns_servers);
    ph_dns_cache_free(&(*g)->cache);
    free(*g);
    *g = NULL;
}

/* The reload itself; reload_lock held. r may be NULL. */
static ph_status reload_locked(ph_guard *g, ph_reload_report *r, ph_diag *diag)
{
    file_id ids[3];
    memset(ids, 0, sizeof ids);
    ph_diag d;
    memset(&d, 0, sizeof d);
    /* Nothing to do when no file changed (a file that cannot be stat'ed is
     * a change: loading it reports why). */
    bool t_same = stat_id(g->path, &ids[0], &d) == PH_OK && same_id(&ids[0], &g->loaded);
    bool k_same = g->keys_path == NULL ||
                  (stat_id(g->keys_path, &ids[1], &d) == PH_OK && same_id(&ids[1], &g->keys_loaded));
    bool r_same = g->rev_path == NULL ||
                  (stat_id(g->rev_path, &ids[2], &d) == PH_OK && same_id(&ids[2], &g->rev_loaded));
    if (t_same && k_same && r_same) {
        g->last_error.status = PH_OK;
        return PH_OK;
    }
    loaded_files f;
    const char *which = "table";
    ph_status st = load_files(g, ids, &f, &which, &d);
    ph_guard_snapshot *s = NULL;
    if (st == PH_OK) {
        s = snapshot_new(&f, g->current->generation + 1, &d);
        if (s == NULL)
            st = PH_E_NOMEM;
    }
    if (st != PH_OK) {
        d.status = st;
        g->last_error = d;
        if (diag != NULL)
            *diag = d;
        if (r != NULL)
            r->failed_file = which;
        return st;
    }
    if (r != NULL) {
        r->reloaded = true;
        r->table_changed = strcmp(s->policy_id, g->current->policy_id) != 0;
        r->keys_changed = strcmp(s->keyring_id, g->current->keyring_id) != 0;
        r->revocations_changed = !same_id(&ids[2], &g->rev_loaded);
    }
    swap_in(g, s);
    /* A new policy version starts with fresh answers. */
    ph_dns_cache_clear(g->cache);
    g->loaded = ids[0];
    g->keys_loaded = ids[1];
    g->rev_loaded = ids[2];
    g->last_error.status = PH_OK;
    return PH_OK;
}

ph_status ph_guard_reload_policy(ph_guard *g, ph_reload_report *r, ph_diag *diag)
{
    if (r != NULL)
        memset(r, 0, sizeof *r);
    if (g == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "guard reload: missing argument");
    if (g->path == NULL)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "this guard has no table file to reload");
    pthread_mutex_lock(&g->reload_lock);
    ph_status st = reload_locked(g, r, diag);
    pthread_mutex_unlock(&g->reload_lock);
    if (r != NULL)
        ph_guard_policy_info(g, &r->info);
    return st;
}

ph_status ph_guard_reload(ph_guard *g, bool *reloaded, ph_diag *diag)
{
    ph_reload_report r;
    ph_status st = ph_guard_reload_policy(g, &r, diag);
    if (reloaded != NULL)
        *reloaded = r.reloaded;
    return st;
}

void ph_guard_reload_if_due(ph_guard *g)
{
    if (g->reload_interval_ms == 0 || g->path == NULL)
        return;
    int64_t now = ph_monotonic_ms();
    int64_t due = atomic_load_explicit(&g->next_check_ms, memory_order_relaxed);
    if (now < due)
        return;
    /* One thread wins the interval; the others go on with the current table. */
    if (!atomic_compare_exchange_strong(&g->next_check_ms, &due, now + g->reload_interval_ms))
        return;
    if (pthread_mutex_trylock(&g->reload_lock) != 0)
        return;
    reload_locked(g, NULL, NULL);
    pthread_mutex_unlock(&g->reload_lock);
}

ph_status ph_guard_last_reload_error(ph_guard *g, ph_diag *diag)
{
    if (g == NULL)
        return PH_E_INVAL;
    pthread_mutex_lock(&g->reload_lock);
    ph_diag d = g->last_error;
    pthread_mutex_unlock(&g->reload_lock);
    if (d.status != PH_OK && diag != NULL)
        *diag = d;
    return d.status;
}

void ph_guard_policy_id(ph_guard *g, char out[static PH_TABLE_ID_HEX_LEN + 1])
{
    ph_guard_snapshot *s = ph_guard_snapshot_acquire(g);
    snprintf(out, PH_TABLE_ID_HEX_LEN + 1, "%s", s != NULL ? s->policy_id : "");
    ph_guard_snapshot_release(&s);
}

void ph_guard_policy_info(ph_guard *g, ph_policy_info *out)
{
    memset(out, 0, sizeof *out);
    ph_guard_snapshot *s = ph_guard_snapshot_acquire(g);
    if (s == NULL)
        return;
    out->generation = s->generation;
    memcpy(out->policy_id, s->policy_id, sizeof out->policy_id);
    memcpy(out->keyring_id, s->keyring_id, sizeof out->keyring_id);
    out->keys = ph_keyring_count(s->keyring);
    out->revocations = ph_revocations_count(s->revocations);
    ph_guard_snapshot_release(&s);
}

bool ph_guard_lease_revoked(ph_guard *g, const char *tenant, const char *lease, int64_t now)
{
    ph_guard_snapshot *s = ph_guard_snapshot_acquire(g);
    bool revoked = s != NULL && ph_revocations_revoked(s->revocations, tenant, lease, now);
    ph_guard_snapshot_release(&s);
    return revoked;
}

size_t ph_guard_revocations_live(ph_guard *g, int64_t now)
{
    ph_guard_snapshot *s = ph_guard_snapshot_acquire(g);
    size_t n = s != NULL ? ph_revocations_live(s->revocations, now) : 0;
    ph_guard_snapshot_release(&s);
    return n;
}

const ph_resolver_config *ph_guard_resolver_config(const ph_guard *g) { return &g->resolver; }

ph_status ph_guard_resolver_new(ph_guard *g, const ph_resolver_loop *loop, ph_resolver **out,
                                ph_diag *diag)
{
    if (out != NULL)
        *out = NULL;
    if (g == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "guard resolver: missing argument");
    return ph_resolver_new_shared(&g->resolver, loop, g->cache, out, diag);
}

ph_dns_cache *ph_guard_dns_cache(const ph_guard *g) { return g->cache; }
