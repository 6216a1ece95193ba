/* sandbox-int.h - private to the sandbox module (its sources, its CLI, its
 * tests, fuzzers and benchmarks). Not installed. */
#ifndef PINHOLE_SANDBOX_INT_H
#define PINHOLE_SANDBOX_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pinhole/clock.h"
#include "pinhole/diag.h"
#include "pinhole/sandbox.h"
#include "pinhole/workspace.h"

/* ---- workspace paths (workspace_path.c) ---- */

/* Test hook: use the O_NOFOLLOW component walk even where openat2 exists. */
extern bool ph_ws_force_component_walk;
/* Test hook: path components resolved by ph_ws_open_beneath so far (all
 * threads), the work a workspace operation costs the kernel's lookup. */
extern _Atomic unsigned long ph_ws_components_resolved;

/* Opens a normalized workspace-relative path beneath root_fd (O_CLOEXEC is
 * added). Returns a descriptor or -1 with errno (EXDEV/ELOOP: escape). */
int ph_ws_open_beneath(int root_fd, const char *normalized, int flags, mode_t mode);
/* Maps an errno from a resolution to a status + diagnostic naming `path`
 * (the caller's workspace-relative path, never a host path). */
ph_status ph_ws_errno_status(int err, const char *path, ph_diag *diag);
/* Normalizes a C string path or refuses it (PH_E_DENIED + stable code). */
ph_status ph_ws_normalize_or_refuse(const char *path, char out[static PH_WS_PATH_MAX + 1],
                                    ph_diag *diag);
/* Cuts the last component off a normalized path in place and returns it;
 * NULL when the path has one component (then the path is the leaf). */
const char *ph_ws_split_leaf(char *normalized);

/* ---- workspace objects (workspace_files.c) ---- */
ph_status ph_workspace_from_fd(int root_fd, ph_workspace **out, ph_diag *diag);
int ph_workspace_root_fd(const ph_workspace *ws);

/* ---- timeouts (timeout.c) ---- */
typedef struct ph_timeout_choice {
    int64_t ms;
    ph_timeout_bound bound;
} ph_timeout_choice;

/* min(cap, wall clock, budget, clamp(model, 1 s, cap)); unset inputs are
 * PH_SANDBOX_UNSET (or any negative value for wall clock and model "absent").
 * A budget <= 0 yields ms 0 with bound run_budget (the caller refuses). Ties
 * go to the earlier bound in the order cap, wall clock, budget, model. */
ph_timeout_choice ph_timeout_compose(int64_t hard_cap_ms, int64_t wall_clock_ms,
                                     int64_t run_budget_ms, int64_t model_seconds);

/* ---- tier 0 (env_tier0.c) ---- */

/* True when name is a tier-0 credential name (the rule of env_tier0.c). */
bool ph_env_name_is_credential(const char *name);
/* The static code of the tier-0 value rule value breaks as the value of
 * variable name ("url_userinfo", "credential_parameter",
 * "private_key_block", "issuer_token"), or NULL when it breaks none. */
const char *ph_env_value_credential_rule(const char *name, const char *value);
/* ph_env_value_credential_rule(name, value) != NULL. */
bool ph_env_value_is_credential(const char *name, const char *value);
/* The tier-0 table as text, one row per line ("prefix AWS_ name": kind,
 * text, where it applies), checked against the tier-0 table of
 * docs/sandbox.md. Static. */
const char *ph_env_credential_patterns_text(void);

/* ---- environment tiers (env_tiers.c) ---- */

/* True when name is one of the service's own settings
 * (PINHOLE_GVISOR_ROOTFS, PINHOLE_FORWARDER, PINHOLE_RUNSC,
 * PINHOLE_RUNSC_DEBUG_LOG, PINHOLE_DOCKER, PINHOLE_SANDBOX_ID_RANGE): a
 * service's environment may hold them (their values are still checked);
 * a sandbox's never does (they stay tier 0 there). */
bool ph_env_name_is_setting(const char *name);
/* True when name is set by tier 2 (operators cannot pass it through). */
bool ph_env_name_is_synthesized(const char *name);

