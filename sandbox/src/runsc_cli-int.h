/* runsc_cli-int.h - driving Debian's runsc (gVisor 2022) from C (private to
 * the sandbox module).
 *
 * Every invocation has the same global flags, in this order:
 *   runsc --root <state dir> --platform=ptrace --network=none
 *         [--host-uds=open] [--debug --debug-log=<dir>/] <subcommand> ...
 * --host-uds=open is added only for a sandbox with a network grant: it is
 * what lets the forwarder connect to the proxy socket bind-mounted into the
 * sandbox (the only host unix socket the sandbox can see).
 * Subcommands used: create --bundle, start, exec --process, kill --all,
 * delete --force, state.
 *
 * runsc runs with a fixed, minimal environment (PATH only): nothing from the
 * service's environment reaches it, and all descriptors but 0-2 are closed.
 * `create` may run with another real uid (ph_runsc.create_ruid).
 */
#ifndef PINHOLE_RUNSC_CLI_INT_H
#define PINHOLE_RUNSC_CLI_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pinhole/status.h"
#include "sandbox-int.h"

#define PH_RUNSC_PATH_MAX 1024
/* Longest argv a runsc invocation here needs (global flags + subcommand). */
#define PH_RUNSC_ARGV_MAX 16
/* Longest argv of any tool spawned through ph_cli_spawn. */
#define PH_CLI_ARGV_MAX 512
/* Bytes of runsc's stderr kept for diagnostics and logs. */
#define PH_RUNSC_STDERR_MAX 1024

typedef struct ph_runsc {
    char binary[PH_RUNSC_PATH_MAX]; /* absolute path of runsc */
    char root[PH_RUNSC_PATH_MAX];   /* --root: runsc's state directory */
    /* "--debug-log=<dir>/" when $PINHOLE_RUNSC_DEBUG_LOG names a directory
     * (troubleshooting: runsc then logs every step there); else empty. */
    char debug_log[PH_RUNSC_PATH_MAX + 16];
    /* For `create` only, when create_ruid is not 0: runsc runs with that
     * real uid and create_rgid as its real gid, without supplementary
     * groups (effective and saved ids 0, so it keeps every capability),
     * which makes it run the sandbox process as that host uid and gid
     * (never root's group), and with
     * create_path (a directory holding newuidmap and newgidmap, see
     * tools/pinhole_idmap.c) first on its PATH. Every other subcommand runs
     * as plain root. */
    uid_t create_ruid;
    gid_t create_rgid;
    char create_path[PH_RUNSC_PATH_MAX];
} ph_runsc;

/* Finds runsc: $PINHOLE_RUNSC if set (must be absolute and executable),
 * else /usr/bin/runsc, /usr/sbin/runsc, /usr/local/bin/runsc. Fills
 * rt->binary and rt->debug_log; PH_E_UNSUPPORTED when none is found. */
ph_status ph_runsc_locate(ph_runsc *rt, ph_diag *diag);

/* Builds the full argv (global flags then tail, NULL-terminated) into argv
 * (cap entries). Pointers refer to rt and tail; nothing is allocated.
 * Returns the number of entries before the NULL, or 0 when cap is too small. */
size_t ph_runsc_argv(const ph_runsc *rt, bool host_uds, const char *const *tail,
                     const char **argv, size_t cap);

/* Starts runsc with tail and the given stdin/stdout/stderr descriptors (-1:
 * /dev/null). On PH_OK *pid is the child's pid and *pidfd a pidfd for it
 * (the caller waits with ph_runsc_wait and closes pidfd). */
ph_status ph_runsc_spawn(const ph_runsc *rt, bool host_uds, const char *const *tail, int fd_in,
                         int fd_out, int fd_err, pid_t *pid, int *pidfd, ph_diag *diag);

/* Waits for a spawned runsc until deadline_ms (CLOCK_MONOTONIC, ms; < 0:
 * forever). On PH_OK *wstatus is its wait status and the child is reaped.
 * PH_E_TIMEOUT when the deadline passed first (the child is left running:
 * the caller decides, usually kill --all then SIGKILL of the client). */
ph_status ph_runsc_wait(pid_t pid, int pidfd, int64_t deadline_ms, int *wstatus);

/* Runs one short runsc subcommand to completion with stdin on /dev/null.
 * If it does not finish within timeout_ms the client is killed. stdout_buf
 * and stderr_buf (may be NULL: stdout then goes to /dev/null) receive the
 * start of what runsc wrote, NUL-terminated. PH_OK only when runsc exited 0;
 * otherwise PH_E_IO or PH_E_TIMEOUT with the subcommand named in diag (no
 * host path: runsc's own text, which quotes paths, stays in the buffers). */
ph_status ph_runsc_run(const ph_runsc *rt, bool host_uds, const char *const *tail,
                       int64_t timeout_ms, char *stdout_buf, size_t stdout_cap, char *stderr_buf,
                       size_t stderr_cap, ph_diag *diag);

/* The same two operations for any host tool (the docker mechanism's
 * `docker`): argv[0] is an absolute path, envp the tool's whole
 * environment. ph_cli_run's diagnostics name the tool's basename. */
ph_status ph_cli_spawn(const char *const *argv, char *const *envp, int fd_in, int fd_out,
                       int fd_err, pid_t *pid, int *pidfd, ph_diag *diag);
ph_status ph_cli_run(const char *const *argv, char *const *envp, int64_t timeout_ms,
                     char *stdout_buf, size_t stdout_cap, char *stderr_buf, size_t stderr_cap,
                     ph_diag *diag);

/* Spawns argv with stdin_fd as stdin and its stdout and stderr on new
 * pipes, captured into out and err (cap bytes each): on PH_OK caps[0..1]
 * are ready for ph_cli_collect (non-blocking read ends, owned by caps). */
ph_status ph_cli_spawn_captured(const char *const *argv, char *const *envp, int stdin_fd,
                                ph_output *out, ph_output *err, size_t cap, pid_t *pid,
                                int *pidfd, ph_capture caps[static 2], ph_diag *diag);
/* The same for a runsc subcommand (global flags first). */
ph_status ph_runsc_spawn_captured(const ph_runsc *rt, bool host_uds, const char *const *tail,
                                  int stdin_fd, ph_output *out, ph_output *err, size_t cap,
                                  pid_t *pid, int *pidfd, ph_capture caps[static 2],
                                  ph_diag *diag);

/* Reads the captures (at most 4, non-blocking fds; each closed and set to
 * -1 at end of file) while waiting for the spawned client. PH_OK once it
 * exited (reaped, *wstatus set; captures may still be open if something
 * else holds their write ends), PH_E_TIMEOUT at deadline_ms with the client
 * still running. */
ph_status ph_cli_collect(pid_t pid, int pidfd, ph_capture *caps, size_t ncaps, int64_t deadline_ms,
                         int *wstatus);

#endif
