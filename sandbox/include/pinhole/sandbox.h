/*
 * pinhole/sandbox.h - the ExecutionEnvironment port (ADR-0029 decisions 1-3,
 * 7-10, 13, 14; DESIGN section 8).
 *
 * The port has exactly three operations:
 *   ph_environment_create  (EnvironmentSpec)            -> EnvironmentHandle
 *   ph_environment_execute (handle, ExecutionCommand)   -> ExecutionResult
 *   ph_environment_destroy (handle)
 * Reading workspace files is a different capability (pinhole/workspace.h),
 * handed out by the lease (pinhole/sandbox_lease.h), never by this port.
 *
 * No host path crosses the port in either direction: the handle is opaque
 * and carries none, the workspace appears to commands at the constant
 * /workspace, files_changed paths are workspace-relative, and diagnostics
 * never quote a host path.
 *
 * The adapters behind the port are mechanisms: gvisor (production default),
 * docker (development fallback), fake (a real adapter without isolation).
 * ph_execution_service_open runs the startup check, which refuses docker and
 * fake in production mode.
 */
#ifndef PINHOLE_SANDBOX_H
#define PINHOLE_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The constant path at which every command sees its workspace. */
#define PH_SANDBOX_WORKSPACE_PATH "/workspace"

/* "Not supplied" for the optional numeric fields below. */
#define PH_SANDBOX_UNSET (-1)

/* ------------------------------------------------------------------ */
/* Mechanisms and the startup check                                    */

typedef enum ph_sandbox_mechanism {
    PH_MECHANISM_GVISOR = 0,
    PH_MECHANISM_DOCKER = 1,
    PH_MECHANISM_FAKE = 2,
} ph_sandbox_mechanism;

/* Static name: "gvisor", "docker", "fake"; "unknown" otherwise. */
PH_API const char *ph_sandbox_mechanism_name(ph_sandbox_mechanism m);
/* Parses a name into *out. PH_OK or PH_E_INVAL (with the accepted names). */
PH_API ph_status ph_sandbox_mechanism_from_name(const char *name, ph_sandbox_mechanism *out,
                                                ph_diag *diag);

typedef enum ph_service_mode {
    PH_SERVICE_MODE_PRODUCTION = 0,
    PH_SERVICE_MODE_DEVELOPMENT = 1,
} ph_service_mode;

/* Static name: "production", "development". */
PH_API const char *ph_service_mode_name(ph_service_mode m);
/* Parses "production" or "development". PH_OK or PH_E_INVAL. */
PH_API ph_status ph_service_mode_from_name(const char *name, ph_service_mode *out,
                                           ph_diag *diag);

/*
 * The startup check (gate sandbox.startup_refuses_unsafe_mechanism).
 * PH_E_DENIED when mode is production and mechanism is docker or fake (they
 * do not isolate the kernel); the diagnostic's message starts with
 * "mechanism_refused_in_production:" and names the mechanism and the fix.
 * PH_OK otherwise. Whether a mechanism is installed is not checked here.
 */
PH_API ph_status ph_sandbox_startup_check(ph_service_mode mode, ph_sandbox_mechanism mechanism,
                                          ph_diag *diag);

/* ------------------------------------------------------------------ */
/* The execution service (composition root of the adapters)           */

/* Receives one warning or notice as a single JSON object line (no newline).
 * Called synchronously from the calling thread. */
typedef void ph_sandbox_log_fn(void *ctx, const char *json_line);

