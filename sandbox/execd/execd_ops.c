/* execd_ops.c - pinhole-execd's operations (docs/execd.md), each run as a
 * job on a pool thread: the two ports (ExecutionEnvironment,
 * WorkspaceFiles), the lease operations, and the daemon's own maintenance.
 * A request is checked and decoded against its row of the operation table
 * (wire_ops.c) before its handler runs, so a handler reads typed values
 * and judges only what the port decides. An object in use by a job is
 * marked (xd_use); a request whose use it excludes gets `busy` rather than
 * waiting. */
#include "execd_state-int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static _Thread_local json_t *t_warnings; /* the current request's, or NULL */

void xd_sandbox_log(void *ctx, const char *json_line)
{
    (void)ctx;
    json_t *w = json_loads(json_line, 0, NULL);
    if (t_warnings != NULL && w != NULL) {
        json_array_append_new(t_warnings, w);
        return;
    }
    xd_log_line(json_line);
    json_decref(w);
}

/* ---- request helpers ---- */

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

json_t *xd_busy(const char *why)
{
    __atomic_add_fetch(&g_busy_total, 1, __ATOMIC_RELAXED);
    return ph_wire_error("busy", why);
}

/* The spec of a create or lease.open request (checked against the table:
 * what is left is the port's to judge). The strings point into the
 * request. tier1 gets the passthrough pairs. NULL or an error. */
static json_t *get_spec(const ph_wire_args *a, ph_environment_spec *spec, ph_env_block *tier1)
{
    memset(spec, 0, sizeof *spec);
    spec->tenant = a->f[PH_F_TENANT].s;
    spec->lease = a->f[PH_F_LEASE].s;
    const char *mech = a->f[PH_F_MECHANISM].s;
    ph_diag d = {0};
    if (mech == NULL)
        spec->mechanism = g_cfg->mechanism;
    else if (ph_sandbox_mechanism_from_name(mech, &spec->mechanism, &d) != PH_OK)
        return ph_wire_error("invalid", d.message);
    ph_sandbox_limits_init(&spec->limits);
    spec->limits.memory_bytes = a->f[PH_F_MEMORY_BYTES].i;
    spec->limits.pids = a->f[PH_F_PIDS].i;
    spec->limits.cpu_millis = a->f[PH_F_CPU_MILLIS].i;
    spec->limits.wall_clock_ms = a->f[PH_F_WALL_CLOCK_MS].i;
    spec->limits.output_bytes = a->f[PH_F_OUTPUT_BYTES].i;
    spec->network.grant_token = a->f[PH_F_GRANT_TOKEN].s;
    spec->network.proxy_port = (uint16_t)a->f[PH_F_PROXY_PORT].i;
    if (spec->network.grant_token != NULL) {
        if (g_cfg->proxy_socket == NULL)
            return ph_wire_error("unsupported", "this service has no proxy socket (--proxy-socket)");
        spec->network.proxy_socket_path = g_cfg->proxy_socket;
    }
    const json_t *pass = a->f[PH_F_PASSTHROUGH].json;
    size_t tier1_bytes = 0;
    for (size_t i = 0; pass && i < json_array_size(pass); i++) {
        ph_wire_args item;
        if (ph_wire_item_decode(PH_F_PASSTHROUGH, json_array_get(pass, i), &item) != NULL)
            return ph_wire_error("nomem", "out of memory"); /* checked with the request */
        const char *name = item.f[PH_F_PASS_NAME].s, *value = item.f[PH_F_PASS_VALUE].data;
        size_t len = item.f[PH_F_PASS_VALUE].len;
        tier1_bytes += strlen(name) + len;
        bool bad = memchr(value, '\0', len) != NULL || strchr(name, '=') != NULL;
        ph_status st = bad || tier1_bytes > XD_TIER1_BYTES_MAX
                           ? PH_E_INVAL
                           : ph_env_set(tier1, name, value);
        ph_wire_args_clear(&item);
        if (tier1_bytes > XD_TIER1_BYTES_MAX)
            return ph_wire_error("limit", "passthrough: more than 64 KiB of names and values");
        if (st != PH_OK)
            return ph_wire_error("invalid", "passthrough[]: a name or value is malformed");
    }
    return NULL;
}

/* ---- ExecutionEnvironment ---- */