typedef struct ph_env_block {
    char **vars;   /* "NAME=value", NULL-terminated; owned */
    size_t count;
} ph_env_block;

typedef struct ph_env_inputs {
    const char *lease;
    const ph_sandbox_network *network;
    const char *passthrough_file;      /* NULL: none */
    /* Where tier-1 values come from: the service's environment. */
    const char *(*getenv_fn)(const char *name);
    ph_sandbox_log_fn *log;
    void *log_ctx;
} ph_env_inputs;

/* Builds the environment from nothing (tiers 0-2). Never fails because of
 * the passthrough list (warnings go to in->log); fails only for memory. */
ph_status ph_env_build(const ph_env_inputs *in, ph_env_block *out, ph_diag *diag);
/* Tier 1 resolved by the caller instead of read here: while non-NULL on
 * the calling thread, ph_env_build takes the tier-1 variables ("NAME=value")
 * from this block instead of passthrough_file and getenv_fn, through the same
 * refusals and warnings. The execution service (pinhole-execd) sets it
 * around ph_environment_create with what the worker sent, then resets it to
 * NULL; the block is borrowed for that call only. */
extern _Thread_local const ph_env_block *ph_env_tier1_supplied;
/* Adds or replaces one variable ("PWD=/workspace/x"). */
ph_status ph_env_set(ph_env_block *env, const char *name, const char *value);
/* Value of name in env, or NULL. */
const char *ph_env_get(const ph_env_block *env, const char *name);
void ph_env_block_clear(ph_env_block *env);

/* ---- snapshots and files_changed (snapshot.c) ---- */

#define PH_SNAPSHOT_MAX_ENTRIES 100000
#define PH_FILES_CHANGED_MAX 10000
/* The paths of one files_changed, NULs included: what the result (and
 * pinhole-execd's JSON of it) holds in memory is bounded by this, not by
 * 10,000 paths of 4 KiB (40 MB). */
#define PH_FILES_CHANGED_PATH_BYTES (1024 * 1024)

typedef struct ph_snapshot ph_snapshot;

/* Walks the tree under root_fd without following any symlink (openat from
 * each directory's descriptor, O_NOFOLLOW), recording type, size, mtime,
 * ctime, inode and mode of each entry, at most max_entries (then
 * truncated). Memory grows with the sum of name lengths, bounded by
 * max_entries. */
ph_status ph_snapshot_take(int root_fd, size_t max_entries, ph_snapshot **out, ph_diag *diag);
bool ph_snapshot_truncated(const ph_snapshot *s);
/* ph_fc_gap bits the walk found (0: it saw everything). */
unsigned ph_snapshot_gaps(const ph_snapshot *s);
size_t ph_snapshot_count(const ph_snapshot *s);
void ph_snapshot_free(ph_snapshot **s);
/* Fills result->files_changed* from before/after. */
ph_status ph_snapshot_diff(const ph_snapshot *before, const ph_snapshot *after,
                           ph_execution_result *result, ph_diag *diag);

/* ---- byte strings in JSON and text (byte_strings.c) ---- */

struct json_t;
/* A new JSON string of the standard (padded) base64 of the len bytes at
 * data, or NULL when out of memory. */
struct json_t *ph_json_b64(const void *data, size_t len);
/* Sets obj[text_key] to the len bytes at data when they are valid UTF-8,
 * else obj[b64_key] to their standard base64 (padded). Returns 0, or -1
 * when out of memory (nothing set). */
int ph_json_set_bytes(struct json_t *obj, const char *text_key, const char *b64_key,
                      const void *data, size_t len);

/* ---- logging (environment.c) ---- */
void ph_sandbox_log_warning(ph_sandbox_log_fn *log, void *ctx, const char *event,
                            const char *detail_key, const char *detail);