typedef struct ph_service_config {
    ph_service_mode mode;
    ph_sandbox_mechanism mechanism; /* the one mechanism this service runs */
    /* The service hard cap on any command, milliseconds (> 0). It applies
     * whether or not anything else bounds the command (decision 7). */
    int64_t hard_cap_ms;
    /* Directory under which the service keeps per-environment state
     * (specs, bundles, workspaces). Host-side only; it never appears in
     * results. The service creates it (mode 0700) or refuses it unless it is
     * a directory owned by the service's euid with mode 0700, not a symlink,
     * under ancestors only root or the service can change (PH_E_DENIED with
     * a stable code: state_dir_wrong_owner, state_dir_wrong_mode,
     * state_dir_symlink, state_dir_untrusted_ancestor). NULL:
     * /var/lib/pinhole/sandbox as root, else $XDG_STATE_HOME/pinhole/sandbox
     * or ~/.local/state/pinhole/sandbox. */
    const char *state_dir;
    /* Host uids for sandbox processes: each environment gets its own uid
     * (and the gid of the same number) from [id_first, id_first + id_count),
     * like a subuid range. 0/0: $PINHOLE_SANDBOX_ID_RANGE ("first:count"),
     * else PH_SANDBOX_ID_DEFAULT_FIRST:PH_SANDBOX_ID_DEFAULT_COUNT. A range
     * holding 65534 or any uid of /etc/passwd is refused (PH_E_INVAL,
     * id_range_account). As root, claims are host-wide
     * (PH_SANDBOX_ID_CLAIM_DIR), so services with different state
     * directories never give two environments one uid. */
    uint32_t id_first;
    uint32_t id_count;
    /* Warnings (passthrough list problems, refused names). NULL: one JSON
     * line per warning on stderr. */
    ph_sandbox_log_fn *log;
    void *log_ctx;
    /* Caps on the host disk that workspaces reserve (gvisor and docker
     * allocate each workspace's byte limit on the host at create): the sum
     * over every environment of the state directory, and over one tenant's.
     * A create over either is refused (PH_E_LIMIT, workspace_service_cap or
     * workspace_tenant_cap) and makes nothing. 0: derived from the state
     * directory's filesystem when the service opens: half its size for the
     * service, a quarter of that per tenant. The fake mechanism reserves
     * nothing. */
    uint64_t workspace_total_max_bytes;
    uint64_t workspace_tenant_max_bytes;
} ph_service_config;

/* The default host id range of sandbox processes: 65536 ids from
 * 2000000000, inside the block systemd leaves unused (1879048192 and up). */
#define PH_SANDBOX_ID_DEFAULT_FIRST 2000000000u
#define PH_SANDBOX_ID_DEFAULT_COUNT 65536u
/* Where a service running as root claims host ids (ids/<uid>), shared by
 * every service of the host; created root-owned 0700 and verified like a
 * state directory. */
#define PH_SANDBOX_ID_CLAIM_DIR "/run/pinhole-sandbox"

typedef struct ph_execution_service ph_execution_service;

/*
 * Opens the service: runs ph_sandbox_startup_check(config->mode,
 * config->mechanism) and refuses (PH_E_DENIED) exactly as it does, then
 * checks that the mechanism is available here (PH_E_UNSUPPORTED when it is
 * not, e.g. runsc missing). config is copied (strings too). On PH_OK *out is
 * a new service freed with ph_execution_service_close.
 */
PH_API ph_status ph_execution_service_open(const ph_service_config *config,
                                           ph_execution_service **out, ph_diag *diag);

/* Frees *svc and sets it to NULL. Every environment created through it must
 * have been destroyed first (an environment outliving its service is a bug). */
PH_API void ph_execution_service_close(ph_execution_service **svc);

/* Whether mechanism m can run on this machine (binary present, kernel
 * features). PH_OK or PH_E_UNSUPPORTED with the reason in diag. */
PH_API ph_status ph_sandbox_mechanism_available(ph_sandbox_mechanism m, ph_diag *diag);

/* ------------------------------------------------------------------ */
/* EnvironmentSpec                                                     */

typedef struct ph_sandbox_limits {
    int64_t memory_bytes;    /* PH_SANDBOX_UNSET: the mechanism default */
    int64_t pids;            /* maximum tasks; PH_SANDBOX_UNSET: default */
    int64_t cpu_millis;      /* CPU quota in thousandths of a CPU; UNSET: default */
    int64_t wall_clock_ms;   /* environment wall clock per command; UNSET: none */
    int64_t output_bytes;    /* cap on stdout and on stderr, each; UNSET: 1 MiB */
    /* The workspace's size and file count, enforced by the kernel (gvisor
     * and docker: the workspace is its own ext4 filesystem; a write past
     * either fails with ENOSPC inside). UNSET: 1 GiB, and 100000 inodes or
     * one per 4 KiB of the workspace when that is fewer. Bytes 16 MiB..1 TiB,
     * inodes 64..64 Mi and at most one per KiB of bytes (mkfs needs room
     * for them; more is PH_E_INVAL workspace_inodes_too_many). A file
     * larger than its workspace's filesystem (a sparse one) cannot be read
     * or exported (pinhole/workspace.h). The fake mechanism has none. */
    int64_t workspace_bytes;
    int64_t workspace_inodes;
} ph_sandbox_limits;

/* Network: none (grant_token == NULL), or the grant the worker issued and
 * the proxy's unix socket. Commands reach the proxy at 127.0.0.1:proxy_port
 * inside the sandbox (the mechanism forwards that port to the socket). */
