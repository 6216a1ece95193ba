/*
 * pinhole/execd_client.h - the ExecutionEnvironment and WorkspaceFiles ports
 * and the lease lifecycle, served by pinhole-execd over its unix socket
 * (docs/execd.md). This is what a worker links: the worker keeps its secrets
 * and the artifact store; the execution host keeps the sandboxes.
 *
 * Every function mirrors the in-process one of the same name without
 * "execd_" (pinhole/sandbox.h, pinhole/workspace.h, pinhole/sandbox_lease.h)
 * with the same types for specs, commands, results, stats and listings, the
 * same statuses and the same ownership; pinhole/execd_as_port.h maps the
 * in-process names onto these so port code compiles unchanged against the
 * service. Differences, all in the direction of the topology:
 *  - spec.passthrough_file is read here, by the worker, with the sandbox's
 *    own tier rules (refused names are warned about through config->log and
 *    never sent); the values sent are tier 1 only;
 *  - spec.network.proxy_socket_path is not sent (a host path): the service
 *    uses its own --proxy-socket;
 *  - config->state_dir is not used (the service has its own);
 *  - a failure of the connection is PH_E_IO; `busy` from the service is
 *    PH_E_LIMIT with a message starting "busy:".
 * One ph_execd_service is one connection; its calls are serialized (a mutex),
 * so it may be shared by threads, but one command at a time runs through it.
 * Objects obtained from a service must be released before it is closed.
 */
#ifndef PINHOLE_EXECD_CLIENT_H
#define PINHOLE_EXECD_CLIENT_H

#include "pinhole/sandbox.h"
#include "pinhole/workspace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_execd_service ph_execd_service;
typedef struct ph_execd_environment ph_execd_environment;
typedef struct ph_execd_workspace ph_execd_workspace;
typedef struct ph_execd_lease ph_execd_lease;

/* The environment variable naming the default socket. */
#define PH_EXECD_SOCKET_ENV "PINHOLE_EXECD_SOCKET"

/* The environment variable naming the uid the service runs as (unset:
 * root or the client's own effective uid; never a third uid). */
#define PH_EXECD_UID_ENV "PINHOLE_EXECD_UID"

/*
 * Connects to the service at socket_path and says hello. Before anything
 * is sent, the peer's uid (SO_PEERCRED) must be the service's (see
 * PH_EXECD_UID_ENV): otherwise PH_E_DENIED, execd_peer_untrusted. config->mechanism
 * must be the service's (else PH_E_UNSUPPORTED naming both);
 * config->hard_cap_ms (> 0) lowers the service's cap for what this
 * connection creates; config->log receives the sandbox's warnings (NULL:
 * stderr). config is copied. On PH_OK *out is freed with
 * ph_execd_service_close.
 */
PH_API ph_status ph_execd_service_open(const char *socket_path, const ph_service_config *config,
                                       ph_execd_service **out, ph_diag *diag);
/* A service on another machine: TCP with mutual TLS. The worker's
 * certificate subject is its identity to the service. Strings are borrowed
 * for the call. */
typedef struct ph_execd_tls_config {
    const char *host;        /* numeric address or name to connect to */
    uint16_t port;
    const char *server_name; /* checked against the service's certificate; NULL: host */
    const char *ca_file;     /* PEM: the CA that signed the service's certificate */
    const char *cert_file;   /* PEM: this worker's certificate chain */
    const char *key_file;    /* PEM: its private key */
} ph_execd_tls_config;

/* ph_execd_service_open over TLS. A handshake the service refuses (no
 * certificate, another CA's) or a service certificate that does not verify
 * is PH_E_DENIED naming the TLS error. */
PH_API ph_status ph_execd_service_open_tls(const ph_execd_tls_config *tls,
                                           const ph_service_config *config,
                                           ph_execd_service **out, ph_diag *diag);
/* ph_execd_service_open on the socket named by $PINHOLE_EXECD_SOCKET
 * (PH_E_UNSUPPORTED when it is unset). */
PH_API ph_status ph_execd_service_open_default(const ph_service_config *config,
                                               ph_execd_service **out, ph_diag *diag);
