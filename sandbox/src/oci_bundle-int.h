/* oci_bundle-int.h - the OCI runtime documents the gvisor and docker
 * mechanisms hand to their runtime (private to the sandbox module).
 *
 * Two documents:
 *  - the bundle's config.json: the sandbox itself (root filesystem, mounts,
 *    namespaces, cgroup limits, and its init process: pinhole-forwarder
 *    --init, which also relays to the proxy when the network is granted);
 *  - a process document (runsc exec --process): one command with its exact
 *    argv, user, working directory and environment. runsc exec would
 *    otherwise run as uid 0 and merge its own variables into the
 *    environment, so the mechanism always passes this document.
 * Built with jansson, never by string pasting, so no argv or env byte can
 * change the document's structure.
 */
#ifndef PINHOLE_OCI_BUNDLE_INT_H
#define PINHOLE_OCI_BUNDLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "pinhole/status.h"

/* Where things appear inside every sandbox. Constants, never configurable:
 * commands see the same layout on every host. */
#define PH_OCI_WORKSPACE "/workspace"
#define PH_OCI_RUN_DIR "/run/pinhole"
#define PH_OCI_FORWARDER PH_OCI_RUN_DIR "/forwarder"
#define PH_OCI_PROXY_SOCKET PH_OCI_RUN_DIR "/proxy.sock"

/* gVisor counts its own kernel (the Sentry's threads and memory) inside the
 * cgroup limits: below these floors a sandbox does not even start, so a
 * smaller limit from the spec is raised to the floor (documented in
 * docs/sandbox-gvisor.md). */
#define PH_OCI_MEMORY_FLOOR (256ull * 1024 * 1024)
#define PH_OCI_PIDS_FLOOR 1024ull
#define PH_OCI_CPU_PERIOD_US 100000ull

/* Everything config.json depends on. All paths are absolute host paths
 * owned by the caller; the function copies what it needs. */
typedef struct ph_oci_sandbox {
    const char *rootfs;          /* read-only root filesystem directory */
    const char *workspace;       /* bind-mounted read-write at /workspace */
    const char *forwarder;       /* static pinhole-forwarder binary (bind, ro) */
    const char *proxy_socket;    /* proxy unix socket; NULL without a grant */
    uint16_t forwarder_port;     /* loopback port inside; used with proxy_socket */
    uid_t uid;                   /* non-root user of every process */
    gid_t gid;
    const char *hostname;        /* NULL: "pinhole" */
    const char *cgroups_path;    /* NULL: no cgroup (docker manages its own) */
    uint64_t memory_bytes;       /* 0: no limit */
    uint64_t pids;               /* 0: no limit */
    uint64_t cpu_millis;         /* 1000 = one CPU; 0: no limit */
    uint64_t tmp_bytes;          /* size of the fresh /tmp tmpfs; 0: 64 MiB */
    /* A user namespace mapping ids 0 and uid (gid 0 and gid) each to
     * itself, and nothing else. runsc started with a real uid other than 0
     * runs its gofer in it (runsc/container/container.go): the gofer keeps
     * host uid 0, but its capabilities reach only files whose owner and
     * group are mapped (what it serves: the root filesystem, the
     * workspace). */
    bool user_namespace;
} ph_oci_sandbox;

/* Builds config.json for s. Refuses (PH_E_INVAL) a relative path, uid or
 * gid 0, and a proxy_socket without a port. *out is a new reference owned by
 * the caller (json_decref), NULL on error. */
ph_status ph_oci_config_new(const ph_oci_sandbox *s, json_t **out, ph_diag *diag);

/* Builds the process document for one command: argv[0..argc) exactly (argc
 * >= 1), env exactly (NAME=value strings, envc of them, may be 0), cwd an
 * absolute path inside the sandbox. *out is a new reference owned by the
 * caller. Refuses argc == 0, uid 0 and a relative cwd. */
ph_status ph_oci_process_new(const char *const *argv, size_t argc, const char *const *env,
                             size_t envc, const char *cwd, uid_t uid, gid_t gid, json_t **out,
                             ph_diag *diag);

/* Writes doc to dir_fd/name (a verified state directory descriptor) with
 * mode 0600 through ph_state_write: a temporary file made O_EXCL|O_NOFOLLOW
 * and renameat, so a reader never sees a partial document and nothing
 * planted there is written through (not fsync'd: the documents are consumed
 * at once and mean nothing after a reboot). */
ph_status ph_oci_write_json(int dir_fd, const char *name, const json_t *doc, ph_diag *diag);

/* The command's argv as pinhole-forwarder --run takes it. The runtimes
 * carry argv as text (JSON, Go strings), so when an element is not valid
 * UTF-8 every element is passed as the lowercase hex of its bytes behind
 * --argv-hex, and the forwarder decodes them: the command gets its bytes
 * verbatim on every mechanism. *out is a new NULL-terminated vector (free
 * with ph_oci_run_argv_free) when *hex, else NULL (use argv as is).
 * PH_OK or PH_E_NOMEM. */
ph_status ph_oci_run_argv(char *const *argv, char ***out, bool *hex, ph_diag *diag);
void ph_oci_run_argv_free(char **argv);

#endif