/* ---- the service's state directory (state_dir.c) ----
 *
 * Every host-side file operation on service state goes through these, from
 * descriptors verified once (see state_dir.c for the threat): nothing below
 * the state directory is ever reached by re-resolving a path string, except
 * where runsc or docker must be given a path (the bundle, runsc's --root,
 * the workspace mount source); those paths are the state directory's walked
 * path plus directories made here (owner euid, mode 0700), so no non-root
 * user can swap a component of them. Diagnostics start with a stable code
 * ("state_dir_wrong_owner: ..."). */

/* Where the state lives when the configuration names none: as root
 * /var/lib/pinhole/sandbox, else $XDG_STATE_HOME/pinhole/sandbox or
 * $HOME/.local/state/pinhole/sandbox. */
#define PH_STATE_DIR_ROOT_DEFAULT "/var/lib/pinhole/sandbox"
/* *out: a new string (free) naming the default state directory. */
ph_status ph_state_dir_default(char **out, ph_diag *diag);

/* Opens the state directory at the absolute path `path`, creating it (0700)
 * and missing ancestors (0755) when absent. Walks from "/" with O_NOFOLLOW:
 * no component may be a symlink or "..", every ancestor is owned by root or
 * euid and writable by nobody else unless sticky. The directory itself must
 * be owned by euid with mode exactly 0700 (checked with fstat on the
 * descriptor). On PH_OK *fd is an O_RDONLY directory descriptor and *canon a
 * new string (free) with the walked path; PH_E_DENIED (state_dir_symlink,
 * state_dir_wrong_owner, state_dir_wrong_mode, state_dir_untrusted_ancestor)
 * or PH_E_IO otherwise, with nothing created beyond missing components. */
ph_status ph_state_dir_open(const char *path, int *fd, char **canon, ph_diag *diag);

/* Checks the open directory fd: owner euid and mode exactly 0700
 * (exact_0700) or at least not writable by group and other. `what` names it
 * in the diagnostic. */
ph_status ph_state_verify_dir(int fd, bool exact_0700, const char *what, ph_diag *diag);

/* Takes an exclusive flock on a fresh open file description of the
 * directory dir_fd (so two holders in one process exclude each other too),
 * waiting for it, a signal's EINTR retried. Returns the lock's descriptor
 * (the caller's: closing it releases the lock), or -1 with errno. */
int ph_state_lock_dir(int dir_fd);

/* mkdirat(dir_fd, name, mode) then ph_state_opendir. exclusive: an existing
 * name is refused (PH_E_DENIED) rather than reused. *fd is the caller's. */
ph_status ph_state_mkdir(int dir_fd, const char *name, mode_t mode, bool exclusive, int *fd,
                         ph_diag *diag);
/* Opens dir_fd/name (O_RDONLY|O_DIRECTORY|O_NOFOLLOW) and verifies it is
 * owned by euid and not writable by others. PH_E_NOT_FOUND when absent. */
ph_status ph_state_opendir(int dir_fd, const char *name, int *fd, ph_diag *diag);

/* Writes len bytes to dir_fd/name with mode through a temporary file made
 * with O_EXCL|O_NOFOLLOW and renameat, so a reader sees the whole file or
 * the previous one, and a planted symlink is never written through. */
ph_status ph_state_write(int dir_fd, const char *name, const void *data, size_t len,
                         mode_t mode, ph_diag *diag);

/* Reads dir_fd/name written by ph_state_write: it must be a regular file
 * (O_NOFOLLOW), owned by euid, with no group or other mode bits and one
 * link, at most 1 MiB. *out is a new NUL-terminated buffer (free); *len its
 * length (len may be NULL). PH_E_DENIED (state_file_*) for anything else. */
ph_status ph_state_read(int dir_fd, const char *name, char **out, size_t *len, ph_diag *diag);

/* Who may use a state directory. pinhole-execd's start destroys every
 * environment its state directory holds (its recovery: they are a dead
 * run's), so environments the pinhole-sandbox CLI keeps there between its
 * runs would be destroyed by it. The first of the two to use a directory
 * claims it: dir_fd/owner (0600, published whole, never replaced) names
 * the owner, and the other is refused there. */
