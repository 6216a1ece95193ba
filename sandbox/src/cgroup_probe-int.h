/* cgroup_probe-int.h - which cgroup hierarchy the host mounts, and whether
 * the spec's limits (memory, pids, CPU) can be enforced through it.
 *
 * runsc creates the sandbox's cgroup itself (cgroupsPath in the OCI
 * bundle); what it cannot do is invent a controller the host does not
 * offer. A limit that silently goes nowhere is a contained fork bomb that
 * is not contained, so the gvisor mechanism refuses to be available when a
 * controller is missing (fail closed). Three layouts exist:
 *   v2      one unified tree: <root>/cgroup.controllers lists controllers;
 *   v1      one tree per controller: <root>/memory, <root>/pids, <root>/cpu;
 *   hybrid  v1 controller trees plus an empty unified tree at
 *           <root>/unified (systemd's "hybrid" mode); limits go through v1.
 * Private to the sandbox module; the root is a parameter so tests probe
 * fake trees. */
#ifndef PINHOLE_SANDBOX_CGROUP_PROBE_INT_H
#define PINHOLE_SANDBOX_CGROUP_PROBE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/status.h"

#define PH_CGROUP_DEFAULT_ROOT "/sys/fs/cgroup"

typedef enum ph_cgroup_layout {
    PH_CGROUP_NONE = 0, /* nothing recognisable mounted at the root */
    PH_CGROUP_V1,
    PH_CGROUP_V2,
    PH_CGROUP_HYBRID,
} ph_cgroup_layout;

/* Controller bits: what the spec's limits need. */
#define PH_CGROUP_MEMORY 1u
#define PH_CGROUP_PIDS 2u
#define PH_CGROUP_CPU 4u
#define PH_CGROUP_NEEDED (PH_CGROUP_MEMORY | PH_CGROUP_PIDS | PH_CGROUP_CPU)

typedef struct ph_cgroup_probe {
    ph_cgroup_layout layout;
    unsigned controllers; /* PH_CGROUP_* bits usable for limits */
} ph_cgroup_probe;

/* Classifies the hierarchy mounted at root (NULL: /sys/fs/cgroup) into *out.
 * PH_OK whenever root is a readable directory, even with layout NONE;
 * PH_E_IO (diagnostic set) when it is not. Reads only; owns nothing. */
ph_status ph_cgroup_probe_root(const char *root, ph_cgroup_probe *out, ph_diag *diag);

/* PH_OK when every controller in PH_CGROUP_NEEDED is usable; otherwise
 * PH_E_UNSUPPORTED with a diagnostic naming the layout and the missing
 * controller. */
ph_status ph_cgroup_require_limits(const ph_cgroup_probe *p, ph_diag *diag);

/* "v1", "v2", "hybrid" or "none". Static string. */
const char *ph_cgroup_layout_name(ph_cgroup_layout layout);

/* Writes into out the host path of `file` (e.g. "pids.max") of controller
 * ("memory", "pids", "cpu") for the cgroup `group` (e.g. "pinhole-<id>")
 * under root (NULL: /sys/fs/cgroup) in layout p. Returns 0, or -1 when the
 * layout is NONE or the path does not fit in cap. */
int ph_cgroup_file_path(const ph_cgroup_probe *p, const char *root, const char *controller,
                        const char *group, const char *file, char *out, size_t cap);

/* Removes the cgroup `group` (one name, no '/') from every hierarchy
 * under root (NULL: /sys/fs/cgroup): the v2 tree and each v1 controller
 * tree. Processes still in it are killed (SIGKILL), child groups removed
 * first. For what a failed or interrupted runtime leaves behind (runsc
 * delete does not remove the cgroup of a sandbox it never started).
 * Returns 0 when no such group is left. */
int ph_cgroup_remove_group(const char *root, const char *group);

/* True when some hierarchy under root (NULL: /sys/fs/cgroup) has `group`. */
bool ph_cgroup_group_exists(const char *root, const char *group);

#endif
