/* execd_service.c - pinhole-execd's serving loop (docs/execd.md).
 *
 * One libevent loop (the main thread) owns the listener and every
 * connection; it never blocks. Each request that touches a sandbox becomes a
 * job for a fixed pool of threads (--max-executions) behind a bounded queue
 * (--queue): a request that finds the queue full is answered `busy` at once.
 * A finished job is handed back to the loop (a locked list and an event made
 * active from the thread), which writes the response if the connection is
 * still there.
 *
 * The registry (environments, workspace ids, leases, identities) is shared
 * by the loop and the pool under one mutex, held only for lookups and
 * bookkeeping, never across a sandbox call. An object in use by a job is
 * marked (xd_use); a request whose use it excludes gets `busy` rather than
 * waiting: file operations run beside an execute, a second execute or a
 * destroy does not.
 *
 * Ownership: an xd_conn is owned by the loop; a job holds a reference
 * (conn->job) and the loop frees a closed connection only once its job has
 * come back. The bufferevent is owned by its xd_conn (freed in conn_close).
 * A job owns its request and response JSON. */
#include "execd_service-int.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pinhole/base64.h"
#include "pinhole/sandbox_lease.h"

#define XD_MAX_SERVICES 16

/* ---- logging ---- */

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;

void xd_log(const char *level, const char *event, json_t *extra)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "level", level, "module", "execd", "event", event);
    if (o == NULL)
        return;
    if (extra != NULL)
        json_object_update(o, extra);
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (line == NULL)
        return;
    pthread_mutex_lock(&g_log_mu);
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    pthread_mutex_unlock(&g_log_mu);
    free(line);
}

static _Thread_local json_t *t_warnings; /* the current request's, or NULL */

void xd_sandbox_log(void *ctx, const char *json_line)
{
    (void)ctx;
    json_t *w = json_loads(json_line, 0, NULL);
    if (t_warnings != NULL && w != NULL) {
        json_array_append_new(t_warnings, w);
        return;
    }
    pthread_mutex_lock(&g_log_mu);
    fprintf(stderr, "%s\n", json_line);
    pthread_mutex_unlock(&g_log_mu);
    json_decref(w);
}

static int64_t now_ms(void)
{
    return ph_monotonic_ms();
}

/* ---- the registry ---- */

typedef struct xd_identity {
    char name[XD_IDENTITY_MAX]; /* "uid:<n>" or "cert:<subject>" */
    int conns;
    int64_t gone_since_ms;
    struct xd_identity *next;
} xd_identity;

typedef struct xd_lease xd_lease;

typedef struct xd_env {
    char id[PH_EXECD_ID_MAX];
    char tenant[129];
    char owner[XD_IDENTITY_MAX];
    ph_environment *env;  /* owned, unless lease != NULL (then the lease's) */
    xd_lease *lease;
    /* In use by jobs: file operations share it with each other and with one
     * execute (as in-process: a workspace object and the environment are
     * independent); destroy needs it unused. */
    int users;
    bool executing;
    bool exclusive;
    struct xd_env *next;
} xd_env;

typedef enum xd_use {
    XD_USE_SHARED,    /* WorkspaceFiles */
    XD_USE_EXEC,      /* one execute at a time */
    XD_USE_EXCLUSIVE, /* destroy */
} xd_use;

typedef struct xd_ws {
    char id[PH_EXECD_ID_MAX];
    char tenant[129];
    char owner[XD_IDENTITY_MAX];
    char env_id[PH_EXECD_ID_MAX];
    struct xd_ws *next;
} xd_ws;

struct xd_lease {
    char id[PH_EXECD_ID_MAX];
    char tenant[129];
    char owner[XD_IDENTITY_MAX];
    ph_sandbox_lease *lease;
    ph_env_block tier1;        /* what the worker sent, for every (re)creation */
    int64_t hold_seconds;
    bool busy;
    bool held;
    int64_t hold_client_start; /* the worker's clock at hold_begin */
    int64_t hold_daemon_start; /* ours at the same moment */
    char env_id[PH_EXECD_ID_MAX]; /* its current environment's record, "" if none */
    struct xd_lease *next;
};

typedef struct xd_svc {
    int64_t cap_ms;
    ph_execution_service *svc;
} xd_svc;

static const xd_config *g_cfg;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static xd_identity *g_identities;
static xd_env *g_envs;
static xd_ws *g_wss;
static xd_lease *g_leases;
static size_t g_live;     /* sandboxes that exist or are being created */
static xd_svc g_svcs[XD_MAX_SERVICES];
static size_t g_svc_count;
static unsigned long g_requests, g_busy_total, g_errors_total;

/* Latency histograms of the three ExecutionEnvironment operations
 * (milliseconds; Prometheus cumulative buckets are summed when printed). */
static const int64_t g_bucket_ms[] = {1, 5, 10, 50, 100, 500, 1000, 5000, 30000, 120000};
#define XD_BUCKETS (sizeof g_bucket_ms / sizeof g_bucket_ms[0])
static const char *const g_hist_ops[] = {"environment.create", "environment.execute",
                                         "environment.destroy"};
#define XD_HIST_OPS (sizeof g_hist_ops / sizeof g_hist_ops[0])
static unsigned long g_hist[XD_HIST_OPS][XD_BUCKETS + 1]; /* last: over every bucket */
static unsigned long g_hist_sum_ms[XD_HIST_OPS];

static void observe(const char *op, int64_t ms)
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
static void print_histograms(char *out, size_t cap)
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

static void new_id(const char *prefix, char out[PH_EXECD_ID_MAX])
{
    uint8_t r[8] = {0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        abort(); /* no randomness: ids would be guessable */
    snprintf(out, PH_EXECD_ID_MAX, "%s%02x%02x%02x%02x%02x%02x%02x%02x", prefix, r[0], r[1], r[2],
             r[3], r[4], r[5], r[6], r[7]);
}

/* Under g_mu. The service for a connection's cap (created on first use). */
static ph_execution_service *service_for(int64_t cap_ms, ph_diag *diag)
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
                            .log = xd_sandbox_log};
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

static xd_env *env_find(const char *id, const char *owner, const char *tenant)
{
    for (xd_env *e = g_envs; id && e; e = e->next)
        if (strcmp(e->id, id) == 0 && owned(owner, tenant, e->owner, e->tenant))
            return e;
    return NULL;
}

static xd_lease *lease_find(const char *id, const char *owner, const char *tenant)
{
    for (xd_lease *l = g_leases; id && l; l = l->next)
        if (strcmp(l->id, id) == 0 && owned(owner, tenant, l->owner, l->tenant))
            return l;
    return NULL;
}

static xd_ws *ws_find(const char *id, const char *owner, const char *tenant)
{
    for (xd_ws *w = g_wss; id && w; w = w->next)
        if (strcmp(w->id, id) == 0 && owned(owner, tenant, w->owner, w->tenant))
            return w;
    return NULL;
}

/* Under g_mu: unlinks e (not freed). */
static void env_unlink(xd_env *e)
{
    for (xd_env **p = &g_envs; *p; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            return;
        }
    }
}

static void lease_unlink(xd_lease *l)
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
static void lease_reconcile(xd_lease *l)
{
    if (l->env_id[0] && (l->lease == NULL || !ph_sandbox_lease_has_sandbox(l->lease))) {
        xd_env *e = env_find(l->env_id, l->owner, l->tenant);
        if (e != NULL) {
            env_unlink(e);
            free(e);
        }
        g_live--;
        l->env_id[0] = '\0';
    }
}

/* ---- jobs and the pool ---- */

typedef struct xd_conn xd_conn;
typedef struct xd_job xd_job;
typedef void xd_job_fn(xd_job *job);

struct xd_job {
    xd_conn *conn;       /* NULL for the daemon's own jobs (holds, reaping) */
    char owner[XD_IDENTITY_MAX];
    int64_t cap_ms;
    json_t *req;
    json_t *resp;
    char op[40];
    xd_job_fn *fn;
    pid_t tid;           /* the pool thread running it, 0 before (under g_mu) */
    bool cancelled;      /* its connection went away */
    int64_t start_ms;
    xd_job *next;
};