#define PH_STATE_OWNER_FILE "owner"
#define PH_STATE_OWNER_EXECD "pinhole-execd"
#define PH_STATE_OWNER_CLI "pinhole-sandbox"
/* Claims dir_fd for owner (PH_STATE_OWNER_*), or finds it already owner's:
 * PH_OK. A directory another owns is PH_E_DENIED, "state_dir_owned: ...
 * belongs to OTHER", with nothing changed. A directory without the file
 * (an earlier version's) is taken to be pinhole-execd's when it holds
 * execd.lock (a daemon's, live or killed) and pinhole-sandbox's when it
 * holds environments without one, and is claimed only for that owner; an
 * empty one for owner. ph_state_read's refusals for a file that is not one
 * of ours; PH_E_IO. */
ph_status ph_state_claim(int dir_fd, const char *owner, ph_diag *diag);
/* Gives up owner's claim of dir_fd when it holds no environment any more
 * (pinhole-execd's clean stop: its state directory is left empty, for
 * either to claim next). */
void ph_state_release(int dir_fd, const char *owner);

/* PH_OK when path names a unix socket reached through directories only
 * root or the euid can change (a walk from "/" with O_NOFOLLOW, no
 * symlink on the way; in a sticky shared directory the socket must be
 * root's or ours); PH_E_INVAL (proxy_socket_not_absolute, _missing,
 * _symlink, _not_socket, _untrusted_ancestor, _untrusted_owner,
 * _not_canonical, _linked: a second name of a socket) otherwise. */
ph_status ph_state_check_socket(const char *path, ph_diag *diag);

/* Pins the proxy socket: checks socket_path as ph_state_check_socket does,
 * then bind-mounts that very inode (open_tree of the checked descriptor,
 * move_mount) onto a new file dir_fd/name. The runtimes are given the
 * pinned path, below the state directory, so swapping the operator's path
 * for a directory after the check changes nothing (root only: mounts). */
ph_status ph_state_pin_socket(int dir_fd, const char *name, const char *socket_path,
                              ph_diag *diag);
/* Unmounts and removes dir_fd/name made by ph_state_pin_socket (dir_path is
 * dir_fd's path, for umount2). No effect when absent. */
void ph_state_unpin(int dir_fd, const char *dir_path, const char *name);

/* ---- fault injection (tests) ----
 * Every step of create, execute and destroy that makes or removes something
 * calls ph_fault_point(step) first; when a test has set ph_sandbox_fault and
 * it returns an error for that step, the step fails as if its system call
 * had, so the test can check each failure path cleans up. NULL (always, in
 * production): no effect. Not thread-safe; tests set it before use. */
typedef ph_status ph_sandbox_fault_fn(const char *step);
extern ph_sandbox_fault_fn *ph_sandbox_fault;
ph_status ph_fault_point(const char *step, ph_diag *diag);

/* ---- workspace volumes (workspace_volume.c) ----
 * The kernel's byte and inode limit on a workspace: an image file whose
 * every block is allocated on the host at create (fallocate), attached to a
 * loop device with discard off and formatted ext4 (no journal, -N inodes,
 * no reserved blocks), mounted nosuid,nodev,nodiscard on the workspace
 * directory. The image is unlinked once the loop device holds it, so the
 * mount is the only thing to undo. */
#define PH_WORKSPACE_DEFAULT_BYTES (1024ll * 1024 * 1024)
#define PH_WORKSPACE_DEFAULT_INODES 100000ll
#define PH_WORKSPACE_MIN_BYTES (16ll * 1024 * 1024)
#define PH_WORKSPACE_MAX_BYTES (1024ll * 1024 * 1024 * 1024)
#define PH_WORKSPACE_MIN_INODES 64ll
#define PH_WORKSPACE_MAX_INODES (64ll * 1024 * 1024)
/* mkfs.ext4 needs inodes * 256 < bytes; one inode per KiB (its smallest
 * inode ratio) keeps the inode table at a quarter of the workspace. */