static void op_env_create(xd_job *job, const ph_wire_args *a)
{
    ph_environment_spec spec;
    ph_env_block tier1 = {0};
    job->resp = get_spec(a, &spec, &tier1);
    if (job->resp != NULL) {
        ph_env_block_clear(&tier1);
        return;
    }
    ph_diag d = {0};
    pthread_mutex_lock(&g_mu);
    ph_execution_service *svc = xd_service_for(job->cap_ms, &d);
    const char *full = svc != NULL ? xd_sandbox_reserve(job->owner) : NULL;
    pthread_mutex_unlock(&g_mu);
    if (svc == NULL) {
        job->resp = diag_resp(d.status ? d.status : PH_E_IO, &d);
        ph_env_block_clear(&tier1);
        return;
    }
    if (full != NULL) {
        job->resp = xd_busy(full);
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
    /* Registered only while the connection is there: an environment whose
     * id can never reach the worker is destroyed (the loop does the same
     * for a connection that goes between here and the answer). */
    pthread_mutex_lock(&g_mu);
    bool undelivered = st == PH_OK && job->cancelled;
    if (st != PH_OK || e == NULL || undelivered) {
        if (!undelivered)
            xd_sandbox_release(job->owner);
    } else {
        snprintf(e->id, sizeof e->id, "%s", ph_environment_id(env));
        snprintf(e->tenant, sizeof e->tenant, "%s", spec.tenant);
        snprintf(e->owner, sizeof e->owner, "%s", job->owner);
        e->env = env;
        e->next = g_envs;
        g_envs = e;
    }
    pthread_mutex_unlock(&g_mu);
    if (undelivered) {
        free(e);
        ph_environment_destroy(&env);
        pthread_mutex_lock(&g_mu);
        xd_sandbox_release(job->owner);
        pthread_mutex_unlock(&g_mu);
        st = ph_diag_set(&d, PH_E_IO, 0, "the connection is gone");
    }
    if (st != PH_OK) {
        json_decref(warnings);
        job->resp = diag_resp(st, &d);
        return;
    }
    job->resp = json_pack("{s:b, s:s, s:o}", "ok", 1, "environment", e->id, "warnings", warnings);
}

/* Takes environment id of tenant for this job for use u. NULL and
 * job->resp set when there is none or it is in a use that excludes u. */
static xd_env *take_env(xd_job *job, const char *tenant, const char *id, xd_use u)
{
    pthread_mutex_lock(&g_mu);
    xd_env *e = xd_env_find(id, job->owner, tenant);
    if (e == NULL)
        job->resp = not_found("environment");
    else if ((e->lease && e->lease->busy) || e->exclusive ||
             (u == XD_USE_EXEC && e->executing) || (u == XD_USE_EXCLUSIVE && e->users > 0))
        job->resp = xd_busy("the environment is serving another request");
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

/* ---- streamed responses ---- */

/* Queues one intermediate frame of job's streamed response and waits while
 * the peer is slow. false when the connection is gone. */
static bool stream_send(xd_job *job, json_t *frame_obj)
{
    xd_frame *fr = xd_frame_new(frame_obj);
    if (fr == NULL)
        return false;
    /* A peer that reads nothing for XD_STREAM_STALL_MS gives up its thread;
     * so does any stream when the daemon stops. */
    int64_t stalled_since = ph_monotonic_ms();
    size_t last = __atomic_load_n(&job->conn->backlog, __ATOMIC_ACQUIRE);
    for (;;) {
        if (xd_job_cancelled(job) || xd_pool_stopping()) {
            xd_frame_free(fr);
            return false;
        }
        if (!xd_peer_behind(job))
            break;
        size_t now = __atomic_load_n(&job->conn->backlog, __ATOMIC_ACQUIRE);
        if (now < last)
            stalled_since = ph_monotonic_ms();
        last = now;
        if (ph_monotonic_ms() - stalled_since >= XD_STREAM_STALL_MS) {
            xd_frame_free(fr);
            return false;
        }
        usleep(1000);
    }
    xd_frame_queue(job, fr);
    return true;
}

/* environment.execute with stream_output: each piece of output the command
 * writes goes out as {"output": "stdout"|"stderr", "data_base64": ...}
 * before the response. Called on the pool thread between the mechanism's
 * reads, so it never waits: while the peer is behind by XD_STREAM_BACKLOG
 * the pieces are dropped (counted in the result's stream_dropped_bytes), and
 * the deadline kill is never delayed by a peer that does not read. */
typedef struct xd_output_stream {
    xd_job *job;
    uint64_t dropped;
} xd_output_stream;

static void stream_output(void *ctx, int stream, const uint8_t *data, size_t len)
{
    xd_output_stream *os = ctx;
    xd_frame *fr = NULL;
    json_t *b64 = NULL;
    if (!xd_peer_behind(os->job) && !xd_job_cancelled(os->job) && (b64 = ph_json_b64(data, len)))
        fr = xd_frame_new(json_pack("{s:s, s:o}", "output",
                                    stream == PH_STREAM_STDERR ? "stderr" : "stdout",
                                    "data_base64", b64));
    if (fr == NULL) {
        os->dropped += len;
        return;
    }
    xd_frame_queue(os->job, fr);
}

static void op_env_execute(xd_job *job, const ph_wire_args *a)
{
    xd_env *e = take_env(job, a->f[PH_F_TENANT].s, a->f[PH_F_ENVIRONMENT].s, XD_USE_EXEC);
    if (e == NULL)
        return;
    ph_execution_command cmd = {
        .argv = a->f[PH_F_ARGV].argv,
        .cwd = a->f[PH_F_CWD].data,
        .timeout_seconds = a->f[PH_F_TIMEOUT_SECONDS].i,
        .run_budget_ms = a->f[PH_F_RUN_BUDGET_MS].i,
        .stdin_data = a->f[PH_F_STDIN].data,
        .stdin_len = a->f[PH_F_STDIN].len,
    };
    xd_output_stream os = {.job = job};
    if (a->f[PH_F_STREAM_OUTPUT].i && job->conn != NULL) {
        cmd.on_output = stream_output;
        cmd.on_output_ctx = &os;
    }
    ph_execution_result *r = NULL;
    ph_diag d = {0};
    ph_status st = ph_environment_execute(e->env, &cmd, &r, &d);
    release_env(e, XD_USE_EXEC);
    if (st != PH_OK) {
        job->resp = diag_resp(st, &d);
        return;
    }
    json_t *res = ph_wire_result(r);
    ph_execution_result_free(&r);
    job->resp = res ? json_pack("{s:b, s:o}", "ok", 1, "result", res)
                    : ph_wire_error("nomem", "out of memory");
    /* Beside the result: it is the transport's, not the command's. */
    if (job->resp && cmd.on_output != NULL)
        json_object_set_new(job->resp, "stream_dropped_bytes", json_integer((json_int_t)os.dropped));
}

static void op_env_destroy(xd_job *job, const ph_wire_args *a)
{
    xd_env *e = take_env(job, a->f[PH_F_TENANT].s, a->f[PH_F_ENVIRONMENT].s, XD_USE_EXCLUSIVE);
    if (e == NULL)
        return;
    if (e->lease != NULL) {
        release_env(e, XD_USE_EXCLUSIVE);
        job->resp = ph_wire_error("invalid", "a lease's environment ends with the lease");
        return;
    }
    pthread_mutex_lock(&g_mu);
    xd_env_unlink(e);
    pthread_mutex_unlock(&g_mu);
    ph_environment_destroy(&e->env);
    pthread_mutex_lock(&g_mu);
    xd_sandbox_release(e->owner);
    pthread_mutex_unlock(&g_mu);
    free(e);
    job->resp = ok_resp();
}

/* A new workspace id on environment record e (under g_mu). */
static json_t *new_workspace(const char *owner, const char *tenant, const char *env_id)
{
    if (xd_ws_count(env_id) >= XD_WS_PER_ENV_MAX)
        return ph_wire_error("limit", "too many workspace ids open on this environment "
                                      "(workspace.close them)");
    xd_ws *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ph_wire_error("nomem", "out of memory");
    xd_new_id("ws-", w->id);
    snprintf(w->tenant, sizeof w->tenant, "%s", tenant);
    snprintf(w->owner, sizeof w->owner, "%s", owner);
    snprintf(w->env_id, sizeof w->env_id, "%s", env_id);
    w->next = g_wss;
    g_wss = w;
    return json_pack("{s:b, s:s}", "ok", 1, "workspace", w->id);
}

static void op_env_workspace(xd_job *job, const ph_wire_args *a)
{
    const char *tenant = a->f[PH_F_TENANT].s;
    pthread_mutex_lock(&g_mu);
    xd_env *e = xd_env_find(a->f[PH_F_ENVIRONMENT].s, job->owner, tenant);
    job->resp = e ? new_workspace(job->owner, tenant, e->id) : not_found("environment");
    pthread_mutex_unlock(&g_mu);
}

/* ---- WorkspaceFiles ---- */

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
        json_t *b64 = ph_json_b64(buf, (size_t)n);
        json_t *c = b64 ? json_pack("{s:o}", "chunk_base64", b64) : NULL;
        if (c == NULL || !stream_send(job, c)) {
            free(buf);
            return ph_wire_error("io", "the connection is gone");
        }
        sent += (uint64_t)n;
    }
    free(buf);
    return json_pack("{s:b, s:b, s:I}", "ok", 1, "end", 1, "size", (json_int_t)sent);
}