struct xd_conn {
    struct bufferevent *bev;
    xd_identity *ident;
    int64_t cap_ms;
    xd_job *job;         /* in flight, or NULL */
    bool dead;           /* closed while its job runs: freed when it returns */
    bool close_after_write;
    bool unauthenticated; /* SO_PEERCRED not allowed: one refusal, then closed */
    bool tls_pending;     /* TLS: identified once the handshake verified a certificate */
    size_t backlog;       /* output not yet written to the peer (atomic: a streaming
                           * job reads it to wait for a slow peer) */
    struct xd_conn *prev, *next; /* g_conns: every live connection */
};

static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_pool_cv = PTHREAD_COND_INITIALIZER;
static xd_job *g_queue_head, *g_queue_tail, *g_done;
static size_t g_queued, g_running;
static bool g_quit;
static struct event *g_done_ev;
static struct event_base *g_base;
static pthread_t *g_threads;

static void job_free(xd_job *job)
{
    json_decref(job->req);
    json_decref(job->resp);
    free(job);
}

static void enqueue(xd_job *job)
{
    job->next = NULL;
    if (g_queue_tail)
        g_queue_tail->next = job;
    else
        g_queue_head = job;
    g_queue_tail = job;
    g_queued++;
    pthread_cond_signal(&g_pool_cv);
}

static void *pool_main(void *arg)
{
    (void)arg;
    pid_t tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&g_pool_mu);
    for (;;) {
        while (!g_quit && g_queue_head == NULL)
            pthread_cond_wait(&g_pool_cv, &g_pool_mu);
        if (g_queue_head == NULL)
            break;
        xd_job *job = g_queue_head;
        g_queue_head = job->next;
        if (g_queue_head == NULL)
            g_queue_tail = NULL;
        g_queued--;
        g_running++;
        pthread_mutex_unlock(&g_pool_mu);

        pthread_mutex_lock(&g_mu);
        job->tid = tid;
        bool cancelled = job->cancelled;
        pthread_mutex_unlock(&g_mu);
        if (g_quit || cancelled)
            job->resp = ph_wire_error(g_quit ? "shutting_down" : "io", "not run");
        else
            job->fn(job);
        pthread_mutex_lock(&g_mu);
        job->tid = 0;
        pthread_mutex_unlock(&g_mu);

        pthread_mutex_lock(&g_pool_mu);
        g_running--;
        job->next = g_done;
        g_done = job;
        pthread_mutex_unlock(&g_pool_mu);
        event_active(g_done_ev, EV_READ, 0);
        pthread_mutex_lock(&g_pool_mu);
    }
    pthread_mutex_unlock(&g_pool_mu);
    return NULL;
}

/* Kills what the pool thread tid started (its direct children: the fake
 * mechanism's PID-namespace init or plain session leader, the runtime's
 * client), so a blocked execute returns at once. Under g_mu. */
static void kill_children_of(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)tid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
        if (pid <= 0)
            continue;
        (void)kill(pid, SIGKILL);
        if (getsid(pid) == pid)
            ph_kill_session(pid);
    }
    fclose(f);
}

/* ---- request helpers (on a pool thread) ---- */

static json_t *ok_resp(void)
{
    return json_pack("{s:b}", "ok", 1);
}

static json_t *diag_resp(ph_status st, const ph_diag *d)
{
    return ph_wire_error(ph_wire_error_code(st), d->message[0] ? d->message : ph_strerror(st));
}

static json_t *not_found(const char *what)
{
    char msg[64];
    snprintf(msg, sizeof msg, "no such %s", what);
    return ph_wire_error("not_found", msg);
}

static json_t *busy(const char *why)
{
    __atomic_add_fetch(&g_busy_total, 1, __ATOMIC_RELAXED);
    return ph_wire_error("busy", why);
}

/* Decodes the spec fields of a create or lease.open request. The strings
 * point into req. tier1 gets the passthrough pairs. NULL or an error. */
static json_t *get_spec(const json_t *req, ph_environment_spec *spec, ph_env_block *tier1)
{
    memset(spec, 0, sizeof *spec);
    spec->tenant = ph_wire_str(req, "tenant");
    spec->lease = ph_wire_str(req, "lease");
    const char *mech = ph_wire_str(req, "mechanism");
    ph_diag d = {0};
    if (mech == NULL)
        spec->mechanism = g_cfg->mechanism;
    else if (ph_sandbox_mechanism_from_name(mech, &spec->mechanism, &d) != PH_OK)
        return ph_wire_error("invalid", d.message);
    if (!ph_wire_get_limits(req, &spec->limits))
        return ph_wire_error("invalid", "limits: every field is an integer");
    json_t *net = json_object_get(req, "network");
    if (net != NULL) {
        bool ok = json_is_object(net);
        spec->network.grant_token = ph_wire_str(net, "grant_token");
        int64_t port = ph_wire_int(net, "proxy_port", 0, &ok);
        if (!ok || port < 0 || port > 65535)
            return ph_wire_error("invalid", "network.proxy_port must be 0-65535");
        spec->network.proxy_port = (uint16_t)port;
        if (spec->network.grant_token != NULL) {
            if (g_cfg->proxy_socket == NULL)
                return ph_wire_error("unsupported",
                                     "this service has no proxy socket (--proxy-socket)");
            spec->network.proxy_socket_path = g_cfg->proxy_socket;
        }
    }
    json_t *pass = json_object_get(req, "passthrough");
    if (pass != NULL && (!json_is_array(pass) || json_array_size(pass) > 256))
        return ph_wire_error("invalid", "passthrough must be an array of at most 256");
    for (size_t i = 0; pass && i < json_array_size(pass); i++) {
        json_t *e = json_array_get(pass, i);
        const char *name = ph_wire_str(e, "name");
        uint8_t *value;
        size_t len;
        if (name == NULL || ph_wire_get_bytes(e, "value", "value_base64", &value, &len) != 0)
            return ph_wire_error("invalid", "passthrough[]: name and value");
        bool bad = memchr(value, '\0', len) != NULL || strchr(name, '=') != NULL;
        ph_status st = bad ? PH_E_INVAL : ph_env_set(tier1, name, (const char *)value);
        free(value);
        if (st != PH_OK)
            return ph_wire_error("invalid", "passthrough[]: a name or value is malformed");
    }
    return NULL;
}

/* Under g_mu: reserves one sandbox of --max-sandboxes. */
static bool reserve_sandbox(void)
{
    if (g_live >= g_cfg->max_sandboxes)
        return false;
    g_live++;
    return true;
}

/* ---- ExecutionEnvironment ---- */

static void op_env_create(xd_job *job)
{
    ph_environment_spec spec;
    ph_env_block tier1 = {0};
    job->resp = get_spec(job->req, &spec, &tier1);
    if (job->resp != NULL) {
        ph_env_block_clear(&tier1);
        return;
    }
    ph_diag d = {0};
    pthread_mutex_lock(&g_mu);
    ph_execution_service *svc = service_for(job->cap_ms, &d);
    bool reserved = svc != NULL && reserve_sandbox();
    pthread_mutex_unlock(&g_mu);
    if (svc == NULL) {
        job->resp = diag_resp(d.status ? d.status : PH_E_IO, &d);
        ph_env_block_clear(&tier1);
        return;
    }
    if (!reserved) {
        job->resp = busy("the service is at --max-sandboxes");
        ph_env_block_clear(&tier1);
        return;
    }
    json_t *warnings = json_array();
    ph_environment *env = NULL;
    t_warnings = warnings;
    ph_env_tier1_supplied = &tier1;
    ph_status st = ph_environment_create(svc, &spec, &env, &d);
    ph_env_tier1_supplied = NULL;
    t_warnings = NULL;
    ph_env_block_clear(&tier1);
    if (st == PH_OK && ph_environment_persist_spec(env, &d) != PH_OK) {
        st = d.status;
        ph_environment_destroy(&env);
    }
    xd_env *e = st == PH_OK ? calloc(1, sizeof *e) : NULL;
    if (st == PH_OK && e == NULL) {
        ph_environment_destroy(&env);
        st = ph_diag_set(&d, PH_E_NOMEM, 0, "out of memory");
    }
    pthread_mutex_lock(&g_mu);
    if (st != PH_OK || e == NULL) {
        g_live--;
    } else {
        snprintf(e->id, sizeof e->id, "%s", ph_environment_id(env));
        snprintf(e->tenant, sizeof e->tenant, "%s", spec.tenant);
        snprintf(e->owner, sizeof e->owner, "%s", job->owner);
        e->env = env;
        e->next = g_envs;
        g_envs = e;
    }
    pthread_mutex_unlock(&g_mu);
    if (st != PH_OK) {
        json_decref(warnings);
        job->resp = diag_resp(st, &d);
        return;
    }
    job->resp = json_pack("{s:b, s:s, s:o}", "ok", 1, "environment", e->id, "warnings", warnings);
}

