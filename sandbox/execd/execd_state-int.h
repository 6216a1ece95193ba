/* execd_state-int.h - what the parts of pinhole-execd's serving loop share:
 * the registry (execd_registry.c), the thread pool and the frames it hands
 * the loop (execd_pool.c), the operations (execd_ops.c), the loop itself
 * (execd_service.c) and its admin listener (execd_admin.c). The ownership rules are at the top of
 * execd_service.c. */
#ifndef PINHOLE_EXECD_STATE_INT_H
#define PINHOLE_EXECD_STATE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "execd_service-int.h"
#include "pinhole/sandbox_lease.h"

struct bufferevent;
struct event;

/* ---- the registry (execd_registry.c), under g_mu ---- */

typedef struct xd_identity {
    char name[XD_IDENTITY_MAX]; /* "uid:<n>" or "cert:<subject>" */
    int conns;
    int64_t gone_since_ms;
    size_t sandboxes;   /* live or being created: --max-sandboxes-per-identity */
    size_t jobs;        /* requests queued or running, frames waiting for or on the
                         * parser (the loop's own count) */
    uint64_t parse_turn; /* when the parser last took one of its frames (g_pool_mu) */
    bool reaping;        /* its maintain.owner_gone job is queued or running */
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

extern const xd_config *g_cfg;
extern pthread_mutex_t g_mu;     /* the registry's; never held across a sandbox call */
extern xd_identity *g_identities;
extern xd_env *g_envs;
extern xd_ws *g_wss;
extern xd_lease *g_leases;
extern size_t g_live;            /* sandboxes that exist or are being created */
extern unsigned long g_requests, g_busy_total, g_errors_total; /* atomic */

/* Counts one finished request of op in its latency histogram (the three
 * ExecutionEnvironment operations; others are ignored). Thread-safe. */
void xd_observe(const char *op, int64_t ms);
/* Appends the histograms in the text exposition format to out (cap bytes). */
void xd_print_histograms(char *out, size_t cap);
/* A fresh id: prefix and 16 hex digits from getrandom. */
void xd_new_id(const char *prefix, char out[PH_EXECD_ID_MAX]);
/* Under g_mu. The service for a connection's cap (created on first use). */
ph_execution_service *xd_service_for(int64_t cap_ms, ph_diag *diag);
/* Under g_mu: the object with id that owner created for tenant, or NULL
 * (another identity's or tenant's object is not found, like a missing one). */
xd_env *xd_env_find(const char *id, const char *owner, const char *tenant);
xd_lease *xd_lease_find(const char *id, const char *owner, const char *tenant);
xd_ws *xd_ws_find(const char *id, const char *owner, const char *tenant);
/* Under g_mu: unlinks the record (not freed); an environment's workspace
 * ids are freed with it. */
void xd_env_unlink(xd_env *e);
/* Under g_mu: the workspace ids of env_id; the leases of owner (NULL: all). */
size_t xd_ws_count(const char *env_id);
size_t xd_lease_count(const char *owner);
/* The hard cap a connection gets for the one it asked (at least
 * XD_CAP_MIN_MS): one of a few fixed steps, at most the asked one, never
 * above --hard-cap. */
#define XD_CAP_MIN_MS 100
int64_t xd_cap_bucket(int64_t want_ms);
void xd_lease_unlink(xd_lease *l);
/* Under g_mu: the identity called name, or NULL. */
xd_identity *xd_identity_find(const char *name);
/* Under g_mu: reserves one sandbox of --max-sandboxes and of owner's
 * --max-sandboxes-per-identity. NULL, or (nothing reserved) which limit is
 * reached; xd_sandbox_release gives one back. */
const char *xd_sandbox_reserve(const char *owner);
void xd_sandbox_release(const char *owner);
/* Under g_mu, lease busy: makes the environment record match whether the
 * lease has a sandbox now (a hold or the end may have destroyed it). */
void xd_lease_reconcile(xd_lease *l);
/* Destroys every object left (after the pool has stopped); returns how many
 * sandboxes that was. */
size_t xd_destroy_all(void);

/* ---- jobs and the pool (execd_pool.c) ---- */

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
    xd_job_fn *fn;       /* NULL: a frame to parse (frame, frame_len) for the loop */
    uint8_t *frame;
    size_t frame_len;
    const char *refusal; /* a parsed frame that is refused: its error code */
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
    bool counted_until_parsed; /* closed with a frame on the parser's queue */
    bool close_after_write;
    bool unauthenticated; /* SO_PEERCRED not allowed: one refusal, then closed */
    bool tls_pending;     /* TLS: identified once the handshake verified a certificate */
    bool anon;            /* counted among the not yet identified connections */
    bool paused;          /* not read while its output is over XD_OUTPUT_PAUSE */
    bool frame_pending;   /* the deadline runs for a frame begun (not the handshake) */
    struct event *deadline; /* the handshake's from accept, or the current frame's */
    struct event *answer_deadline; /* a large answer's, to be read (conn_send) */
    int64_t accepted_ms;
    char source[64];      /* unidentified: "ip:<address>" (IPv6: its /64) or "uid:<n>" */
    size_t backlog;       /* output not yet written to the peer (atomic: a streaming
                           * job reads it to wait for a slow peer) */
    struct xd_conn *prev, *next; /* g_conns: every live connection */
};

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

#define XD_STREAM_BACKLOG (4u * 1024 * 1024) /* output queued before a stream waits */
/* A connection is not read while more than this of its output is unsent: a
 * peer that sends requests and never reads the answers holds no more. */
