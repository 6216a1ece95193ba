/*
 * pinhole/sandbox_lease.h - the workspace lifecycle of one worker lease on a
 * run (ADR-0029 decision 1: the workspace is a cache, not state).
 *
 *  - Nothing exists until the lease's first sandbox call: the environment and
 *    its workspace are created lazily by ph_sandbox_lease_environment or
 *    ph_sandbox_lease_workspace.
 *  - They are kept across steps and across holds shorter than
 *    approval_hold_seconds.
 *  - A hold lasting approval_hold_seconds or longer destroys them (the next
 *    call gets a fresh, empty workspace); so does the end of the lease.
 *  - A resumed run is a new lease: a fresh, empty workspace. Anything that
 *    must survive is exported as an artifact.
 *
 * Times are caller-supplied monotonic seconds so the policy is testable and
 * the lease never reads a clock itself. Not thread-safe.
 */
#ifndef PINHOLE_SANDBOX_LEASE_H
#define PINHOLE_SANDBOX_LEASE_H

#include <stdbool.h>
#include <stdint.h>

#include "pinhole/sandbox.h"
#include "pinhole/workspace.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_sandbox_lease ph_sandbox_lease;

/*
 * Opens a lease. Creates nothing in the sandbox. spec is copied and used for
 * every (re)creation; svc is borrowed and must outlive the lease.
 * approval_hold_seconds > 0. On PH_OK *out is freed by ph_sandbox_lease_end.
 */
PH_API ph_status ph_sandbox_lease_open(ph_execution_service *svc, const ph_environment_spec *spec,
                                       int64_t approval_hold_seconds, ph_sandbox_lease **out,
                                       ph_diag *diag);

/* The lease's environment, created now if it does not exist. *env is
 * borrowed: valid until the next hold that destroys it or the lease's end. */
PH_API ph_status ph_sandbox_lease_environment(ph_sandbox_lease *lease, ph_environment **env,
                                              ph_diag *diag);

/* A WorkspaceFiles capability on the lease's workspace (created now if it
 * does not exist). *ws is new and owned by the caller (ph_workspace_close);
 * it grants read/write/list/stat only, never execution. After the sandbox is
 * destroyed it finds no file and writes fail. */
PH_API ph_status ph_sandbox_lease_workspace(ph_sandbox_lease *lease, ph_workspace **ws,
                                            ph_diag *diag);

/* Whether the sandbox currently exists (false before the first call and
 * after a long hold). */
PH_API bool ph_sandbox_lease_has_sandbox(const ph_sandbox_lease *lease);

/* The run is paused for approval from now_seconds. */
PH_API void ph_sandbox_lease_hold_begin(ph_sandbox_lease *lease, int64_t now_seconds);

/* Called while held (e.g. by a timer): destroys the sandbox as soon as the
 * hold has lasted approval_hold_seconds (now_seconds minus the hold's
 * begin, saturated at int64's ends: never an overflow). Returns true if it
 * destroyed it. */
PH_API bool ph_sandbox_lease_hold_tick(ph_sandbox_lease *lease, int64_t now_seconds);

/* The hold is over (approved or denied): same rule as the tick, then the
 * lease is no longer held. Returns true if the sandbox was destroyed. */
PH_API bool ph_sandbox_lease_hold_end(ph_sandbox_lease *lease, int64_t now_seconds);

/* The lease ends: destroys the sandbox (if any) with its workspace, frees
 * *lease and sets it to NULL (NULL allowed). */
PH_API void ph_sandbox_lease_end(ph_sandbox_lease **lease);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_SANDBOX_LEASE_H */