/* Takes the environment of the request for this job for use u. NULL and
 * job->resp set when there is none or it is in a use that excludes u. */
static xd_env *take_env(xd_job *job, const char *id, xd_use u)
{
    const char *tenant = ph_wire_str(job->req, "tenant");
    pthread_mutex_lock(&g_mu);
    xd_env *e = env_find(id, job->owner, tenant);
    if (e == NULL)
        job->resp = not_found("environment");
    else if ((e->lease && e->lease->busy) || e->exclusive ||
             (u == XD_USE_EXEC && e->executing) || (u == XD_USE_EXCLUSIVE && e->users > 0))
        job->resp = busy("the environment is serving another request");
    else {
        e->users++;
        e->executing |= u == XD_USE_EXEC;
        e->exclusive = u == XD_USE_EXCLUSIVE;
    }
    pthread_mutex_unlock(&g_mu);
    return job->resp ? NULL : e;
}

static void release_env(xd_env *e, xd_use u)
{
    pthread_mutex_lock(&g_mu);
    e->users--;
    if (u == XD_USE_EXEC)
        e->executing = false;
    e->exclusive = false;
    pthread_mutex_unlock(&g_mu);
}

static void op_env_execute(xd_job *job)
{
    char **argv = NULL;
    uint8_t *cwd = NULL, *in = NULL;
    size_t cwd_len = 0, in_len = 0;
    bool ok = true;
    ph_execution_command cmd = {0};
    cmd.timeout_seconds = ph_wire_int(job->req, "timeout_seconds", PH_SANDBOX_UNSET, &ok);
    cmd.run_budget_ms = ph_wire_int(job->req, "run_budget_ms", PH_SANDBOX_UNSET, &ok);
    int cwd_rc = ph_wire_get_bytes(job->req, "cwd", "cwd_base64", &cwd, &cwd_len);
    int in_rc = ph_wire_get_bytes(job->req, "stdin", "stdin_base64", &in, &in_len);
    if (!ok || cwd_rc < 0 || in_rc < 0 || ph_wire_argv(json_object_get(job->req, "argv"),
                                                       &argv) != 0 ||
        (cwd && memchr(cwd, '\0', cwd_len))) {
        job->resp = ph_wire_error("invalid", "argv, cwd, stdin, timeout_seconds, run_budget_ms");
        goto out;
    }
    xd_env *e = take_env(job, ph_wire_str(job->req, "environment"), XD_USE_EXEC);
    if (e == NULL)
        goto out;
    cmd.argv = (const char *const *)argv;
    cmd.cwd = (const char *)cwd;
    cmd.stdin_data = in;
    cmd.stdin_len = in_len;
    ph_execution_result *r = NULL;
    ph_diag d = {0};
    ph_status st = ph_environment_execute(e->env, &cmd, &r, &d);
    release_env(e, XD_USE_EXEC);
    if (st != PH_OK) {
        job->resp = diag_resp(st, &d);
        goto out;
    }
    json_t *res = ph_wire_result(r);
    ph_execution_result_free(&r);
    job->resp = res ? json_pack("{s:b, s:o}", "ok", 1, "result", res)
                    : ph_wire_error("nomem", "out of memory");
out:
    ph_wire_argv_free(argv);
    free(cwd);
    free(in);
}

static void op_env_destroy(xd_job *job)
{
    xd_env *e = take_env(job, ph_wire_str(job->req, "environment"), XD_USE_EXCLUSIVE);
    if (e == NULL)
        return;
    if (e->lease != NULL) {
        release_env(e, XD_USE_EXCLUSIVE);
        job->resp = ph_wire_error("invalid", "a lease's environment ends with the lease");
        return;
    }
    pthread_mutex_lock(&g_mu);
    env_unlink(e);
    pthread_mutex_unlock(&g_mu);
    ph_environment_destroy(&e->env);
    free(e);
    pthread_mutex_lock(&g_mu);
    g_live--;
    pthread_mutex_unlock(&g_mu);
    job->resp = ok_resp();
}

/* A new workspace id on environment record e (under g_mu). */
static json_t *new_workspace(const char *owner, const char *tenant, const char *env_id)
{
    xd_ws *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ph_wire_error("nomem", "out of memory");
    new_id("ws-", w->id);
    snprintf(w->tenant, sizeof w->tenant, "%s", tenant);
    snprintf(w->owner, sizeof w->owner, "%s", owner);
    snprintf(w->env_id, sizeof w->env_id, "%s", env_id);
    w->next = g_wss;
    g_wss = w;
    return json_pack("{s:b, s:s}", "ok", 1, "workspace", w->id);
}

static void op_env_workspace(xd_job *job)
{
    const char *tenant = ph_wire_str(job->req, "tenant");
    pthread_mutex_lock(&g_mu);
    xd_env *e = env_find(ph_wire_str(job->req, "environment"), job->owner, tenant);
    job->resp = e ? new_workspace(job->owner, tenant, e->id) : not_found("environment");
    pthread_mutex_unlock(&g_mu);
}

/* ---- WorkspaceFiles ---- */

#define XD_STREAM_BACKLOG (4u * 1024 * 1024) /* output queued before a stream waits */
#define XD_READ_WHOLE_MAX (64 * 1024 * 1024)  /* workspace.read without chunk_bytes */

/* Frames of streamed responses, from pool threads to the loop (under
 * g_pool_mu, flushed by on_done before the jobs that finished, so a job's
 * frames always precede its final response). Only the loop touches a
 * bufferevent. */
typedef struct xd_frame {
    xd_conn *conn;
    uint8_t *data;
    size_t len;
    struct xd_frame *next;
} xd_frame;
static xd_frame *g_frames_head, *g_frames_tail;

/* Queues one intermediate frame of job's streamed response and waits while
 * the peer is slow. false when the connection is gone. */
static bool stream_send(xd_job *job, json_t *frame_obj)
{
    xd_frame *fr = calloc(1, sizeof *fr);
    bool ok = fr && frame_obj && ph_wire_frame(frame_obj, &fr->data, &fr->len) == 0;
    json_decref(frame_obj);
    if (!ok) {
        free(fr);
        return false;
    }
    for (;;) {
        pthread_mutex_lock(&g_mu);
        bool gone = job->cancelled;
        pthread_mutex_unlock(&g_mu);
        if (gone) {
            free(fr->data);
            free(fr);
            return false;
        }
        if (__atomic_load_n(&job->conn->backlog, __ATOMIC_ACQUIRE) < XD_STREAM_BACKLOG)
            break;
        usleep(1000);
    }
    fr->conn = job->conn;
    __atomic_add_fetch(&job->conn->backlog, fr->len, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&g_pool_mu);
    if (g_frames_tail)
        g_frames_tail->next = fr;
    else
        g_frames_head = fr;
    g_frames_tail = fr;
    pthread_mutex_unlock(&g_pool_mu);
    event_active(g_done_ev, EV_READ, 0);
    return true;
}

/* workspace.read with chunk_bytes: the header frame (stat), one frame per
 * chunk, and the final response; memory stays at one chunk whatever the
 * file's size. */