#define PH_WORKSPACE_MIN_BYTES_PER_INODE 1024ll
/* An unset inode count: the default, at most one per 4 KiB block. */
#define PH_WORKSPACE_DEFAULT_BYTES_PER_INODE 4096ll

/* The workspace byte and inode limits of l, defaults applied (the inode
 * default scaled down for a small workspace so mkfs can make it). */
uint64_t ph_ws_limit_bytes(const ph_sandbox_limits *l);
uint64_t ph_ws_limit_inodes(const ph_sandbox_limits *l);

/* Makes the volume for the workspace directory env_fd/"workspace" (which
 * must exist and be empty), its root owned by uid:gid. env_path is env_fd's
 * path (for umount2, which cannot take a descriptor of a mount it is to
 * remove: the descriptor keeps the mount busy). PH_OK, or an error
 * with nothing left behind: PH_E_LIMIT "workspace_host_space" when the host
 * filesystem cannot reserve bytes, PH_E_UNSUPPORTED when it cannot reserve
 * at all or discard cannot be switched off. */
ph_status ph_ws_volume_create(int env_fd, const char *env_path, uint64_t bytes, uint64_t inodes,
                              uid_t uid, gid_t gid, ph_diag *diag);
/* Unmounts the volume on env_fd/"workspace" when one is mounted there (its
 * loop device then goes away, autoclear). lazy: made read-only, then
 * MNT_DETACH (the volume lives on, read-only, while a descriptor holds it). 0 unmounted, 1 nothing mounted,
 * -1 still mounted (EBUSY: something holds a descriptor on it). */
int ph_ws_volume_unmount(int env_fd, const char *env_path, bool lazy);
/* True when the filesystem under ws_fd is full: less than 1/128 of it
 * (at least 2 MiB, at most 16 MiB) of blocks, or no inode, left: a command that got ENOSPC
 * leaves it so (a write that does not fit fails whole, so up to the size of
 * one write can stay free). */
bool ph_ws_volume_full(int ws_fd);

/* ---- caps on the disk workspaces reserve (workspace_caps.c) ---- */
typedef struct ph_ws_caps {
    uint64_t total_max;  /* every environment of the state directory */
    uint64_t tenant_max; /* every environment of one tenant */
} ph_ws_caps;

/* Fills *caps from the configured values; 0 is the default derived from
 * the filesystem of state_fd (total: half its size; tenant: a quarter of
 * total). */
ph_status ph_ws_caps_init(int state_fd, uint64_t total_max, uint64_t tenant_max,
                          ph_ws_caps *caps, ph_diag *diag);
/* Makes the environment directory state_fd/id (0700, exclusive, *env_fd
 * the caller's) and, when bytes > 0, its reservation record for tenant,
 * both under an exclusive lock on the state directory and only when the
 * records there plus bytes stay within caps. PH_E_LIMIT
 * "workspace_service_cap" or "workspace_tenant_cap" otherwise, with
 * nothing made; ph_state_mkdir's errors. */
ph_status ph_ws_reserve_env_dir(int state_fd, const ph_ws_caps *caps, const char *id,
                                const char *tenant, uint64_t bytes, int *env_fd, ph_diag *diag);
/* Removes the reservation record of the environment directory env_fd. */
void ph_ws_reserve_release(int env_fd);

/* ---- mechanisms: the internal vtable each adapter fills ---- */

/* What create hands a mechanism. Host paths live here and only here. */
typedef struct ph_mech_create_args {
    const char *env_id;          /* "env-<hex>", unique */
    /* The environment's private directory: a verified descriptor (every
     * file the mechanism makes goes through it, with the state_dir.c
     * calls) and its path for runsc and docker (see ph_state_dir_open). */
    int env_fd;
    const char *env_state_dir;
    int workspace_fd;            /* O_PATH on the workspace root */
    const char *workspace_dir;   /* host: the directory commands see at /workspace */
    uid_t uid;                   /* host identity of every sandbox process */
    gid_t gid;
    /* With a grant: the host path of the proxy socket to mount, pinned
     * under the environment's directory (ph_state_pin_socket) where the
     * service can mount, else the spec's; NULL without a grant. */
    const char *proxy_socket;
    const ph_environment_spec *spec;
} ph_mech_create_args;