typedef struct ph_sandbox_network {
    const char *grant_token;       /* NULL: no network */
    const char *proxy_socket_path; /* host path of the proxy's unix socket */
    uint16_t proxy_port;           /* in-sandbox forwarder port; 0: 3128 */
} ph_sandbox_network;

typedef struct ph_environment_spec {
    const char *tenant;          /* [A-Za-z0-9._-]{1,128} */
    const char *lease;           /* [A-Za-z0-9._-]{1,128} */
    ph_sandbox_mechanism mechanism; /* must equal the service's mechanism */
    ph_sandbox_limits limits;
    ph_sandbox_network network;
    /* The operator passthrough list (tier 1): a file of variable names, one
     * per line. NULL: none. Unreadable or malformed: tier 2 alone and a
     * warning, never a failure (decision 3). */
    const char *passthrough_file;
} ph_environment_spec;

/* Fills *limits with every field PH_SANDBOX_UNSET. */
PH_API void ph_sandbox_limits_init(ph_sandbox_limits *limits);

/* ------------------------------------------------------------------ */
/* EnvironmentHandle and the three operations                          */

/* Opaque. Carries no host path. */
typedef struct ph_environment ph_environment;

/*
 * create: makes the sandbox and its empty workspace. spec is copied. The
 * environment variables commands will see are built here (tiers 0-2), so
 * warnings about the passthrough list are logged once, at create. On PH_OK
 * *out is a new handle the caller releases with ph_environment_destroy.
 * PH_E_INVAL for a malformed spec (names the field), PH_E_DENIED when the
 * spec's mechanism is not the service's.
 */
PH_API ph_status ph_environment_create(ph_execution_service *svc, const ph_environment_spec *spec,
                                       ph_environment **out, ph_diag *diag);

typedef struct ph_execution_command {
    const char *const *argv;  /* NULL-terminated, argv[0] non-empty; never a shell string.
                                 argv[0] without '/' is searched in the sandbox's PATH. */
    const char *cwd;          /* workspace-relative working directory; NULL or "" = root */
    int64_t timeout_seconds;  /* the model's value; PH_SANDBOX_UNSET if none */
    int64_t run_budget_ms;    /* remaining run budget; PH_SANDBOX_UNSET if none */
    const uint8_t *stdin_data; /* NULL: stdin is empty (/dev/null) */
    size_t stdin_len;
    /* Optional streaming of the output while the command runs: called with
     * each piece of stdout (stream PH_STREAM_STDOUT) or stderr
     * (PH_STREAM_STDERR) as it is read, in order. The pieces are exactly the
     * bytes the result keeps (the first output cap bytes of each stream), so
     * their concatenation equals result->out / result->err. Called on the
     * executing thread from inside ph_environment_execute; data is valid only
     * during the call. It must return promptly and must not call back into
     * this environment: the deadline is checked between reads, so a callback
     * that blocks delays the kill (pinhole-execd's never waits: a peer that
     * does not read loses stream pieces, never the deadline). NULL: no
     * streaming. */
    void (*on_output)(void *ctx, int stream, const uint8_t *data, size_t len);
    void *on_output_ctx;
} ph_execution_command;

/* Streams of ph_execution_command.on_output. */
#define PH_STREAM_STDOUT 1
#define PH_STREAM_STDERR 2

/* Which bound set the timeout (decision 7). */
typedef enum ph_timeout_bound {
    PH_TIMEOUT_BOUND_SERVICE_CAP = 0,
    PH_TIMEOUT_BOUND_WALL_CLOCK = 1,
    PH_TIMEOUT_BOUND_RUN_BUDGET = 2,
    PH_TIMEOUT_BOUND_MODEL = 3,
} ph_timeout_bound;

/* Static stable code: "service_cap", "wall_clock", "run_budget", "model". */
PH_API const char *ph_timeout_bound_code(ph_timeout_bound b);

typedef enum ph_change_kind {
    PH_CHANGE_ADDED = 0,
    PH_CHANGE_MODIFIED = 1,
    PH_CHANGE_DELETED = 2,
} ph_change_kind;

/* Static: "added", "modified", "deleted". */
PH_API const char *ph_change_kind_name(ph_change_kind k);

/* Why files_changed may be incomplete: bits of files_changed_gaps. Nothing is
 * ever left out without one of them set (and files_changed_truncated). */