static json_t *stream_file(xd_job *job, int fd, const ph_ws_stat *st, size_t chunk)
{
    if (!stream_send(job, json_pack("{s:b, s:b, s:o}", "ok", 1, "stream", 1, "stat",
                                    ph_wire_stat(st))))
        return ph_wire_error("io", "the connection is gone");
    uint8_t *buf = malloc(chunk);
    uint64_t sent = 0;
    if (buf == NULL)
        return ph_wire_error("nomem", "out of memory");
    while (sent < st->size) {
        size_t want = st->size - sent < chunk ? (size_t)(st->size - sent) : chunk;
        ssize_t n = read(fd, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* shrunk since: send what is there */
        /* Chunks are always base64: a chunk boundary can split a UTF-8
         * sequence, so "text when valid" would not round-trip. */
        size_t cap = ph_b64_encoded_len((size_t)n, PH_B64_STD_PAD) + 1;
        char *b64 = malloc(cap);
        json_t *c = NULL;
        if (b64 != NULL) {
            ph_b64_encode(buf, (size_t)n, PH_B64_STD_PAD, b64, cap);
            c = json_pack("{s:s}", "chunk_base64", b64);
            free(b64);
        }
        if (c == NULL || !stream_send(job, c)) {
            free(buf);
            return ph_wire_error("io", "the connection is gone");
        }
        sent += (uint64_t)n;
    }
    free(buf);
    return json_pack("{s:b, s:b, s:I}", "ok", 1, "end", 1, "size", (json_int_t)sent);
}

static void op_workspace(xd_job *job)
{
    const char *tenant = ph_wire_str(job->req, "tenant");
    const char *op = job->op + strlen("workspace.");
    if (strcmp(op, "close") == 0) {
        pthread_mutex_lock(&g_mu);
        xd_ws *w = ws_find(ph_wire_str(job->req, "workspace"), job->owner, tenant);
        for (xd_ws **p = &g_wss; w && *p; p = &(*p)->next) {
            if (*p == w) {
                *p = w->next;
                break;
            }
        }
        pthread_mutex_unlock(&g_mu);
        job->resp = w ? ok_resp() : not_found("workspace");
        free(w);
        return;
    }
    char env_id[PH_EXECD_ID_MAX] = "";
    pthread_mutex_lock(&g_mu);
    xd_ws *w = ws_find(ph_wire_str(job->req, "workspace"), job->owner, tenant);
    if (w)
        memcpy(env_id, w->env_id, sizeof env_id);
    pthread_mutex_unlock(&g_mu);
    if (w == NULL) {
        job->resp = not_found("workspace");
        return;
    }
    uint8_t *path = NULL, *data = NULL;
    size_t path_len = 0, data_len = 0;
    bool ok = true;
    int64_t max = ph_wire_int(job->req, strcmp(op, "list") ? "max_bytes" : "max_entries",
                              16 * 1024 * 1024, &ok);
    int64_t mode = ph_wire_int(job->req, "mode", 0644, &ok);
    int prc = ph_wire_get_bytes(job->req, "path", "path_base64", &path, &path_len);
    int drc = ph_wire_get_bytes(job->req, "data", "data_base64", &data, &data_len);
    if (!ok || prc != 0 || drc < 0 || max < 0 || memchr(path, '\0', path_len)) {
        job->resp = ph_wire_error("invalid", "path, data, max_bytes, max_entries, mode");
        goto out;
    }
    /* The environment it was opened on is gone: every file is gone. */
    xd_env *e = take_env(job, env_id, XD_USE_SHARED);
    if (e == NULL) {
        if (strstr(ph_wire_str(job->resp, "error"), "not_found")) {
            json_decref(job->resp);
            job->resp = ph_wire_error("not_found", "the workspace's sandbox no longer exists");
        }
        goto out;
    }
    ph_workspace *ws = NULL;
    ph_diag d = {0};
    ph_status st = ph_environment_workspace(e->env, &ws, &d);
    json_t *resp = NULL;
    if (st == PH_OK && strcmp(op, "stat") == 0) {
        ph_ws_stat s;
        st = ph_workspace_stat(ws, (const char *)path, &s, &d);
        if (st == PH_OK)
            resp = json_pack("{s:b, s:o}", "ok", 1, "stat", ph_wire_stat(&s));
    } else if (st == PH_OK && strcmp(op, "read") == 0) {
        int fd = -1;
        ph_ws_stat s;
        bool chunk_ok = true;
        int64_t chunk = ph_wire_int(job->req, "chunk_bytes", 0, &chunk_ok);
        /* A whole-file answer is one frame held in memory: bounded; larger
         * files are read with chunk_bytes. */
        if (chunk == 0 && max > XD_READ_WHOLE_MAX)
            max = XD_READ_WHOLE_MAX;
        if (!chunk_ok || chunk < 0 || chunk > 8 * 1024 * 1024)
            st = ph_diag_set(&d, PH_E_INVAL, 0, "chunk_bytes must be 1..8388608");
        else
            st = ph_workspace_open_read(ws, (const char *)path, (uint64_t)max, &fd, &s, &d);
        if (st == PH_OK && chunk > 0) {
            resp = stream_file(job, fd, &s, (size_t)chunk);
            close(fd);
            fd = -1;
        }
        uint8_t *buf = st == PH_OK && resp == NULL ? malloc(s.size + 1) : NULL;
        size_t got = 0;
        if (st == PH_OK && resp == NULL && buf == NULL)
            st = ph_diag_set(&d, PH_E_NOMEM, 0, "out of memory");
        while (st == PH_OK && buf && got < s.size) {
            ssize_t n = read(fd, buf + got, s.size - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break; /* shrunk since: send what is there */
            got += (size_t)n;
        }
        if (fd >= 0)
            close(fd);
        if (st == PH_OK && buf) {
            s.size = got;
            resp = json_pack("{s:b, s:o}", "ok", 1, "stat", ph_wire_stat(&s));
            if (resp && ph_json_set_bytes(resp, "data", "data_base64", buf, got) != 0) {
                json_decref(resp);
                resp = NULL;
            }
        }
        free(buf);
    } else if (st == PH_OK && strcmp(op, "write") == 0) {
        if (drc != 0)
            st = ph_diag_set(&d, PH_E_INVAL, 0, "workspace.write needs data or data_base64");
        else
            st = ph_workspace_write(ws, (const char *)path, data, data_len,
                                    (uint32_t)mode & 07777, &d);
        if (st == PH_OK)
            resp = ok_resp();
    } else if (st == PH_OK && strcmp(op, "list") == 0) {
        ph_ws_list *list = NULL;
        st = ph_workspace_list(ws, (const char *)path, (size_t)max, &list, &d);
        json_t *arr = st == PH_OK ? json_array() : NULL;
        for (size_t i = 0; arr && i < list->count; i++) {
            json_t *en = ph_wire_stat(&list->entries[i].st);
            if (en == NULL || ph_json_set_bytes(en, "name", "name_base64", list->entries[i].name,
                                                strlen(list->entries[i].name)) != 0 ||
                json_array_append_new(arr, en) != 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
        if (arr)
            resp = json_pack("{s:b, s:o, s:b}", "ok", 1, "entries", arr, "truncated",
                             list->truncated);
        ph_ws_list_free(&list);
    } else if (st == PH_OK) {
        st = ph_diag_set(&d, PH_E_INVAL, 0, "unknown operation");
    }
    ph_workspace_close(&ws);
    release_env(e, XD_USE_SHARED);
    job->resp = st != PH_OK ? diag_resp(st, &d)
                            : resp ? resp : ph_wire_error("nomem", "out of memory");
    if (st != PH_OK)
        json_decref(resp);
out:
    free(path);
    free(data);
}

/* ---- leases ---- */

static void op_lease_open(xd_job *job)
{
    ph_environment_spec spec;
    ph_env_block tier1 = {0};
    bool ok = true;
    int64_t hold = ph_wire_int(job->req, "approval_hold_seconds", 0, &ok);
    job->resp = get_spec(job->req, &spec, &tier1);
    if (job->resp == NULL && !ok)
        job->resp = ph_wire_error("invalid", "approval_hold_seconds must be an integer");
    ph_diag d = {0};
    xd_lease *l = job->resp ? NULL : calloc(1, sizeof *l);
    if (job->resp == NULL && l == NULL)
        job->resp = ph_wire_error("nomem", "out of memory");
    pthread_mutex_lock(&g_mu);
    ph_execution_service *svc = l ? service_for(job->cap_ms, &d) : NULL;
    pthread_mutex_unlock(&g_mu);
    if (l != NULL && svc == NULL)
        job->resp = diag_resp(d.status ? d.status : PH_E_IO, &d);
    /* The lease copies the spec; tenant and lease are validated by the first
     * create, so check them now for an error at open. */
    ph_status st = PH_OK;
    if (job->resp == NULL) {
        st = ph_sandbox_lease_open(svc, &spec, hold, &l->lease, &d);
        if (st == PH_OK && (spec.tenant == NULL || strlen(spec.tenant) > 128))
            st = ph_diag_set(&d, PH_E_INVAL, 0, "spec.tenant must be 1-128 of [A-Za-z0-9._-]");
        if (st != PH_OK)
            job->resp = diag_resp(st, &d);
    }
    if (job->resp != NULL) {
        if (l)
            ph_sandbox_lease_end(&l->lease);
        free(l);
        ph_env_block_clear(&tier1);
        return;
    }
    new_id("lse-", l->id);
    snprintf(l->tenant, sizeof l->tenant, "%s", spec.tenant);
    snprintf(l->owner, sizeof l->owner, "%s", job->owner);
    l->tier1 = tier1;
    l->hold_seconds = hold;
    pthread_mutex_lock(&g_mu);
    l->next = g_leases;
    g_leases = l;
    pthread_mutex_unlock(&g_mu);
    job->resp = json_pack("{s:b, s:s}", "ok", 1, "handle", l->id);
}

/* Under g_mu: whether a job is using the lease's environment (a lease
 * operation may destroy it). */
static bool lease_env_in_use(const xd_lease *l)
{
    const xd_env *e = l->env_id[0] ? env_find(l->env_id, l->owner, l->tenant) : NULL;
    return e != NULL && e->users > 0;
}

static xd_lease *take_lease(xd_job *job)
{
    const char *tenant = ph_wire_str(job->req, "tenant");
    pthread_mutex_lock(&g_mu);
    xd_lease *l = lease_find(ph_wire_str(job->req, "handle"), job->owner, tenant);
    if (l == NULL)
        job->resp = not_found("lease");
    else if (l->busy || lease_env_in_use(l))
        job->resp = busy("the lease is serving another request");
    else
        l->busy = true;
    pthread_mutex_unlock(&g_mu);
    return job->resp ? NULL : l;
}

static void release_lease(xd_lease *l)
{
    pthread_mutex_lock(&g_mu);
    lease_reconcile(l);
    l->busy = false;
    pthread_mutex_unlock(&g_mu);
}

/* Ends a lease this job holds (busy): out of the registry, its sandbox
 * destroyed (outside the mutex), its record freed. */
static void lease_destroy(xd_lease *l)
{
    pthread_mutex_lock(&g_mu);
    lease_unlink(l);
    pthread_mutex_unlock(&g_mu);
    ph_sandbox_lease_end(&l->lease);
    pthread_mutex_lock(&g_mu);
    lease_reconcile(l);
    pthread_mutex_unlock(&g_mu);
    ph_env_block_clear(&l->tier1);
    free(l);
}

/* The lease's environment, created now if needed (lease busy). */
static ph_status lease_env(xd_lease *l, json_t *warnings, ph_environment **env, ph_diag *d)
{
    bool fresh = !ph_sandbox_lease_has_sandbox(l->lease);
    if (fresh) {
        pthread_mutex_lock(&g_mu);
        bool ok = reserve_sandbox();
        pthread_mutex_unlock(&g_mu);
        if (!ok)
            return ph_diag_set(d, PH_E_LIMIT, 0, "busy: the service is at --max-sandboxes");
    }
    t_warnings = warnings;
    ph_env_tier1_supplied = &l->tier1;
    ph_status st = ph_sandbox_lease_environment(l->lease, env, d);
    ph_env_tier1_supplied = NULL;
    t_warnings = NULL;
    if (st == PH_OK && fresh && ph_environment_persist_spec(*env, d) != PH_OK)
        st = d->status;
    pthread_mutex_lock(&g_mu);
    if (fresh && st != PH_OK && !ph_sandbox_lease_has_sandbox(l->lease))
        g_live--;
    if (fresh && ph_sandbox_lease_has_sandbox(l->lease)) {
        xd_env *e = calloc(1, sizeof *e);
        if (e != NULL) {
            snprintf(e->id, sizeof e->id, "%s", ph_environment_id(*env));
            snprintf(e->tenant, sizeof e->tenant, "%s", l->tenant);
            snprintf(e->owner, sizeof e->owner, "%s", l->owner);
            e->env = *env;
            e->lease = l;
            e->next = g_envs;
            g_envs = e;
            memcpy(l->env_id, e->id, sizeof l->env_id);
        } else {
            st = ph_diag_set(d, PH_E_NOMEM, 0, "out of memory");
        }
    }
    pthread_mutex_unlock(&g_mu);
    return st;
}

static void op_lease(xd_job *job)
{
    const char *op = job->op + strlen("lease.");
    xd_lease *l = take_lease(job);
    if (l == NULL)
        return;
    ph_diag d = {0};
    bool ok = true;
    int64_t now = ph_wire_int(job->req, "now_seconds", 0, &ok);
    if (strcmp(op, "environment") == 0 || strcmp(op, "workspace") == 0) {
        json_t *warnings = json_array();
        ph_environment *env = NULL;
        ph_status st = lease_env(l, warnings, &env, &d);
        if (st != PH_OK) {
            json_decref(warnings);
            job->resp = strncmp(d.message, "busy:", 5) == 0 ? busy(d.message + 6)
                                                            : diag_resp(st, &d);
        } else if (op[0] == 'e') {
            job->resp = json_pack("{s:b, s:s, s:o}", "ok", 1, "environment",
                                  ph_environment_id(env), "warnings", warnings);
        } else {
            pthread_mutex_lock(&g_mu);
            job->resp = new_workspace(l->owner, l->tenant, ph_environment_id(env));
            pthread_mutex_unlock(&g_mu);
            json_object_set_new(job->resp, "warnings", warnings);
        }
    } else if (strcmp(op, "status") == 0) {
        job->resp = json_pack("{s:b, s:b}", "ok", 1, "has_sandbox",
                              ph_sandbox_lease_has_sandbox(l->lease));
    } else if (!ok) {
        job->resp = ph_wire_error("invalid", "now_seconds must be an integer");
    } else if (strcmp(op, "hold_begin") == 0) {
        if (!l->held) {
            l->held = true;
            l->hold_client_start = now;
            l->hold_daemon_start = now_ms();
        }
        ph_sandbox_lease_hold_begin(l->lease, now);
        job->resp = ok_resp();
    } else if (strcmp(op, "hold_tick") == 0 || strcmp(op, "hold_end") == 0) {
        bool end = strcmp(op, "hold_end") == 0;
        bool destroyed = end ? ph_sandbox_lease_hold_end(l->lease, now)
                             : ph_sandbox_lease_hold_tick(l->lease, now);
        if (end)
            l->held = false;
        job->resp = json_pack("{s:b, s:b}", "ok", 1, "destroyed", destroyed);
    } else if (strcmp(op, "end") == 0) {
        lease_destroy(l);
        job->resp = ok_resp();
        return;
    } else {
        job->resp = ph_wire_error("invalid", "unknown operation");
    }
    release_lease(l);
}

/* ---- the daemon's own jobs ---- */

/* Destroys everything owned by job->owner that is not busy (owner gone), or
 * ticks held leases (owner ""). */
static void op_maintain(xd_job *job)
{
    for (;;) {
        xd_env *victim = NULL;
        xd_lease *lvictim = NULL;
        int64_t lease_now = 0;
        pthread_mutex_lock(&g_mu);
        for (xd_lease *l = g_leases; l && !lvictim; l = l->next) {
            if (l->busy || lease_env_in_use(l))
                continue;
            if (job->owner[0] ? strcmp(l->owner, job->owner) == 0 : l->held) {
                lease_now = l->hold_client_start + (now_ms() - l->hold_daemon_start) / 1000;
                if (job->owner[0] || (l->env_id[0] &&
                                      lease_now - l->hold_client_start >= l->hold_seconds)) {
                    lvictim = l;
                    l->busy = true;
                }
            }
        }
        for (xd_env *e = g_envs; job->owner[0] && e && !lvictim && !victim; e = e->next) {
            if (e->users == 0 && e->lease == NULL && strcmp(e->owner, job->owner) == 0) {
                victim = e;
                env_unlink(e);
            }
        }
        pthread_mutex_unlock(&g_mu);
        if (lvictim && !job->owner[0]) {
            (void)ph_sandbox_lease_hold_tick(lvictim->lease, lease_now);
            release_lease(lvictim);
            continue;
        }
        if (lvictim) {
            lease_destroy(lvictim);
            continue;
        }
        if (victim == NULL)
            break;
        ph_environment_destroy(&victim->env);
        free(victim);
        pthread_mutex_lock(&g_mu);
        g_live--;
        pthread_mutex_unlock(&g_mu);
    }
    job->resp = ok_resp();
}

/* ---- connections (on the loop) ---- */

static const struct {
    const char *op;
    xd_job_fn *fn;
} g_ops[] = {
    {"environment.create", op_env_create},   {"environment.execute", op_env_execute},
    {"environment.destroy", op_env_destroy}, {"environment.workspace", op_env_workspace},
    {"workspace.stat", op_workspace},        {"workspace.read", op_workspace},
    {"workspace.write", op_workspace},       {"workspace.list", op_workspace},
    {"workspace.close", op_workspace},       {"lease.open", op_lease_open},
    {"lease.environment", op_lease},         {"lease.workspace", op_lease},
    {"lease.status", op_lease},              {"lease.hold_begin", op_lease},
    {"lease.hold_tick", op_lease},           {"lease.hold_end", op_lease},
    {"lease.end", op_lease},
};

static xd_conn *g_conns; /* the loop's, for shutdown */
static size_t g_conn_count;

static void conn_free(xd_conn *c)
{
    free(c);
}

static void log_request(const char *op, const char *identity, const json_t *resp, int64_t ms)
{
    const char *err = ph_wire_str(resp, "error");
    json_t *x = json_pack("{s:s, s:s, s:s, s:I}", "op", op, "identity", identity, "status",
                          err ? "error" : "ok", "ms", (json_int_t)ms);
    if (x && err)
        json_object_set_new(x, "error", json_string(err));
    __atomic_add_fetch(&g_requests, 1, __ATOMIC_RELAXED);
    if (err == NULL)
        observe(op, ms);
    if (err)
        __atomic_add_fetch(&g_errors_total, 1, __ATOMIC_RELAXED);
    xd_log(err ? "warning" : "info", "request", x);
    json_decref(x);
}

static void conn_send(xd_conn *c, const json_t *resp)
{
    uint8_t *f;
    size_t len;
    if (ph_wire_frame(resp, &f, &len) == 0) {
        bufferevent_write(c->bev, f, len);
        free(f);
    }
}

/* The connection is gone: its job (if any) is cancelled and its command
 * killed; the xd_conn lives on until the job comes back. */
static void conn_close(xd_conn *c)
{
    bufferevent_free(c->bev);
    c->bev = NULL;
    g_conn_count--;
    if (c->prev)
        c->prev->next = c->next;
    else
        g_conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_lock(&g_mu);
    if (c->ident && --c->ident->conns == 0)
        c->ident->gone_since_ms = now_ms();
    if (c->job) {
        c->job->cancelled = true;
        if (c->job->tid)
            kill_children_of(c->job->tid);
    }
    pthread_mutex_unlock(&g_mu);
    if (c->job)
        c->dead = true;
    else
        conn_free(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    xd_conn *c = arg;
    __atomic_store_n(&c->backlog, evbuffer_get_length(bufferevent_get_output(bev)),
                     __ATOMIC_RELEASE);
    if (c->close_after_write && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        conn_close(c);
}

static void reply_and_close(xd_conn *c, const char *code, const char *msg)
{
    json_t *e = ph_wire_error(code, msg);
    if (e)
        conn_send(c, e);
    json_decref(e);
    c->close_after_write = true;
    bufferevent_disable(c->bev, EV_READ);
}

/* The Prometheus text exposition of the daemon's gauges, counters and
 * histograms into text (cap bytes). */
static void metrics_text(char *text, size_t cap)
{
    pthread_mutex_lock(&g_mu);
    size_t live = g_live;
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_lock(&g_pool_mu);
    size_t queued = g_queued, running = g_running;
    pthread_mutex_unlock(&g_pool_mu);
    snprintf(text, cap,
             "# TYPE pinhole_execd_sandboxes_live gauge\npinhole_execd_sandboxes_live %zu\n"
             "# TYPE pinhole_execd_executions_in_flight gauge\n"
             "pinhole_execd_executions_in_flight %zu\n"
             "# TYPE pinhole_execd_queue_depth gauge\npinhole_execd_queue_depth %zu\n"
             "# TYPE pinhole_execd_requests_total counter\npinhole_execd_requests_total %lu\n"
             "# TYPE pinhole_execd_errors_total counter\npinhole_execd_errors_total %lu\n"
             "# TYPE pinhole_execd_busy_total counter\npinhole_execd_busy_total %lu\n",
             live, running, queued, __atomic_load_n(&g_requests, __ATOMIC_RELAXED),
             __atomic_load_n(&g_errors_total, __ATOMIC_RELAXED),
             __atomic_load_n(&g_busy_total, __ATOMIC_RELAXED));
    print_histograms(text, cap);
}

/* The admin listener (--metrics-listen): GET /metrics for Prometheus and
 * GET /health, plain HTTP on the loop, nothing else. It reveals counts only,
 * never an identity, tenant or id. */
static void admin_cb(struct evhttp_request *req, void *arg)
{
    (void)arg;
    const char *uri = evhttp_request_get_uri(req);
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        evhttp_send_error(req, 405, NULL);
    } else if (strcmp(uri, "/metrics") == 0) {
        char text[8192];
        metrics_text(text, sizeof text);
        evbuffer_add(b, text, strlen(text));
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "text/plain; version=0.0.4");
        evhttp_send_reply(req, 200, "OK", b);
    } else if (strcmp(uri, "/health") == 0) {
        evbuffer_add_printf(b, "ok\n");
        evhttp_send_reply(req, 200, "OK", b);
    } else {
        evhttp_send_error(req, 404, NULL);
    }
    evbuffer_free(b);
}

static json_t *inline_op(xd_conn *c, const char *op, const json_t *req)
{
    pthread_mutex_lock(&g_mu);
    size_t live = g_live;
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_lock(&g_pool_mu);
    size_t queued = g_queued, running = g_running;
    pthread_mutex_unlock(&g_pool_mu);
    if (strcmp(op, "hello") == 0) {
        bool ok = true;
        int64_t cap = ph_wire_int(req, "hard_cap_ms", g_cfg->hard_cap_ms, &ok);
        if (!ok || cap <= 0)
            return ph_wire_error("invalid", "hard_cap_ms must be a positive integer");
        c->cap_ms = cap < g_cfg->hard_cap_ms ? cap : g_cfg->hard_cap_ms;
        return json_pack("{s:b, s:i, s:s, s:s, s:I, s:s}", "ok", 1, "protocol", PH_EXECD_PROTOCOL,
                         "mechanism", ph_sandbox_mechanism_name(g_cfg->mechanism), "mode",
                         ph_service_mode_name(g_cfg->mode), "hard_cap_ms", (json_int_t)c->cap_ms,
                         "identity", c->ident->name);
    }
    if (strcmp(op, "health") == 0)
        return json_pack("{s:b, s:s, s:s, s:I, s:I, s:I}", "ok", 1, "status", "ok", "mechanism",
                         ph_sandbox_mechanism_name(g_cfg->mechanism), "sandboxes",
                         (json_int_t)live, "executions", (json_int_t)running, "queued",
                         (json_int_t)queued);
    if (strcmp(op, "metrics") == 0) {
        char text[8192];
        metrics_text(text, sizeof text);
        return json_pack("{s:b, s:s}", "ok", 1, "prometheus", text);
    }
    return NULL;
}

static void dispatch(xd_conn *c, json_t *req)
{
    const char *op = ph_wire_str(req, "op");
    int64_t t0 = now_ms();
    json_t *resp = op ? inline_op(c, op, req) : ph_wire_error("invalid", "no op");
    if (resp == NULL) {
        xd_job_fn *fn = NULL;
        for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0] && !fn; i++)
            if (strcmp(g_ops[i].op, op) == 0)
                fn = g_ops[i].fn;
        if (fn == NULL)
            resp = ph_wire_error("invalid", "unknown op");
        else if (c->cap_ms == 0)
            resp = ph_wire_error("protocol", "the first request must be hello");
    }
    if (resp == NULL) {
        xd_job *job = calloc(1, sizeof *job);
        pthread_mutex_lock(&g_pool_mu);
        bool full = g_queued >= g_cfg->queue;
        if (job && !full) {
            job->conn = c;
            job->req = json_incref(req);
            job->fn = NULL;
            for (size_t i = 0; i < sizeof g_ops / sizeof g_ops[0]; i++)
                if (strcmp(g_ops[i].op, op) == 0)
                    job->fn = g_ops[i].fn;
            snprintf(job->op, sizeof job->op, "%s", op);
            snprintf(job->owner, sizeof job->owner, "%s", c->ident->name);
            job->cap_ms = c->cap_ms;
            job->start_ms = t0;
            c->job = job;
            enqueue(job);
        }
        pthread_mutex_unlock(&g_pool_mu);
        if (c->job == job && job)
            return;
        free(job);
        resp = job ? busy("the execution queue is full") : ph_wire_error("nomem", "out of memory");
    }
    if (resp) {
        conn_send(c, resp);
        log_request(op ? op : "?", c->ident->name, resp, now_ms() - t0);
        json_decref(resp);
    }
}

static void on_read(struct bufferevent *bev, void *arg)
{
    xd_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    if (c->tls_pending)
        return; /* no request before the handshake verified a certificate */
    if (c->unauthenticated && !c->close_after_write) {
        evbuffer_drain(in, evbuffer_get_length(in));
        reply_and_close(c, "unauthenticated", "this peer is not allowed");
        return;
    }
    while (!c->close_after_write && evbuffer_get_length(in) >= PH_EXECD_FRAME_HEADER) {
        if (c->job != NULL) {
            reply_and_close(c, "protocol", "one request at a time per connection");
            return;
        }
        uint8_t hdr[PH_EXECD_FRAME_HEADER];
        evbuffer_copyout(in, hdr, sizeof hdr);
        uint32_t n = ph_wire_frame_len(hdr);
        if (n == 0 || n > g_cfg->max_request_bytes) {
            reply_and_close(c, "too_large", "the request is over --max-request-bytes");
            return;
        }
        if (evbuffer_get_length(in) < PH_EXECD_FRAME_HEADER + (size_t)n)
            return;
        evbuffer_drain(in, PH_EXECD_FRAME_HEADER);
        const char *body = (const char *)evbuffer_pullup(in, n);
        json_t *req = body ? json_loadb(body, n, JSON_REJECT_DUPLICATES, NULL) : NULL;
        evbuffer_drain(in, n);
        if (!json_is_object(req)) {
            json_decref(req);
            reply_and_close(c, "protocol", "a frame must hold one JSON object");
            return;
        }
        dispatch(c, req);
        json_decref(req);
    }
}

static void conn_identify(xd_conn *c, const char *name);
static bool tls_identity(xd_conn *c, char name[XD_IDENTITY_MAX]);

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    xd_conn *c = arg;
    if ((what & BEV_EVENT_CONNECTED) && c->tls_pending) {
        char name[XD_IDENTITY_MAX];
        c->tls_pending = false;
        if (tls_identity(c, name)) {
            conn_identify(c, name);
            return;
        }
        what |= BEV_EVENT_ERROR;
    }
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) {
        if (c->tls_pending) {
            unsigned long e = bufferevent_get_openssl_error(c->bev);
            char reason[256] = "closed during the handshake";
            if (e)
                ERR_error_string_n(e, reason, sizeof reason);
            json_t *x = json_pack("{s:s}", "error", reason);
            xd_log("warning", "tls_refused", x);
            json_decref(x);
        }
        conn_close(c);
    }
}

