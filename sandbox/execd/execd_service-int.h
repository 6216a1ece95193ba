/* execd_service-int.h - the daemon's configuration and its serving loop,
 * between execd_main.c (options, startup checks, recovery) and
 * execd_service.c (listener, connections, thread pool, operations). */
#ifndef PINHOLE_EXECD_SERVICE_INT_H
#define PINHOLE_EXECD_SERVICE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "execd-int.h"

#define XD_MAX_ALLOW 32
/* "uid:<n>" or "cert:<RFC 2253 subject>", NUL included. */
#define XD_IDENTITY_MAX 512

typedef struct xd_config {
    const char *socket_path;
    unsigned socket_mode;
    const char *state_dir;
    const char *proxy_socket;   /* NULL: grants are unsupported */
    ph_sandbox_mechanism mechanism;
    ph_service_mode mode;
    int64_t hard_cap_ms;
    size_t max_sandboxes;
    size_t max_executions;      /* threads */
    size_t queue;               /* waiting requests at most */
    size_t max_request_bytes;
    size_t max_connections;     /* open connections at most; more are closed at once */
    /* Fair shares: what one identity may hold of connections, requests
     * queued or running, and live sandboxes (0 in the options: half the
     * daemon's, at least 1). */
    size_t max_connections_per_identity;
    size_t max_requests_per_identity;
    size_t max_sandboxes_per_identity;
    /* A connection not identified this long after accept is closed (total,
     * not idle); a frame not complete this long after its first byte closes
     * its connection. */
    int64_t handshake_timeout_ms;
    int64_t frame_timeout_ms;
    int64_t grace_seconds;
    uid_t allow_uid[XD_MAX_ALLOW];
    size_t allow_uid_count;
    gid_t allow_gid[XD_MAX_ALLOW];
    size_t allow_gid_count;
    /* TCP with mutual TLS (all four or none): "host:port" (port 0: the
     * kernel's choice, logged), the server's certificate chain and key, and
     * the CA that signs the workers' certificates. */
    const char *tls_listen;
    const char *tls_cert;
    const char *tls_key;
    const char *tls_ca;
    /* "host:port" of the admin listener (GET /metrics, /health); NULL: none. */
    const char *metrics_listen;
    /* ph_service_config's caps on reserved workspace bytes (0: derived). */
    uint64_t workspace_total_max_bytes;
    uint64_t workspace_tenant_max_bytes;
} xd_config;

/* One JSON log line on stderr: {"level":level,"module":"execd","event":event}
 * plus the members of extra (borrowed; may be NULL). Thread-safe. */
void xd_log(const char *level, const char *event, json_t *extra);

/* The sandbox's warning sink for every service the daemon opens: a warning
 * raised while a request is served on this thread goes into that request's
 * "warnings"; any other is logged. */
void xd_sandbox_log(void *ctx, const char *json_line);

struct ssl_ctx_st;
/* Serves cfg until SIGTERM/SIGINT, then destroys every sandbox. listen_fd is
 * the bound, listening unix socket; tls_fd (-1: none) a listening TCP socket
 * served with mutual TLS through tls_ctx (borrowed; it verifies client
 * certificates); admin_fd (-1: none) a listening TCP socket for GET /metrics
 * and /health. Every descriptor is owned from here on. Returns the exit
 * code. */
int xd_serve(const xd_config *cfg, int listen_fd, int tls_fd, struct ssl_ctx_st *tls_ctx,
             int admin_fd);

#endif