typedef enum ph_fc_gap {
    PH_FC_GAP_ENTRY_LIMIT = 1u << 0,   /* a walk stopped at its entry limit: only
                                          modifications seen on both sides are reported */
    PH_FC_GAP_CHANGE_LIMIT = 1u << 1,  /* more changes than the result carries (10,000,
                                          or 1 MiB of paths) */
    PH_FC_GAP_TOO_DEEP = 1u << 2,      /* a non-empty directory nested deeper than the
                                          walk goes was not walked */
    PH_FC_GAP_UNREADABLE = 1u << 3,    /* a directory could not be opened or read */
    PH_FC_GAP_PATH_TOO_LONG = 1u << 4, /* a change under a path longer than
                                          PH_WS_PATH_MAX bytes (not reportable) */
} ph_fc_gap;

/* Static reason code of one bit: "entry_limit", "change_limit", "too_deep",
 * "unreadable", "path_too_long" ("unknown" otherwise). */
PH_API const char *ph_fc_gap_name(unsigned gap);

typedef struct ph_file_change {
    char *path;          /* workspace-relative, normalized; owned by the result */
    ph_change_kind kind;
    uint64_t size;       /* size after the command; 0 for deleted */
} ph_file_change;

typedef struct ph_output {
    uint8_t *data;       /* NUL-terminated for convenience; owned by the result */
    size_t len;          /* bytes kept, <= the output cap */
    bool truncated;      /* the command wrote more than the cap */
} ph_output;

typedef struct ph_execution_result {
    bool exited;         /* true: exit_code is valid; false: killed by term_signal */
    int exit_code;
    int term_signal;
    bool timed_out;      /* the deadline passed and the process tree was killed */
    int64_t timeout_ms;  /* the deadline that applied */
    ph_timeout_bound timeout_bound; /* which bound set timeout_ms */
    int64_t duration_ms;
    ph_output out;       /* stdout */
    ph_output err;       /* stderr */
    ph_file_change *files_changed; /* sorted by path */
    size_t files_changed_count;
    bool files_changed_truncated;  /* files_changed_gaps != 0 */
    unsigned files_changed_gaps;   /* ph_fc_gap bits: why it may be incomplete */
    /* After the command the workspace had no free block or no free inode:
     * the command hit spec.limits.workspace_bytes or workspace_inodes (its
     * writes failed with ENOSPC). */
    bool workspace_full;
    /* Bytes of the kept output that on_output was not given: a streaming
     * consumer that fell behind (pinhole-execd drops pieces rather than wait
     * for a slow peer). The result above still holds them. 0 in-process. */
    uint64_t stream_dropped_bytes;
} ph_execution_result;

/*
 * execute: runs one command in the environment and waits for it. The
 * timeout is min(service cap, spec wall clock, run budget, model value
 * clamped to [1 s, cap]); at the deadline the whole process tree is killed.
 * files_changed is computed by the service from a snapshot taken before the
 * command. A command that cannot start (no such program) is a result with
 * exit code 127, as a shell would report it, not an error. Errors are the
 * service's own: PH_E_DENIED for a cwd refused by the path rules,
 * PH_E_NOT_FOUND for a missing cwd, PH_E_TIMEOUT when the run budget is
 * already spent (nothing is started), PH_E_IO when the mechanism failed.
 * On PH_OK *out is a new result freed with ph_execution_result_free.
 */
PH_API ph_status ph_environment_execute(ph_environment *env, const ph_execution_command *cmd,
                                        ph_execution_result **out, ph_diag *diag);

/* Frees *result (NULL allowed) and sets it to NULL. */
PH_API void ph_execution_result_free(ph_execution_result **result);

/*
 * destroy: kills anything still running in the sandbox, removes the sandbox
 * and its workspace, frees *env and sets it to NULL (NULL allowed).
 * Workspace capabilities obtained for it stay valid objects on a deleted,
 * empty directory: every file is gone (PH_E_NOT_FOUND) and writes fail.
 */
PH_API void ph_environment_destroy(ph_environment **env);

/* The tool description the platform shows the model for
 * sandbox.run_command (decision 1: the workspace is not durable). */
PH_API extern const char ph_sandbox_tool_description[];

/* The builtin tools' contracts, the JSON documents shipped in
 * sandbox/schemas/ (sandbox.run_command.json, artifact.export.json):
 * {"name", "description", "input_schema", "output_schema"}, JSON Schema
 * 2020-12. run_command's description is ph_sandbox_tool_description; its
 * output schema is the "result" of pinhole-execd's environment.execute
 * (docs/execd.md). Static, NUL-terminated. */
PH_API extern const char ph_tool_schema_run_command[];
PH_API extern const char ph_tool_schema_artifact_export[];

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_SANDBOX_H */