static bool peer_allowed(int fd, char name[XD_IDENTITY_MAX])
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    snprintf(name, XD_IDENTITY_MAX, "uid:%u", (unsigned)cred.uid);
    for (size_t i = 0; i < g_cfg->allow_uid_count; i++)
        if (g_cfg->allow_uid[i] == cred.uid)
            return true;
    for (size_t i = 0; i < g_cfg->allow_gid_count; i++)
        if (g_cfg->allow_gid[i] == cred.gid)
            return true;
    return false;
}

static xd_conn *conn_new(struct bufferevent *bev)
{
    /* Memory is bounded by connections x --max-request-bytes. */
    if (g_conn_count >= g_cfg->max_connections) {
        __atomic_add_fetch(&g_busy_total, 1, __ATOMIC_RELAXED);
        xd_log("warning", "too_many_connections", NULL);
        bufferevent_free(bev);
        return NULL;
    }
    xd_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        bufferevent_free(bev);
        return NULL;
    }
    c->bev = bev;
    c->next = g_conns;
    if (g_conns)
        g_conns->prev = c;
    g_conns = c;
    g_conn_count++;
    bufferevent_setcb(bev, on_read, on_write, on_event, c);
    /* on_write runs whenever output drains below this: a streaming job
     * waiting for the peer learns of progress. */
    bufferevent_setwatermark(bev, EV_WRITE, XD_STREAM_BACKLOG / 2, 0);
    return c;
}

