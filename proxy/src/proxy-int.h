/* proxy-int.h - the pieces of pinhole-proxy and how they talk to each other.
 *
 * Threads: the main thread runs a libevent loop for signals and the admin
 * listener; each worker thread runs its own loop owning its listeners, its
 * resolver (the guard's driver, with its DNS cache) and its connections. Nothing of a worker is
 * touched by another thread except through event_base_once/event_active
 * (libevent_pthreads makes those safe) and the atomics in metrics and limits.
 */
#ifndef PX_PROXY_INT_H
#define PX_PROXY_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <event2/event.h>

#include "config.h"
#include "pinhole/grant.h"
#include "pinhole/guard.h"
#include "pinhole/resolve.h"
#include "pinhole/status.h"
#include "pinhole/table.h"

struct evconnlistener;
struct bufferevent;
struct px_dns;
struct px_dns_query;
struct px_conn;
struct px_worker;

/* ---- listener.c ---------------------------------------------------------- */

typedef struct px_sockaddr {
    struct sockaddr_storage ss;
    socklen_t len;
} px_sockaddr;

/* Parses "1.2.3.4:80" or "[::1]:80" (numeric only: listeners are not
 * destinations and are never resolved). */
ph_status px_sockaddr_parse(const char *text, px_sockaddr *out, ph_diag *diag);
/* Formats an address as "1.2.3.4:80" / "[::1]:80". */
void px_sockaddr_format(const struct sockaddr *sa, char *buf, size_t cap);
/* Formats only the address part ("1.2.3.4", "::1"). */
void px_addr_format(const struct sockaddr *sa, char *buf, size_t cap);

/* A bound, listening, non-blocking TCP socket with SO_REUSEPORT (every worker
 * binds its own, the kernel spreads connections). first: the first socket
 * of this address in this process; once bound, before listening, it fails
 * when something already accepts there (a probe connect succeeds), so a
 * second instance cannot join the port group. *addr is updated to the bound address (port 0: the kernel's
 * choice, which the other workers then bind). Returns the fd or -1. */
int px_listen_tcp(px_sockaddr *addr, bool first, ph_diag *diag);
/* A unix listening socket at path with mode. A stale socket (nothing
 * accepts on it) is replaced; a live one is an error naming its holder
 * (SO_PEERCRED pid); any other file is an error. */
int px_listen_unix(const char *path, unsigned mode, ph_diag *diag);

/* Wraps fd in an evconnlistener on base that hands connections to the
 * worker; on EMFILE/ENFILE it pauses accepting for a moment and retries. */
struct evconnlistener *px_listener_attach(struct px_worker *w, int fd, bool close_on_free);

/* ---- worker.c ------------------------------------------------------------ */

typedef struct px_worker {
    int id;
    struct event_base *base;
    pthread_t thread;
    struct evconnlistener *listeners[PX_LISTEN_MAX + 1];
    int nlisteners;
    struct px_dns *dns;
    struct px_conn *conns;        /* doubly linked list of live connections */
    long nconns;
    bool draining;
    struct event *drain_deadline;
    const px_config *cfg;
    uint64_t next_conn_seq;
    atomic_bool recheck_pending;  /* a recheck pass is scheduled, not yet run */
    atomic_bool finished;         /* the loop ended (set by the worker's thread) */
} px_worker;

/* Creates worker id (base, DNS channel, one SO_REUSEPORT listener per
 * address of addrs[cfg->listen_count]: worker 0 checks nobody else holds
 * them and writes the bound ports back; the unix listener fd, if >= 0, is
 * shared by every worker). */
ph_status px_worker_init(px_worker *w, int id, const px_config *cfg, px_sockaddr *addrs,
                         int unix_fd, ph_diag *diag);
ph_status px_worker_start(px_worker *w);
/* From the main thread: stop accepting, let tunnels finish until the drain
 * deadline, then close them; the worker's loop then ends. */
void px_worker_request_drain(px_worker *w);
/* From any thread: the worker's loop has ended (its drain is complete). */
bool px_worker_finished(px_worker *w);
void px_worker_join_and_free(px_worker *w);
/* From any thread: the policy changed; the worker rechecks its open
 * connections on its own thread (px_conn_recheck_all). */
void px_worker_request_recheck(px_worker *w);
/* Called by a connection when it ends (the worker may finish its drain). */
void px_worker_conn_gone(px_worker *w);

/* ---- tunnel.c (one client connection, the decision sequence) ------------- */

void px_conn_accept(px_worker *w, int fd, const struct sockaddr *peer, int peerlen);
/* Closes every connection of the worker (drain deadline, shutdown). */
void px_conn_close_all(px_worker *w);
/* Closes connections that are not tunnels yet (drain: no new work). */
void px_conn_close_idle_heads(px_worker *w);
/* After a reload: every connection past its decision is decided again
 * against the policy now in force (its grant re-verified, its destination
 * checked again); one that fails is ended: end=key_revoked when its grant
 * no longer verifies, end=grant_expired when it expired, end=policy_revoked
 * when the destination is no longer allowed (unless
 * keep_tunnels_on_reload). */