/* Closes the connection, frees *svc, sets it NULL (NULL allowed). */
PH_API void ph_execd_service_close(ph_execd_service **svc);
/* PH_OK when the service at $PINHOLE_EXECD_SOCKET answers and runs m, else
 * PH_E_UNSUPPORTED with why. */
PH_API ph_status ph_execd_mechanism_available(ph_sandbox_mechanism m, ph_diag *diag);

/* ---- ExecutionEnvironment ---- */
PH_API ph_status ph_execd_environment_create(ph_execd_service *svc,
                                             const ph_environment_spec *spec,
                                             ph_execd_environment **out, ph_diag *diag);
/* On PH_OK *out is a new result (ph_execution_result_free). */
PH_API ph_status ph_execd_environment_execute(ph_execd_environment *env,
                                              const ph_execution_command *cmd,
                                              ph_execution_result **out, ph_diag *diag);
/* Destroys the sandbox, frees *env, sets it NULL (NULL allowed). Not for a
 * lease's environment (the lease owns it). */
PH_API void ph_execd_environment_destroy(ph_execd_environment **env);
/* A new WorkspaceFiles capability on env (ph_execd_workspace_close). */
PH_API ph_status ph_execd_environment_workspace(ph_execd_environment *env,
                                                ph_execd_workspace **out, ph_diag *diag);
/* The service's id of env ("env-<16 hex>"); static for env's lifetime. */
PH_API const char *ph_execd_environment_id(const ph_execd_environment *env);

/* ---- WorkspaceFiles: as pinhole/workspace.h ---- */
PH_API void ph_execd_workspace_close(ph_execd_workspace **ws);
PH_API ph_status ph_execd_workspace_stat(ph_execd_workspace *ws, const char *path,
                                         ph_ws_stat *out, ph_diag *diag);
/* *data: new, NUL-terminated (free()). */
PH_API ph_status ph_execd_workspace_read(ph_execd_workspace *ws, const char *path,
                                         size_t max_bytes, uint8_t **data, size_t *len,
                                         ph_diag *diag);
/* *fd_out: a new read-only descriptor (a sealed memory file holding the
 * bytes read), owned by the caller. */
PH_API ph_status ph_execd_workspace_open_read(ph_execd_workspace *ws, const char *path,
                                              uint64_t max_bytes, int *fd_out,
                                              ph_ws_stat *st_out, ph_diag *diag);
PH_API ph_status ph_execd_workspace_write(ph_execd_workspace *ws, const char *path,
                                          const void *data, size_t len, uint32_t mode,
                                          ph_diag *diag);
PH_API ph_status ph_execd_workspace_write_fd(ph_execd_workspace *ws, const char *path,
                                             int src_fd, uint64_t max_bytes, uint32_t mode,
                                             ph_diag *diag);
/* *out: new (ph_ws_list_free). */
PH_API ph_status ph_execd_workspace_list(ph_execd_workspace *ws, const char *path,
                                         size_t max_entries, ph_ws_list **out, ph_diag *diag);

/* ---- leases: as pinhole/sandbox_lease.h ---- */
PH_API ph_status ph_execd_lease_open(ph_execd_service *svc, const ph_environment_spec *spec,
                                     int64_t approval_hold_seconds, ph_execd_lease **out,
                                     ph_diag *diag);
/* *env is borrowed: valid until a hold destroys it or the lease ends. */
PH_API ph_status ph_execd_lease_environment(ph_execd_lease *lease, ph_execd_environment **env,
                                            ph_diag *diag);
PH_API ph_status ph_execd_lease_workspace(ph_execd_lease *lease, ph_execd_workspace **ws,
                                          ph_diag *diag);
/* false also when the service cannot be asked. */
PH_API bool ph_execd_lease_has_sandbox(const ph_execd_lease *lease);
PH_API void ph_execd_lease_hold_begin(ph_execd_lease *lease, int64_t now_seconds);
PH_API bool ph_execd_lease_hold_tick(ph_execd_lease *lease, int64_t now_seconds);
PH_API bool ph_execd_lease_hold_end(ph_execd_lease *lease, int64_t now_seconds);
/* Ends the lease (the service destroys its sandbox), frees *lease, sets it
 * NULL (NULL allowed). */
PH_API void ph_execd_lease_end(ph_execd_lease **lease);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_EXECD_CLIENT_H */
