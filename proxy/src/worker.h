/* worker.h - one libevent loop per thread. The main thread runs a loop for
 * signals and the admin listener; each worker thread runs its own loop
 * owning its listeners, its resolver (the guard's driver, with its DNS
 * cache) and its connections. Nothing of a worker is touched by another
 * thread except through event_base_once/event_active (libevent_pthreads
 * makes those safe) and the atomics in metrics and limits. */
#ifndef PX_WORKER_H
#define PX_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "pinhole/status.h"
#include "sockaddr.h"

struct event;
struct event_base;
struct px_conn;
struct px_listener;
struct px_dns;
struct px_proxied;

typedef struct px_worker {
    int id;
    struct event_base *base;
    pthread_t thread;
    struct px_listener *listeners[PX_LISTEN_MAX + 1];
    int nlisteners;
    struct px_dns *dns;
    struct px_conn *conns;        /* doubly linked list of live connections */
    long nconns;
    struct px_proxied *proxied;   /* balancers' connections whose PROXY header is
                                   * still arriving (accept_proxied.c) */
    bool draining;                /* then the loop ends with the last connection (px_conn_free) */
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

#endif