void px_conn_recheck_all(px_worker *w);

/* ---- dns_async.c --------------------------------------------------------- */

/* The answer is the guard's (pinhole/resolve.h): every address checked,
 * the query's port set, cached there. */
typedef void (*px_dns_cb)(const ph_resolve_answer *answer, void *arg);

ph_status px_dns_new(struct event_base *base, const px_config *cfg, struct px_dns **out,
                     ph_diag *diag);
void px_dns_free(struct px_dns **dns);
/* Resolves host (canonical, never an IP literal: the guard's parsers have
 * refused those) A and AAAA for port. cb runs exactly once, always later,
 * from the worker's loop (never within this call, within c-ares or within
 * px_dns_cancel), unless the query is cancelled first. The query is owned
 * by dns_async.c and the guard (rules at struct px_dns_query and at
 * struct ph_resolve_query in guard/src/resolver.c):
 * the returned handle is valid until cb starts or px_dns_cancel, whichever
 * comes first; the caller forgets it in cb. NULL (cb will not run): out of
 * memory. */
struct px_dns_query *px_dns_resolve(struct px_dns *dns, const char *host, uint16_t port,
                                    px_dns_cb cb, void *arg);
/* Frees the query; its callback will not run. q must be a live handle (or
 * NULL). */
void px_dns_cancel(struct px_dns_query *q);

/* ---- relay.c ------------------------------------------------------------- */

typedef struct px_relay px_relay;
typedef void (*px_relay_done_cb)(void *arg, const char *why);

/* Relays between two connected non-blocking sockets (no event of the
 * caller's may watch them any more) until both directions have ended (EOF
 * propagated as shutdown(SHUT_WR)), an error, the idle timeout, life_s
 * seconds from now (then done gets life_end) or px_relay_stop. On success
 * takes ownership of both sockets; on NULL (out of memory) the caller still
 * owns both. early (copied): bytes already read from the client, the first
 * to go upstream. greeting (copied) is sent to the client before any
 * upstream byte and is not counted. *up / *down count the bytes
 * client->upstream (early included) and upstream->client. Nothing moves
 * before px_relay_run. */
px_relay *px_relay_start(struct event_base *base, int client_fd, int upstream_fd,
                         const void *early, size_t early_len, const char *greeting,
                         size_t greeting_len, const px_config *cfg, long life_s,
                         const char *life_end, uint64_t *up, uint64_t *down,
                         px_relay_done_cb done, void *arg);
/* Sends the greeting and the early bytes at once and starts relaying. done
 * runs once, at the end (possibly already within this call: the caller must
 * not touch what done frees afterwards). */
void px_relay_run(px_relay *r);
/* Ends the relay now: done runs with why, within this call (and may free
 * the relay: the caller must not touch it afterwards). */
void px_relay_stop(px_relay *r, const char *why);
/* Closes both sockets; done does not run. */
void px_relay_free(px_relay **r);

/* ---- limits.c ------------------------------------------------------------ */

/* Overall connection slots (atomic): at most min(max, the descriptor cap). */
bool px_limits_conn_acquire(long max);
void px_limits_conn_release(void);
long px_limits_conn_active(void);
/* The most connections the descriptor limit allows (two descriptors each,
 * client and upstream, beside the reserve); LONG_MAX until set. */
void px_limits_set_fd_cap(long cap);
/* A splice pipe (two descriptors) for the relay, only from the room the
 * connections leave: connections + pipes stay within the descriptor cap. */
bool px_limits_pipe_acquire(void);
void px_limits_pipe_release(void);
/* Connections still sending their request head (atomic). */
bool px_limits_head_acquire(long max);
void px_limits_head_release(void);
/* Keyed slots: per tenant+lease (from the grant), and per peer (the key
 * px_conn_accept derives from who connected: the TCP source address, or the
 * unix peer's process id). Bounded tables; a full window refuses. */
#define PX_LIMIT_KEY_MAX (2 * PH_GRANT_FIELD_MAX + 2)
bool px_limits_lease_acquire(const char *tenant, const char *lease, long max);
void px_limits_lease_release(const char *tenant, const char *lease);
bool px_limits_peer_acquire(const char *peer_key, long max);
void px_limits_peer_release(const char *peer_key);
/* The peer's connections still sending their request head (so one peer's
 * slow heads cannot take the overall head slots from everyone). */
bool px_limits_peer_head_acquire(const char *peer_key, long max);
void px_limits_peer_head_release(const char *peer_key);

/* ---- reload.c: the policy in force (table and keyring) -------------------- */