typedef struct ph_mech_exec_args {
    char *const *argv;
    char *const *envp;           /* the complete environment: nothing is inherited */
    const char *cwd;             /* normalized workspace-relative, "." for the root */
    int cwd_fd;                  /* O_PATH fd of cwd, resolved beneath the workspace */
    int stdin_fd;                /* a readable descriptor at offset 0 (memfd) */
    int64_t timeout_ms;          /* kill the whole tree after this */
    size_t output_cap;           /* per stream */
    /* ph_execution_command.on_output (may be NULL): the mechanism passes it
     * to its captures with ph_capture_stream. */
    void (*on_output)(void *ctx, int stream, const uint8_t *data, size_t len);
    void *on_output_ctx;
} ph_mech_exec_args;

typedef struct ph_mech_outcome {
    bool exited;
    int exit_code;
    int term_signal;
    bool timed_out;
    int64_t duration_ms;
    ph_output out;
    ph_output err;
} ph_mech_outcome;

typedef struct ph_mechanism_ops {
    ph_sandbox_mechanism id;
    const char *name;
    /* PH_OK when the mechanism can run here, else PH_E_UNSUPPORTED + why. */
    ph_status (*available)(ph_diag *diag);
    /* Makes the sandbox; *state is the mechanism's own. */
    ph_status (*create)(const ph_mech_create_args *args, void **state, ph_diag *diag);
    /* Runs one command to completion or deadline, killing the whole tree at
     * the deadline. Fills *outcome (its buffers are moved into the result). */
    ph_status (*execute)(void *state, const ph_mech_exec_args *args, ph_mech_outcome *outcome,
                         ph_diag *diag);
    /* Kills what is left and releases *state (sets it NULL). The service
     * removes the workspace afterwards. */
    void (*destroy)(void **state);
    /* Releases the in-process *state but leaves the sandbox running, for the
     * CLI's create-then-exec across processes (then create is called again
     * with the same args to re-attach). */
    void (*detach)(void **state);
    /* Recovery (NULL: nothing to undo): removes whatever create may have
     * made for env_id, from the environment's directory alone, with no
     * state of a running process: the previous one died at some unknown
     * step. Idempotent. */
    void (*recover)(const char *env_id, int env_fd, const char *env_state_dir);
} ph_mechanism_ops;

/* The adapter for m, or NULL when this build has none (gvisor and docker
 * arrive with the next issue). mechanism_registry.c. */
const ph_mechanism_ops *ph_mechanism_ops_for(ph_sandbox_mechanism m);

extern const ph_mechanism_ops ph_mechanism_fake;
/* Test hook: run the fake mechanism without namespaces (the fallback). */
extern bool ph_fake_force_plain;

/* ---- process running shared by mechanisms (process_run.c) ---- */

/* Output collection with a cap: keeps the first cap bytes, counts the rest. */
typedef struct ph_capture {
    int fd;
    ph_output *dst;
    size_t cap;   /* bytes kept at most */
    size_t alloc; /* bytes allocated in dst->data (without the NUL) */
    /* Called with every piece kept, as it is kept (NULL: none). */
    void (*on_output)(void *ctx, int stream, const uint8_t *data, size_t len);
    void *on_output_ctx;
    int stream;   /* PH_STREAM_STDOUT or PH_STREAM_STDERR */
} ph_capture;

/* Connects the exec args' output callback to caps[0] (stdout) and caps[1]
 * (stderr). */
void ph_capture_stream(ph_capture caps[static 2], const ph_mech_exec_args *a);

/* Reads what is available on every open capture fd (closing each at EOF)
 * until all are closed or deadline_ms (CLOCK_MONOTONIC) passes. */