#define XD_OUTPUT_PAUSE (64u * 1024)
/* Frames up to this size are parsed on the loop (a bounded, sub-millisecond
 * cost); larger ones on the parser thread, so the loop never waits for one. */
#define XD_PARSE_INLINE_MAX (64u * 1024)
/* Unidentified connections (a TLS handshake to come, refused unix peers):
 * 64 at most, 8 from one source; one more evicts one of its source's, or
 * one of the source holding the most (anon_make_room). */
#define XD_ANON_MAX 64
#define XD_ANON_PER_SOURCE 8
#define XD_READ_WHOLE_MAX (64 * 1024 * 1024)  /* workspace.read without chunk_bytes */
#define XD_STREAM_STALL_MS 10000  /* a streamed response whose peer reads nothing this long ends */
#define XD_ANSWER_MIN_RATE (1024 * 1024) /* bytes/s a large unsent answer must be read at */
#define XD_WS_PER_ENV_MAX 64      /* workspace ids open on one environment */
#define XD_LEASES_PER_OWNER_MAX 256
#define XD_TIER1_BYTES_MAX 65536  /* passthrough names and values of one spec, in all */

extern pthread_mutex_t g_pool_mu; /* the queue, the done list, the frames */
extern size_t g_queued, g_running;

/* Starts n pool threads that hand finished jobs (and frames) to the loop by
 * activating done_ev; returns how many started. */
size_t xd_pool_start(size_t n, struct event *done_ev);
/* Stops the pool: queued jobs are cancelled, running commands killed, the
 * threads joined. */
void xd_pool_stop(void);
/* Under g_pool_mu: queues job (owned by the pool until it is done). */
void xd_enqueue(xd_job *job);
/* Takes the finished jobs and the frames queued since the last call (the
 * loop's, in on_done). */
void xd_pool_take(xd_job **done, xd_frame **frames);
void xd_job_free(xd_job *job);
/* Under g_mu: kills what the pool thread tid started. */
void xd_kill_children_of(pid_t tid);
/* Whether job's connection went away. */
bool xd_job_cancelled(xd_job *job);
/* Whether job's peer has XD_STREAM_BACKLOG bytes or more not yet written. */
bool xd_peer_behind(const xd_job *job);
/* frame_obj (consumed) as a wire frame, or NULL. */
xd_frame *xd_frame_new(json_t *frame_obj);
void xd_frame_free(xd_frame *fr);
/* Hands fr (owned from here on) to the loop for job's connection. */
void xd_frame_queue(xd_job *job, xd_frame *fr);
/* Whether the pool is stopping (a job that waits should give up). */
bool xd_pool_stopping(void);
/* Hands job (fn NULL, frame set; owned by the parser from here on) to the
 * parser thread; it comes back on the done list with req or refusal. */
void xd_parse_enqueue(xd_job *job);
/* The request in a frame body (new reference), or NULL with *code and *msg
 * (static) saying why: over the values or depth of ph_wire_frame_scan
 * (`too_large`), not one JSON object (`protocol`). Any thread. */
json_t *xd_frame_parse(const uint8_t *body, size_t len, const char **code, const char **msg);

/* ---- the operations (execd_ops.c, on pool threads) ---- */

/* The operation named op, or NULL when there is none. */
xd_job_fn *xd_op_find(const char *op);
/* The daemon's own job: destroys what job->owner left (owner gone), or ends
 * holds past approval_hold_seconds. */
void xd_op_maintain(xd_job *job);
/* The daemon's own job that destroys the environment a finished
 * environment.create made when its answer could not be delivered (the
 * connection went first); NULL when create failed or out of memory. */
xd_job *xd_undelivered_job(const xd_job *create);
/* A `busy` error response (counted). */
json_t *xd_busy(const char *why);
/* Under g_mu: whether a job is using the lease's environment. */
bool xd_lease_env_in_use(const xd_lease *l);

/* ---- the loop (execd_service.c) ---- */

/* Writes one line to stderr under the log lock. */
void xd_log_line(const char *line);
/* The Prometheus text exposition of the daemon's gauges, counters and
 * histograms into text (cap bytes). Thread-safe. */
void xd_metrics_text(char *text, size_t cap);

struct evconnlistener;
struct event_base;
/* What a listener does when accept fails for want of descriptors or memory
 * (EMFILE, ENFILE, ENOBUFS, ENOMEM): it stops accepting for
 * XD_ACCEPT_PAUSE_MS, logging accept_paused once per pause, rather than
 * retrying the readable socket at once, forever (and logging each try).
 * xd_accept_failed is a listener's error callback, its argument the
 * listener's guard; a guard pauses one listener and is freed with it. NULL
 * when out of memory. */
#define XD_ACCEPT_PAUSE_MS 100
typedef struct xd_accept_guard xd_accept_guard;
xd_accept_guard *xd_accept_guard_new(struct event_base *base);
void xd_accept_guard_free(xd_accept_guard **g);
void xd_accept_failed(struct evconnlistener *lst, void *guard);

/* ---- the admin listener (execd_admin.c, on the loop) ---- */

/* Serves GET /metrics and GET /health on fd (a listening TCP socket, owned
 * from here on, closed on failure too): at most 16 connections, each closed
 * 10 s after accept. NULL when out of memory. */
typedef struct xd_admin xd_admin;
xd_admin *xd_admin_start(struct event_base *base, int fd);
/* Closes the listener and every admin connection; *admin becomes NULL. */
void xd_admin_free(xd_admin **admin);

#endif
