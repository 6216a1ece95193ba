/* guard.c - the guard handle: the current table snapshot, reference counted,
 * and reloading it when the file is replaced. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "diag-int.h"
#include "monotonic-int.h"
#include "guard-int.h"
#include "pinhole/resolve.h"
#include "resolve-int.h"

/* What identifies one version of the table file. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
} file_id;

struct ph_guard {
    pthread_mutex_t lock;        /* guards `current`: held for a pointer copy only */
    ph_guard_snapshot *current;
    pthread_mutex_t reload_lock; /* one reload at a time; guards loaded, last_error */
    char *path;                  /* NULL for ph_guard_from_table */
    file_id loaded;
    ph_diag last_error;          /* status PH_OK when the last reload worked */
    char *dns_servers;
    ph_resolver_config resolver;
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
    return PH_OK;
}

static bool same_id(const file_id *a, const file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Wraps *table (taken) in a snapshot holding one reference. */
static ph_guard_snapshot *snapshot_new(ph_table **table, ph_diag *diag)
{
    ph_guard_snapshot *s = calloc(1, sizeof *s);
    if (s == NULL) {
        ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        return NULL;
    }
    s->table = *table;
    *table = NULL;
    atomic_init(&s->refs, 1);
    const char *hex = ph_table_policy_id_hex(s->table);
    snprintf(s->policy_id, sizeof s->policy_id, "%s", hex != NULL ? hex : "");
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
    g->path = strdup(table_path);
    if (g->path == NULL) {
        ph_guard_close(&g);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    /* The identity is taken before opening: if the file is replaced in
     * between, the next reload sees a change and loads again (never misses). */
    ph_table *t = NULL;
    st = stat_id(g->path, &g->loaded, diag);
    if (st == PH_OK)
        st = ph_table_open(g->path, &t, diag);
    if (st == PH_OK) {
        g->current = snapshot_new(&t, diag);
        if (g->current == NULL) {
            ph_table_close(&t);
            st = PH_E_NOMEM;
        }
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
    ph_table *t = *table;
    g->current = snapshot_new(&t, diag);
    if (g->current == NULL) {
        ph_guard_close(&g);
        return PH_E_NOMEM;
    }
    *table = NULL;
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
    free((*g)->dns_servers);
    free(*g);
    *g = NULL;
}

/* The reload itself; reload_lock held. */
static ph_status reload_locked(ph_guard *g, bool *reloaded, ph_diag *diag)
{
    file_id id;
    ph_diag d;
    memset(&d, 0, sizeof d);
    ph_status st = stat_id(g->path, &id, &d);
    if (st == PH_OK && same_id(&id, &g->loaded)) {
        g->last_error.status = PH_OK;
        return PH_OK;
    }
    ph_table *t = NULL;
    if (st == PH_OK)
        st = ph_table_open(g->path, &t, &d);
    ph_guard_snapshot *s = NULL;
    if (st == PH_OK) {
        s = snapshot_new(&t, &d);
        if (s == NULL) {
            ph_table_close(&t);
            st = PH_E_NOMEM;
        }
    }
    if (st != PH_OK) {
        d.status = st;
        g->last_error = d;
        if (diag != NULL)
            *diag = d;
        return st;
    }
    swap_in(g, s);
    g->loaded = id;
    g->last_error.status = PH_OK;
    if (reloaded != NULL)
        *reloaded = true;
    return PH_OK;
}

ph_status ph_guard_reload(ph_guard *g, bool *reloaded, ph_diag *diag)
{
    if (reloaded != NULL)
        *reloaded = false;
    if (g == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "guard reload: missing argument");
    if (g->path == NULL)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "this guard has no table file to reload");
    pthread_mutex_lock(&g->reload_lock);
    ph_status st = reload_locked(g, reloaded, diag);
    pthread_mutex_unlock(&g->reload_lock);
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

const ph_resolver_config *ph_guard_resolver_config(const ph_guard *g) { return &g->resolver; }
