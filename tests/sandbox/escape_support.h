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

/* Fills out (cap >= 48) with "canary-<tag>-<32 hex>" from getrandom. */
void esc_canary(char *out, size_t cap, const char *tag);

/* Runs `sh -c script` in env (no model timeout); asserts the call itself
 * succeeded. */
ph_execution_result *esc_sh(ph_environment *env, const char *script);

/* Fails the test when needle appears in the result's stdout or stderr. */
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
 * library's layout detection (v1, v2 or hybrid) gives. false when not found. */
bool esc_cgroup_read(const char *env_id, const char *controller, const char *file, char *out,
                     size_t cap);

/* Parses argv[1] (default "gvisor") into *m; prints SKIP and returns 77 when
 * the mechanism does not isolate (fake) or is not available here, 2 on a
 * bad name, 0 to go on. */
int esc_pick_mechanism(int argc, char **argv, ph_sandbox_mechanism *m);

/* Points TMPDIR at <build dir>/escape-tmp (created), so every host-side
 * file of the test is outside /tmp. */
void esc_use_build_tmpdir(void);

#endif