void ph_capture_drain(ph_capture *caps, size_t n, int64_t deadline_ms);
/* Reads once from c (non-blocking fd); returns false at EOF/error. */
bool ph_capture_read(ph_capture *c);
/* Makes sure dst has a NUL-terminated buffer (possibly empty). */
ph_status ph_output_finish(ph_output *dst);

/* What a runtime says is left of a command once its first process (the
 * in-sandbox wrapper) has exited: nothing but the sandbox's init, more, or
 * no answer. */
typedef enum ph_leftovers {
    PH_LEFT_NOTHING,
    PH_LEFT_SOME,
    PH_LEFT_UNKNOWN,
} ph_leftovers;

/* A command ends when every process it started has ended: asks ask(ctx)
 * (the runtime, never the sandbox) at intervals doubling from 100 ms to
 * 2 s, collecting output on caps[0..1] meanwhile, until it answers
 * PH_LEFT_NOTHING or PH_LEFT_UNKNOWN (returned at once) or deadline_ms
 * (CLOCK_MONOTONIC) passes with processes left (PH_LEFT_SOME: the caller
 * kills them and the command has timed out). The doubling bounds the cost
 * of a process left sleeping until a long deadline to one question every
 * 2 s. */
ph_leftovers ph_wait_for_leftovers(ph_leftovers (*ask)(void *ctx), void *ctx,
                                   ph_capture caps[static 2], int64_t deadline_ms);

/* The docker mechanism's answer from `docker top <container> -o pid,nlwp`
 * (out: its output, NUL-terminated within cap bytes; borrowed): a header,
 * then one "PID NLWP" row per process. PH_LEFT_NOTHING only for exactly one
 * row, the init, with exactly one thread: a thread planted in the init
 * (ptrace injection, clone(CLONE_THREAD)) is a leftover like a process.
 * PH_LEFT_SOME for more, or output that fills cap (lines may be lost);
 * PH_LEFT_UNKNOWN for anything else. */
ph_leftovers ph_docker_top_leftovers(const char *out, size_t cap);

/* Searches PATH of envp for argv0 and execve()s it; returns only on failure
 * (errno set: ENOENT when nowhere). For use in a child between fork and exec. */
void ph_exec_in_path(const char *argv0, char *const argv[], char *const envp[]);
/* Kills every process of session sid (a sweep of /proc), SIGKILL, each
 * through a pidfd (ph_signal_if): never a process that took a dead one's pid. */
void ph_kill_session(pid_t sid);
/* Sends sig to pid through a pidfd when match(pid, ctx), called after the
 * pidfd is open, accepts what /proc/<pid> shows: the signal reaches the
 * process that was checked or none, never one that took its pid since (a
 * pid read from /proc, reaped and reused before the signal). PH_OK sent;
 * PH_E_NOT_FOUND when pid is gone or match refuses it (nothing sent);
 * PH_E_IO when no pidfd can be had. */
ph_status ph_signal_if(pid_t pid, int sig, bool (*match)(long pid, void *ctx), void *ctx);
/* ph_signal_if for a child of thread tid of this process: pid must be in
 * /proc/self/task/<tid>/children when checked (a child that thread has not
 * reaped). *leader (may be NULL): whether it led its session when checked. */
ph_status ph_signal_child(pid_t tid, pid_t pid, int sig, bool *leader);

/* ---- an owned copy of a spec (spec_copy.c) ---- */
typedef struct ph_spec_copy {
    ph_environment_spec spec; /* its strings point at the copies below */
    char *tenant, *lease, *grant, *socket, *passthrough;
} ph_spec_copy;

/* Copies s into c (every string duplicated). PH_OK or PH_E_NOMEM (then c
 * is empty). */
ph_status ph_spec_copy_init(ph_spec_copy *c, const ph_environment_spec *s);
void ph_spec_copy_clear(ph_spec_copy *c);

/* ---- environments (environment.c) for the lease and the CLI ---- */

/* A new WorkspaceFiles capability on env's workspace. */
ph_status ph_environment_workspace(ph_environment *env, ph_workspace **out, ph_diag *diag);
/* The opaque id of env ("env-<hex>"); static for env's lifetime. */
const char *ph_environment_id(const ph_environment *env);
/* CLI support: re-opens an environment created by another process of the
 * same service state dir (spec saved at create). */