/* Loads table and key for the first time (startup failures are fatal). */
ph_status px_policy_init(const px_config *cfg, ph_diag *diag);
/* ph_guard_reload_policy: a new table and keyring are put in force together
 * when either file changed; if either fails, neither changes (counted and
 * logged, the old pair keeps serving). On success runs the change hook
 * (below) when the table or the keys changed. */
ph_status px_policy_reload(ph_diag *diag);
/* hook(arg) runs on the reloading thread after every successful reload
 * (main registers one that asks each worker to recheck its tunnels). */
void px_policy_on_change(void (*hook)(void *arg), void *arg);
void px_policy_shutdown(void);

/* The policy object in force (borrowed; valid from px_policy_init to
 * px_policy_shutdown): decisions go to ph_decide_connect on it. */
ph_guard *px_policy(void);
/* The loaded policy id (hex), "" before the first load. */
void px_policy_id(char out[PH_TABLE_ID_HEX_LEN + 1]);

/* ---- metrics.c ----------------------------------------------------------- */

void px_metrics_request(ph_reason reason);
void px_metrics_tunnel_open(void);
void px_metrics_tunnel_close(void);
void px_metrics_bytes(uint64_t up, uint64_t down);
void px_metrics_dns_latency(double seconds);
void px_metrics_reload(bool ok);
void px_metrics_accept_backoff(void);
/* A head parser ran (a head arriving in pieces is parsed a few times, not
 * once per piece: ph_h1_head_scan). */
void px_metrics_head_parse(void);
/* Writes the Prometheus text exposition into buf. Returns the length. */
struct evbuffer;
void px_metrics_render(struct evbuffer *out);

/* ---- log_json.c ---------------------------------------------------------- */

typedef struct px_log_record {
    uint64_t conn_id;
    const char *peer;
    const char *tenant, *lease, *list;
    const char *host;
    unsigned port;
    const char *dialed;       /* address:port connected to, or NULL */
    const char *checked;      /* the checked addresses, space-separated, or NULL */
    int status;               /* HTTP status answered */
    ph_reason reason;
    const char *detail;       /* e.g. the denied block; may be NULL */
    const char *rule_file;
    unsigned rule_line;
    const char *policy_id;
    uint64_t bytes_up, bytes_down;
    double duration_s;
    const char *end;          /* why the tunnel ended, or NULL */
    const char *method;       /* a forwarded request's method; NULL for a CONNECT */
} px_log_record;

/* One JSON line on stdout per connection, or per forwarded request (method
 * set: event "request"), with a single write(2). */
void px_log_connection(const px_log_record *rec);
/* A JSON event line ("start", "reload", "warning", ...) on stderr. */
void px_log_event(const char *level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Routes libevent's own messages (its warnings and errors would otherwise
 * go to stderr as plain text) into event lines: event "libevent", level
 * from px_log_libevent_level. Call once, before any event base exists
 * (libevent's rule for event_set_log_callback). */
void px_log_route_libevent(void);
/* EVENT_LOG_DEBUG/MSG/WARN/ERR as "debug", "info", "warning", "error". */
const char *px_log_libevent_level(int severity);

/* ---- admin.c ------------------------------------------------------------- */

/* The admin listener and its connections (ownership: admin.c's header). */
struct px_admin;
/* Serves /metrics, /healthz, /readyz and POST /reload on the main loop, at
 * most max_connections at once (the next is answered 503 proxy_overloaded
 * and closed); *bound gets the address listened on (port 0: the kernel's
 * choice). The caller owns the result and frees it with px_admin_free
 * after the loop ended. NULL: diag says why. */
struct px_admin *px_admin_start(struct event_base *base, const char *listen_addr,
                                long max_connections, px_sockaddr *bound, ph_diag *diag);
/* Closes the listener and every admin connection; *admin becomes NULL. */
void px_admin_free(struct px_admin **admin);
void px_admin_set_draining(void);
/* Admin connections refused over the cap so far (for /metrics). */
unsigned long px_admin_refused(void);

/* ---- drain.c ------------------------------------------------------------- */

/* Installs SIGTERM/SIGINT (drain, then exit), SIGHUP (reload) on the main
 * loop; returns after the drain completed. The main loop keeps running
 * through the drain: the admin listener answers (/readyz 503 draining) and
 * SIGHUP still reloads (a key revoked then still ends draining tunnels);
 * the handlers stay installed until every worker ended, so no signal meets
 * its default action (SIGHUP's: terminate) while tunnels are open. */
int px_run_main_loop(struct event_base *base, px_worker *workers, int nworkers,
                     const px_config *cfg);

/* ---- privdrop.c ---------------------------------------------------------- */

/* When running as root and user is set: setgroups/setgid/setuid to it and
 * verify root cannot be regained. Root with no user set is refused. */
ph_status px_drop_privileges(const char *user, ph_diag *diag);

#endif
