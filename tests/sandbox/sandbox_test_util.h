/* sandbox_test_util.h - fixtures shared by the sandbox tests: a service on a
 * private state directory, a spec with defaults, a one-call runner, and
 * captured warnings. */
#ifndef PINHOLE_SANDBOX_TEST_UTIL_H
#define PINHOLE_SANDBOX_TEST_UTIL_H

#include "test_support.h"

#include <stdbool.h>

#include "pinhole/sandbox.h"
#include "pinhole/sandbox_lease.h"
#include "pinhole/workspace.h"

typedef struct sbx_fixture {
    /* The service's state directory: a fresh temp dir; compiled against
     * pinhole-execd (pinhole/execd_as_port.h), the daemon's, from
     * $PINHOLE_EXECD_STATE_DIR (NULL when unset), which is not removed. */
    char *state_dir;
    ph_execution_service *svc;
    ph_sandbox_mechanism mechanism;
    char warnings[8192];      /* every warning line, '\n'-separated */
} sbx_fixture;

/* Opens a development service for mechanism m with hard cap cap_ms. Returns
 * false (and prints why) when m is not available here. */
bool sbx_open(sbx_fixture *f, ph_sandbox_mechanism m, int64_t cap_ms);
void sbx_close(sbx_fixture *f);

/* A spec with tenant "t1", lease "lease-1", f's mechanism, limits unset. */
ph_environment_spec sbx_spec(const sbx_fixture *f);

/* Creates an environment with spec or asserts. */
ph_environment *sbx_create(sbx_fixture *f, const ph_environment_spec *spec);

/* Runs argv (NULL-terminated) in env with no model timeout, no budget and no
 * stdin; asserts PH_OK. */
ph_execution_result *sbx_run(ph_environment *env, const char *const *argv);
/* The same with the model's timeout_s (seconds; PH_SANDBOX_UNSET: none). */
ph_execution_result *sbx_run_timed(ph_environment *env, const char *const *argv,
                                   int64_t timeout_s);

/* True when haystack (len bytes) contains needle. */
bool sbx_contains(const void *haystack, size_t len, const char *needle);

/* Finds the change for path in r, or NULL. */
const ph_file_change *sbx_change(const ph_execution_result *r, const char *path);

/* True when a process whose command line contains needle exists (a sweep of
 * /proc; use arguments unique to the test, e.g. "sleep 71.25"). */
bool sbx_process_with_arg_exists(const char *needle);

/* How many loop devices have a backing file whose path contains needle. */
int sbx_loop_devices_of(const char *needle);

/* umount2(mnt, 0), asked again while it answers EBUSY, for 10 s at most: a
 * mount the test made can be held for a moment by what it does not own
 * (another test's process copying the mount table into a namespace of its
 * own while the suite runs in parallel). 0, or -1 with errno. */
int sbx_umount(const char *mnt);

/* Runs cmd through sh (popen): what it writes to stdout, at most cap - 1
 * bytes, into out (NUL-terminated). Its exit status, -1 when it did not
 * exit (a signal). */
int sbx_shell(const char *cmd, char *out, size_t cap);

#endif