static void op_workspace(xd_job *job, const ph_wire_args *a)
{
    const char *tenant = a->f[PH_F_TENANT].s;
    if (a->op == PH_OP_WS_CLOSE) {
        pthread_mutex_lock(&g_mu);
        xd_ws *w = xd_ws_find(a->f[PH_F_WORKSPACE].s, job->owner, tenant);
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
    xd_ws *w = xd_ws_find(a->f[PH_F_WORKSPACE].s, job->owner, tenant);
    if (w)
        memcpy(env_id, w->env_id, sizeof env_id);
    pthread_mutex_unlock(&g_mu);
    if (w == NULL) {
        job->resp = not_found("workspace");
        return;
    }
    const char *path = a->f[PH_F_PATH].data;
    int64_t max = a->f[a->op == PH_OP_WS_LIST ? PH_F_MAX_ENTRIES : PH_F_MAX_BYTES].i;
    /* The environment it was opened on is gone: every file is gone. */
    xd_env *e = take_env(job, tenant, env_id, XD_USE_SHARED);
    if (e == NULL) {
        if (strstr(ph_wire_str(job->resp, "error"), "not_found")) {
            json_decref(job->resp);
            job->resp = ph_wire_error("not_found", "the workspace's sandbox no longer exists");
        }
        return;
    }
    ph_workspace *ws = NULL;
    ph_diag d = {0};
    ph_status st = ph_environment_workspace(e->env, &ws, &d);
    json_t *resp = NULL;
    if (st == PH_OK && a->op == PH_OP_WS_STAT) {
        ph_ws_stat s;
        st = ph_workspace_stat(ws, path, &s, &d);
        if (st == PH_OK)
            resp = json_pack("{s:b, s:o}", "ok", 1, "stat", ph_wire_stat(&s));
    } else if (st == PH_OK && a->op == PH_OP_WS_READ) {
        int fd = -1;
        ph_ws_stat s;
        int64_t chunk = a->f[PH_F_CHUNK_BYTES].i;
        /* A whole-file answer is one frame held in memory: bounded; larger
         * files are read with chunk_bytes. */
        if (chunk == 0 && max > XD_READ_WHOLE_MAX)
            max = XD_READ_WHOLE_MAX;
        st = ph_workspace_open_read(ws, path, (uint64_t)max, &fd, &s, &d);
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
    } else if (st == PH_OK && a->op == PH_OP_WS_WRITE) {
        st = ph_workspace_write(ws, path, a->f[PH_F_DATA].data, a->f[PH_F_DATA].len,
                                (uint32_t)a->f[PH_F_MODE].i & 07777, &d);
        if (st == PH_OK)
            resp = ok_resp();
    } else if (st == PH_OK && a->op == PH_OP_WS_LIST) {
        ph_ws_list *list = NULL;
        st = ph_workspace_list(ws, path, (size_t)max, &list, &d);
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
    }
    ph_workspace_close(&ws);
    release_env(e, XD_USE_SHARED);
    job->resp = st != PH_OK ? diag_resp(st, &d)
                            : resp ? resp : ph_wire_error("nomem", "out of memory");
    if (st != PH_OK)
        json_decref(resp);
}

/* ---- leases ---- */

static void op_lease_open(xd_job *job, const ph_wire_args *a)
{
    ph_environment_spec spec;
    ph_env_block tier1 = {0};
    int64_t hold = a->f[PH_F_APPROVAL_HOLD].i;
    job->resp = get_spec(a, &spec, &tier1);
    ph_diag d = {0};
    xd_lease *l = job->resp ? NULL : calloc(1, sizeof *l);
    if (job->resp == NULL && l == NULL)
        job->resp = ph_wire_error("nomem", "out of memory");
    pthread_mutex_lock(&g_mu);
    bool too_many = l && xd_lease_count(job->owner) >= XD_LEASES_PER_OWNER_MAX;
    ph_execution_service *svc = l && !too_many ? xd_service_for(job->cap_ms, &d) : NULL;
    pthread_mutex_unlock(&g_mu);
    if (too_many)
        job->resp = ph_wire_error("limit", "this identity has the most open leases it may have");
    else if (l != NULL && svc == NULL)
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
    xd_new_id("lse-", l->id);
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
bool xd_lease_env_in_use(const xd_lease *l)
{
    const xd_env *e = l->env_id[0] ? xd_env_find(l->env_id, l->owner, l->tenant) : NULL;
    return e != NULL && e->users > 0;
}

static xd_lease *take_lease(xd_job *job, const ph_wire_args *a)
{
    pthread_mutex_lock(&g_mu);
    xd_lease *l = xd_lease_find(a->f[PH_F_HANDLE].s, job->owner, a->f[PH_F_TENANT].s);
    if (l == NULL)
        job->resp = not_found("lease");
    else if (l->busy || xd_lease_env_in_use(l))
        job->resp = xd_busy("the lease is serving another request");
    else
        l->busy = true;
    pthread_mutex_unlock(&g_mu);
    return job->resp ? NULL : l;
}

static void release_lease(xd_lease *l)
{
    pthread_mutex_lock(&g_mu);
    xd_lease_reconcile(l);
    l->busy = false;
    pthread_mutex_unlock(&g_mu);
}

/* Ends a lease this job holds (busy): out of the registry, its sandbox
 * destroyed (outside the mutex), its record freed. */
static void lease_destroy(xd_lease *l)
{
    pthread_mutex_lock(&g_mu);
    xd_lease_unlink(l);
    pthread_mutex_unlock(&g_mu);
    ph_sandbox_lease_end(&l->lease);
    pthread_mutex_lock(&g_mu);
    xd_lease_reconcile(l);
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
        const char *full = xd_sandbox_reserve(l->owner);
        pthread_mutex_unlock(&g_mu);
        if (full != NULL)
            return ph_diag_set(d, PH_E_LIMIT, 0, "busy: %s", full);
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
        xd_sandbox_release(l->owner);
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

static void op_lease(xd_job *job, const ph_wire_args *a)
{
    xd_lease *l = take_lease(job, a);
    if (l == NULL)
        return;
    ph_diag d = {0};
    int64_t now = a->f[PH_F_NOW_SECONDS].i;
    if (a->op == PH_OP_LEASE_ENVIRONMENT || a->op == PH_OP_LEASE_WORKSPACE) {
        json_t *warnings = json_array();
        ph_environment *env = NULL;
        ph_status st = lease_env(l, warnings, &env, &d);
        if (st != PH_OK) {
            json_decref(warnings);
            job->resp = strncmp(d.message, "busy:", 5) == 0 ? xd_busy(d.message + 6)
                                                            : diag_resp(st, &d);
        } else if (a->op == PH_OP_LEASE_ENVIRONMENT) {
            job->resp = json_pack("{s:b, s:s, s:o}", "ok", 1, "environment",
                                  ph_environment_id(env), "warnings", warnings);
        } else {
            pthread_mutex_lock(&g_mu);
            job->resp = new_workspace(l->owner, l->tenant, ph_environment_id(env));
            pthread_mutex_unlock(&g_mu);
            json_object_set_new(job->resp, "warnings", warnings);
        }
    } else if (a->op == PH_OP_LEASE_STATUS) {
        job->resp = json_pack("{s:b, s:b}", "ok", 1, "has_sandbox",
                              ph_sandbox_lease_has_sandbox(l->lease));
    } else if (a->op == PH_OP_LEASE_HOLD_BEGIN) {
        if (!l->held) {
            l->held = true;
            l->hold_client_start = now;
            l->hold_daemon_start = ph_monotonic_ms();
        }
        ph_sandbox_lease_hold_begin(l->lease, now);
        job->resp = ok_resp();
    } else if (a->op == PH_OP_LEASE_HOLD_TICK || a->op == PH_OP_LEASE_HOLD_END) {
        bool end = a->op == PH_OP_LEASE_HOLD_END;
        bool destroyed = end ? ph_sandbox_lease_hold_end(l->lease, now)
                             : ph_sandbox_lease_hold_tick(l->lease, now);
        if (end)
            l->held = false;
        job->resp = json_pack("{s:b, s:b}", "ok", 1, "destroyed", destroyed);
    } else { /* PH_OP_LEASE_END */
        lease_destroy(l);
        job->resp = ok_resp();
        return;
    }
    release_lease(l);
}

/* ---- the daemon's own jobs ---- */

static void run_undelivered(xd_job *job);

xd_job *xd_undelivered_job(const xd_job *create)
{
    const char *env = ph_wire_str(create->resp, "environment");
    xd_job *job = env ? calloc(1, sizeof *job) : NULL;
    if (job == NULL)
        return NULL;
    job->req = json_pack("{s:s, s:s, s:s}", "op", "environment.destroy", "environment", env,
                         "tenant", ph_wire_str(create->req, "tenant"));
    job->fn = run_undelivered;
    memcpy(job->owner, create->owner, sizeof job->owner);
    snprintf(job->op, sizeof job->op, "%s", "maintain.undelivered");
    if (job->req == NULL) {
        free(job);
        return NULL;
    }
    return job;
}

/* Destroys everything owned by job->owner that is not xd_busy (owner gone), or
 * ticks held leases (owner ""). An owner that has connected again since the
 * job was queued (it may wait behind busy threads) is back: what it has is
 * kept, and nothing it makes now is destroyed under it. */
void xd_op_maintain(xd_job *job)
{
    for (;;) {
        xd_env *victim = NULL;
        xd_lease *lvictim = NULL;
        int64_t lease_now = 0;
        pthread_mutex_lock(&g_mu);
        const xd_identity *owner = job->owner[0] ? xd_identity_find(job->owner) : NULL;
        if (owner != NULL && owner->conns > 0) {
            pthread_mutex_unlock(&g_mu);
            break;
        }
        for (xd_lease *l = g_leases; l && !lvictim; l = l->next) {
            if (l->busy || xd_lease_env_in_use(l))
                continue;
            if (job->owner[0] ? strcmp(l->owner, job->owner) == 0 : l->held) {
                lease_now = l->hold_client_start + (ph_monotonic_ms() - l->hold_daemon_start) / 1000;
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
                xd_env_unlink(e);
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
        xd_sandbox_release(job->owner);
        pthread_mutex_unlock(&g_mu);
    }
    job->resp = ok_resp();
}

/* The handler of each row of the operation table that runs on the pool
 * (hello, health and metrics are answered on the loop: execd_service.c). */
typedef void xd_op_fn(xd_job *job, const ph_wire_args *a);
static xd_op_fn *const g_handlers[PH_OP_COUNT] = {
    [PH_OP_ENV_CREATE] = op_env_create,
    [PH_OP_ENV_EXECUTE] = op_env_execute,
    [PH_OP_ENV_DESTROY] = op_env_destroy,
    [PH_OP_ENV_WORKSPACE] = op_env_workspace,
    [PH_OP_WS_STAT] = op_workspace,
    [PH_OP_WS_READ] = op_workspace,
    [PH_OP_WS_WRITE] = op_workspace,
    [PH_OP_WS_LIST] = op_workspace,
    [PH_OP_WS_CLOSE] = op_workspace,
    [PH_OP_LEASE_OPEN] = op_lease_open,
    [PH_OP_LEASE_ENVIRONMENT] = op_lease,
    [PH_OP_LEASE_WORKSPACE] = op_lease,
    [PH_OP_LEASE_STATUS] = op_lease,
    [PH_OP_LEASE_HOLD_BEGIN] = op_lease,
    [PH_OP_LEASE_HOLD_TICK] = op_lease,
    [PH_OP_LEASE_HOLD_END] = op_lease,
    [PH_OP_LEASE_END] = op_lease,
};

/* Checks job's request against the row of op; the handler runs only on
 * a request that passed, and every refusal is the table's. */
static void run(xd_job *job, ph_wire_op_id op)
{
    ph_wire_args a;
    const char *bad = ph_wire_decode(op, job->req, &a);
    if (bad != NULL) {
        job->resp = ph_wire_error("invalid", bad);
        return;
    }
    g_handlers[op](job, &a);
    ph_wire_args_clear(&a);
}

static void run_op(xd_job *job)
{
    ph_wire_op_id op;
    if (ph_wire_op_find(job->op, &op) && g_handlers[op] != NULL)
        run(job, op);
    else
        job->resp = ph_wire_error("invalid", "unknown op");
}

static void run_undelivered(xd_job *job)
{
    run(job, PH_OP_ENV_DESTROY);
}

xd_job_fn *xd_op_find(const char *op)
{
    ph_wire_op_id id;
    return ph_wire_op_find(op, &id) && g_handlers[id] != NULL ? run_op : NULL;
}