/* The peer is name: counted under its identity, then served. */
static void conn_identify(xd_conn *c, const char *name)
{
    pthread_mutex_lock(&g_mu);
    xd_identity *id = g_identities;
    while (id && strcmp(id->name, name) != 0)
        id = id->next;
    if (id == NULL && (id = calloc(1, sizeof *id)) != NULL) {
        snprintf(id->name, sizeof id->name, "%s", name);
        id->next = g_identities;
        g_identities = id;
    }
    if (id)
        id->conns++;
    pthread_mutex_unlock(&g_mu);
    if (id == NULL) {
        conn_close(c);
        return;
    }
    c->ident = id;
    bufferevent_set_timeouts(c->bev, NULL, NULL);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void on_accept(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    (void)lst;
    (void)sa;
    (void)salen;
    (void)arg;
    struct bufferevent *bev = bufferevent_socket_new(g_base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (bev == NULL) {
        close(fd);
        return;
    }
    xd_conn *c = conn_new(bev);
    if (c == NULL)
        return;
    char name[XD_IDENTITY_MAX] = "";
    if (!peer_allowed(fd, name)) {
        /* Answered at its first request (a client that sends first then
         * reads always gets the answer, never a broken pipe), or dropped
         * after a few seconds of silence. */
        json_t *x = json_pack("{s:s}", "identity", name[0] ? name : "unknown");
        xd_log("warning", "unauthenticated", x);
        json_decref(x);
        c->unauthenticated = true;
        struct timeval t = {5, 0};
        bufferevent_set_timeouts(bev, &t, &t);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        return;
    }
    conn_identify(c, name);
}

/* TCP with mutual TLS: the handshake (bounded by a timeout) verifies the
 * client's certificate against the configured CA; one that has none or
 * another CA's never gets past it. The certificate subject is the identity. */
static SSL_CTX *g_tls_ctx;

static void on_accept_tls(struct evconnlistener *lst, evutil_socket_t fd, struct sockaddr *sa,
                          int salen, void *arg)
{
    (void)lst;
    (void)sa;
    (void)salen;
    (void)arg;
    SSL *ssl = SSL_new(g_tls_ctx);
    struct bufferevent *bev =
        ssl ? bufferevent_openssl_socket_new(g_base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE)
            : NULL;
    if (bev == NULL) {
        SSL_free(ssl);
        close(fd);
        return;
    }
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    xd_conn *c = conn_new(bev);
    if (c == NULL)
        return;
    c->tls_pending = true;
    struct timeval t = {10, 0};
    bufferevent_set_timeouts(bev, &t, &t);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* "cert:" and the RFC 2253 form of the verified peer's subject. */
static bool tls_identity(xd_conn *c, char name[XD_IDENTITY_MAX])
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
    X509 *cert = ssl ? SSL_get1_peer_certificate(ssl) : NULL;
    if (cert == NULL || SSL_get_verify_result(ssl) != X509_V_OK) {
        X509_free(cert);
        return false;
    }
    BIO *bio = BIO_new(BIO_s_mem());
    bool ok = bio && X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0,
                                        XN_FLAG_RFC2253) >= 0;
    char *text = NULL;
    long len = ok ? BIO_get_mem_data(bio, &text) : 0;
    ok = ok && len > 0 && (size_t)len + 6 < XD_IDENTITY_MAX;
    if (ok)
        snprintf(name, XD_IDENTITY_MAX, "cert:%.*s", (int)len, text);
    BIO_free(bio);
    X509_free(cert);
    return ok;
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    pthread_mutex_lock(&g_pool_mu);
    xd_job *list = g_done;
    g_done = NULL;
    xd_frame *frames = g_frames_head;
    g_frames_head = g_frames_tail = NULL;
    pthread_mutex_unlock(&g_pool_mu);
    /* A frame's connection is alive: its job (still running or in `list`)
     * keeps a closed xd_conn until the job is handled below. */
    while (frames) {
        xd_frame *fr = frames;
        frames = fr->next;
        if (fr->conn->bev) {
            bufferevent_write(fr->conn->bev, fr->data, fr->len);
            __atomic_store_n(&fr->conn->backlog,
                             evbuffer_get_length(bufferevent_get_output(fr->conn->bev)),
                             __ATOMIC_RELEASE);
        }
        free(fr->data);
        free(fr);
    }
    while (list) {
        xd_job *job = list;
        list = job->next;
        xd_conn *c = job->conn;
        json_t *resp = job->resp ? job->resp : ph_wire_error("internal", "no response");
        if (c != NULL) {
            log_request(job->op, job->owner, resp, now_ms() - job->start_ms);
            c->job = NULL;
            if (c->dead)
                conn_free(c);
            else
                conn_send(c, resp);
        }
        if (resp != job->resp)
            json_decref(resp);
        job_free(job);
    }
}

/* Once a second: ticks held leases on the workers' clocks and reaps the
 * objects of identities gone longer than the grace period. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    char gone[8][XD_IDENTITY_MAX];
    size_t ngone = 0;
    bool held = false;
    pthread_mutex_lock(&g_mu);
    for (xd_identity *id = g_identities; id; id = id->next) {
        if (id->conns == 0 && id->gone_since_ms > 0 && ngone < 8 &&
            now_ms() - id->gone_since_ms >= g_cfg->grace_seconds * 1000) {
            bool has = false;
            for (xd_env *e = g_envs; e && !has; e = e->next)
                has = strcmp(e->owner, id->name) == 0;
            for (xd_lease *l = g_leases; l && !has; l = l->next)
                has = strcmp(l->owner, id->name) == 0;
            if (has)
                memcpy(gone[ngone++], id->name, XD_IDENTITY_MAX);
            else
                id->gone_since_ms = 0;
        }
    }
    for (xd_lease *l = g_leases; l && !held; l = l->next)
        held = l->held && l->env_id[0] && !l->busy && !lease_env_in_use(l);
    pthread_mutex_unlock(&g_mu);
    for (size_t i = 0; i <= ngone; i++) {
        if (i == ngone && !held)
            break;
        xd_job *job = calloc(1, sizeof *job);
        if (job == NULL)
            break;
        job->fn = op_maintain;
        snprintf(job->op, sizeof job->op, "%s", i < ngone ? "maintain.owner_gone" : "maintain.hold");
        if (i < ngone) {
            memcpy(job->owner, gone[i], XD_IDENTITY_MAX);
            json_t *x = json_pack("{s:s}", "identity", gone[i]);
            xd_log("info", "owner_gone_reaping", x);
            json_decref(x);
        }
        pthread_mutex_lock(&g_pool_mu);
        enqueue(job); /* the daemon's own: not bounded by --queue */
        pthread_mutex_unlock(&g_pool_mu);
    }
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    json_t *x = json_pack("{s:i}", "signal", (int)sig);
    xd_log("info", "stopping", x);
    json_decref(x);
    event_base_loopbreak(g_base);
}