ph_status ph_environment_reattach(ph_execution_service *svc, const char *env_id,
                                  ph_environment **out, ph_diag *diag);
/* CLI support: claims svc's state directory for the CLI (ph_state_claim
 * with PH_STATE_OWNER_CLI): refused (PH_E_DENIED, state_dir_owned) where
 * pinhole-execd's state is, whose start would destroy what the CLI keeps. */
ph_status ph_execution_service_claim_for_cli(ph_execution_service *svc, ph_diag *diag);
/* CLI support: releases the in-process handle but keeps the sandbox. */
void ph_environment_detach(ph_environment **env);
/* CLI support: saves env's spec (mode 0600, grant token included) in its
 * state directory so ph_environment_reattach can find it from another
 * process. The library never does this on its own. */
ph_status ph_environment_persist_spec(ph_environment *env, ph_diag *diag);
/* Undoes everything the environment env_id of svc's state directory may
 * have made, whatever moment the process that made it died at: its
 * intent record (intent.c) names the effects, each undone whether or not
 * it was completed (a directory without a record: every effect). Never
 * starts anything. PH_OK when nothing of it is left (directory, claim,
 * mounts, the mechanism's sandbox); PH_E_INVAL for a name that is not an
 * environment id; otherwise the first thing that stayed, with a stable
 * code ("recovery_incomplete: ..."). */
ph_status ph_environment_recover(ph_execution_service *svc, const char *env_id, ph_diag *diag);

/* ---- intent records (intent.c) ----
 * Every effect an environment has on the host beyond its own directory is
 * added to <env>/intent.json (atomically, through the environment's
 * verified descriptor) before it is made, so that recovery can undo a
 * create or a destroy interrupted at any point. One bit per effect; a new
 * effect gets a bit, a name and an undo in ph_environment_recover. */
enum {
    PH_EFFECT_ID_CLAIM = 1u << 0,  /* <state>/ids/<uid>: the host uid/gid */
    PH_EFFECT_PROXY_PIN = 1u << 1, /* <env>/proxy.sock: a bind mount */
    PH_EFFECT_VOLUME = 1u << 2,    /* the workspace's loop device and mount */
    PH_EFFECT_MECHANISM = 1u << 3, /* the mechanism's sandbox (ops->recover) */
};
#define PH_EFFECTS_ALL 0xfu
#define PH_INTENT_FILE "intent.json"

typedef struct ph_intent {
    int env_fd;                     /* borrowed: the environment's directory */
    char env_id[24];
    ph_sandbox_mechanism mechanism;
    unsigned effects;               /* PH_EFFECT_* recorded so far */
} ph_intent;

/* Adds effect to in->effects and rewrites the record whole; the caller
 * makes the effect only on PH_OK. */
ph_status ph_intent_record(ph_intent *in, unsigned effect, ph_diag *diag);
/* Reads the record of env_fd. PH_OK with *out filled; otherwise *out says
 * "every effect, mechanism dflt" and the status why (PH_E_NOT_FOUND: no
 * record; PH_E_FORMAT or PH_E_DENIED: one this service cannot trust). */
ph_status ph_intent_read(int env_fd, ph_sandbox_mechanism dflt, ph_intent *out, ph_diag *diag);

/* Kills (SIGKILL) every process running the executable exe (a realpath)
 * whose argv carries `flag=value` or `flag value`: the clients and helpers
 * a dead service left working on its state. Repeats while it finds some;
 * returns how many it killed. */
size_t ph_kill_by_argument(const char *exe, const char *flag, const char *value);

/* Kills (SIGKILL, through a pidfd: never a process that took a dead one's
 * pid) every live process running as host uid `uid` (real, effective, saved
 * or filesystem) and waits up to 1 s for each to exit. True when none is
 * left: only then may the uid be claimed by another environment. */
bool ph_kill_uid(uid_t uid);

#endif
