/* escape_support.h - the host side of the escape tests (harness case 26):
 * canaries, canary listeners, and what a sandbox leaves on the host.
 * Everything here is observed from outside the sandbox; the sandbox side is
 * a shell script run through the port. */
#ifndef PINHOLE_ESCAPE_SUPPORT_H
#define PINHOLE_ESCAPE_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox_test_util.h"

/* Guard placed before every network attempt: if the sandbox has any
 * interface but loopback, the script stops (exit 99, "INTERFACES-PRESENT")
 * instead of sending a packet anywhere. The test then fails. */
#define ESC_NET_GUARD                                                                        \
    "if grep -v -e '^ *lo:' -e '|' /proc/net/dev | grep -q ':'; then "                       \
    "echo INTERFACES-PRESENT; cat /proc/net/dev; exit 99; fi; "

/* An observation that fails only when an attack worked, with a message that
 * starts "ESCAPED:" (what the negative control looks for). Positive controls
 * and set-up use plain cmocka asserts, so their failing never counts as an
 * escape. */
#define ESC_HELD(cond, what)                                                                 \
    do {                                                                                     \
        if (!(cond))                                                                         \
            fail_msg("ESCAPED: %s (%s)", what, #cond);                                       \
    } while (0)

/* Fills out (cap >= 48) with "canary-<tag>-<32 hex>" from getrandom. */
void esc_canary(char *out, size_t cap, const char *tag);

/* Runs `sh -c script` in env (no model timeout); asserts the call itself
 * succeeded. */
ph_execution_result *esc_sh(ph_environment *env, const char *script);
/* The same with the model's timeout_s (seconds). */
ph_execution_result *esc_sh_timed(ph_environment *env, const char *script, int64_t timeout_s);

/* Writes to out a shell command that searches for what `test` (find's
 * expression, e.g. "-name x") selects, as a command looking for a host
 * object would: the whole file system, which on gvisor and docker is the
 * sandbox's own small tree. Against fake (m), whose "/" is the host's, a
 * whole search does not end within a deadline on a busy machine (33 s with
 * both cores loaded, over a 20 s cap), so there it searches near host_path:
 * in "/" and in every directory on the way to host_path, two levels down
 * from each, which finds the object wherever it is exposed. */
void esc_find_near(ph_sandbox_mechanism m, const char *host_path, const char *test, char *out,
                   size_t cap);

/* Fails the test ("ESCAPED: ...") when needle appears in the result's
 * stdout or stderr. */
void esc_assert_not_leaked(const ph_execution_result *r, const char *needle);

/* A listening TCP socket on 0.0.0.0 (every host address) and an ephemeral
 * port, non-blocking. */
int esc_tcp_listener(uint16_t *port);
/* A listening unix socket at path, non-blocking. */
int esc_unix_listener(const char *path);
/* Accepts every pending connection; returns how many there were. */
int esc_accepted(int listener);

/* The mechanism's traces of env on the host: processes whose command line
 * names the environment id, mounts, cgroups and state. Counts each. */
typedef struct esc_traces {
    int processes;
    int mounts;
    int cgroups;
    bool state_dir;
} esc_traces;
void esc_host_traces(const sbx_fixture *f, const char *env_id, esc_traces *out);

/* Host path of env's workspace (the fixture's layout: <state>/<id>/workspace),
 * asserted to exist. Static buffer per call site: copy it. */
void esc_host_workspace(const sbx_fixture *f, ph_environment *env, char *out, size_t cap);

/* Reads a cgroup control file of env's sandbox into out, at the path the
 * library's layout detection (v1, v2 or hybrid) gives: for gvisor the
 * cgroup pinhole-<id> runsc creates, for docker the one the kernel reports
 * for the container's init (/proc/<pid>/cgroup). false when not found. */
bool esc_cgroup_read(ph_sandbox_mechanism m, const char *env_id, const char *controller,
                     const char *file, char *out, size_t cap);

/* Parses argv[1] (default "gvisor") into *m. Returns 0 to go on; 77, after a
 * "SKIP: ..." line, when the mechanism is not available here; 2 on a bad
 * name, or for fake (which does not isolate) unless fake_allowed. */
int esc_pick_mechanism(int argc, char **argv, bool fake_allowed, ph_sandbox_mechanism *m);

/* What the negative control expects of one test against fake (no
 * isolation): its attack succeeds (the test fails with "ESCAPED: ..."); it is
 * held anyway, for the reason `why` (the test passes); or its positive
 * control cannot be shown there (the test fails, on a plain assert). Every
 * test is listed; a list ends with {NULL, 0, NULL}. */
typedef enum esc_fake_outcome {
    ESC_FAKE_ESCAPES = 1,
    ESC_FAKE_HELD,
    ESC_FAKE_NO_CONTROL,
} esc_fake_outcome;
typedef struct esc_fake_expectation {
    const char *test;
    esc_fake_outcome outcome;
    const char *why;
} esc_fake_expectation;

/* The negative control: runs each of tests[0..n) alone, with the group
 * fixtures, in a child process against fake, and checks every outcome
 * against `expected`. Prints one line per test and a count. Returns 0 when
 * all is as expected, else 1. */
int esc_negative_control(const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
                         CMFixtureFunction teardown, const esc_fake_expectation *expected);

/* Points TMPDIR at <build dir>/escape-tmp (created), or at
 * /var/tmp/pinhole-escape-tmp when the build tree is under /tmp, so every
 * host-side file of the test is outside /tmp. */
void esc_use_build_tmpdir(void);

#endif