/* Destroys every object left (after the pool has stopped). */
static size_t destroy_all(void)
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

int xd_serve(const xd_config *cfg, int listen_fd, int tls_fd, struct ssl_ctx_st *tls_ctx,
             int admin_fd)
{
    g_cfg = cfg;
    g_base = event_base_new();
    struct evconnlistener *lst =
        g_base ? evconnlistener_new(g_base, on_accept, NULL,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, listen_fd)
               : NULL;
    g_tls_ctx = tls_ctx;
    struct evconnlistener *tls_lst =
        g_base && tls_fd >= 0
            ? evconnlistener_new(g_base, on_accept_tls, NULL,
                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, tls_fd)
            : NULL;
    struct evhttp *admin = g_base && admin_fd >= 0 ? evhttp_new(g_base) : NULL;
    if (admin != NULL) {
        evhttp_set_gencb(admin, admin_cb, NULL);
        evhttp_set_allowed_methods(admin, EVHTTP_REQ_GET);
        evhttp_set_max_headers_size(admin, 8192);
        evhttp_set_max_body_size(admin, 0);
        evhttp_set_timeout(admin, 10);
        if (evhttp_accept_socket_with_handle(admin, admin_fd) == NULL) {
            evhttp_free(admin);
            admin = NULL;
        }
    }
    g_done_ev = g_base ? event_new(g_base, -1, 0, on_done, NULL) : NULL;
    struct event *timer = g_base ? event_new(g_base, -1, EV_PERSIST, on_timer, NULL) : NULL;
    struct event *sigterm = g_base ? evsignal_new(g_base, SIGTERM, on_signal, NULL) : NULL;
    struct event *sigint = g_base ? evsignal_new(g_base, SIGINT, on_signal, NULL) : NULL;
    g_threads = calloc(cfg->max_executions, sizeof *g_threads);
    if (lst == NULL || (tls_fd >= 0 && tls_lst == NULL) || (admin_fd >= 0 && admin == NULL) ||
        g_done_ev == NULL || timer == NULL || sigterm == NULL || sigint == NULL ||
        g_threads == NULL) {
        xd_log("error", "startup_failed", NULL);
        return 71;
    }
    struct timeval sec = {1, 0};
    event_add(timer, &sec);
    event_add(sigterm, NULL);
    event_add(sigint, NULL);
    size_t started = 0;
    for (; started < cfg->max_executions; started++)
        if (pthread_create(&g_threads[started], NULL, pool_main, NULL) != 0)
            break;
    json_t *x = json_pack("{s:s, s:s, s:I}", "mechanism", ph_sandbox_mechanism_name(cfg->mechanism),
                          "mode", ph_service_mode_name(cfg->mode), "threads",
                          (json_int_t)started);
    xd_log("info", "listening", x);
    json_decref(x);
    event_base_dispatch(g_base);

    /* Stop: no new connections; kill what runs; let the pool finish. */
    evconnlistener_free(lst);
    if (tls_lst)
        evconnlistener_free(tls_lst);
    if (admin)
        evhttp_free(admin);
    pthread_mutex_lock(&g_pool_mu);
    g_quit = true;
    pthread_cond_broadcast(&g_pool_cv);
    pthread_mutex_unlock(&g_pool_mu);
    pthread_mutex_lock(&g_mu);
    pthread_mutex_lock(&g_pool_mu);
    for (xd_job *j = g_queue_head; j; j = j->next)
        j->cancelled = true;
    pthread_mutex_unlock(&g_pool_mu);
    pthread_mutex_unlock(&g_mu);
    /* Running jobs: their commands are killed through their threads. */
    for (int round = 0; round < 50; round++) {
        pthread_mutex_lock(&g_pool_mu);
        size_t running = g_running;
        pthread_mutex_unlock(&g_pool_mu);
        if (running == 0)
            break;
        DIR *d = opendir("/proc/self/task");
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            pid_t tid = (pid_t)atoi(de->d_name);
            if (tid > 0 && tid != (pid_t)syscall(SYS_gettid)) {
                pthread_mutex_lock(&g_mu);
                kill_children_of(tid);
                pthread_mutex_unlock(&g_mu);
            }
        }
        if (d)
            closedir(d);
        usleep(100 * 1000);
    }
    for (size_t i = 0; i < started; i++)
        pthread_join(g_threads[i], NULL);
    free(g_threads);
    on_done(-1, 0, NULL);
    while (g_conns)
        conn_close(g_conns);
    size_t n = destroy_all();
    x = json_pack("{s:I}", "destroyed", (json_int_t)n);
    xd_log("info", "stopped", x);
    json_decref(x);
    event_free(timer);
    event_free(sigterm);
    event_free(sigint);
    event_free(g_done_ev);
    event_base_free(g_base);
    unlink(cfg->socket_path);
    return 0;
}
