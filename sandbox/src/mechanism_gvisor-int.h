/* mechanism_gvisor-int.h - the gvisor and docker mechanisms' shared
 * settings (private to the sandbox module). See mechanism_gvisor.c for the
 * lifecycle and docs/sandbox-gvisor.md for the operator's view. */
#ifndef PINHOLE_MECHANISM_GVISOR_INT_H
#define PINHOLE_MECHANISM_GVISOR_INT_H

#include <limits.h>

#include "sandbox-int.h"

#ifndef PH_GVISOR_DEFAULT_ROOTFS
#define PH_GVISOR_DEFAULT_ROOTFS "/var/lib/pinhole/rootfs"
#endif
/* Limits when the spec leaves them unset. They bound the whole sandbox,
 * gVisor's own kernel included. */
#define PH_GVISOR_DEFAULT_MEMORY (1024ull * 1024 * 1024)
#define PH_GVISOR_DEFAULT_PIDS 1024ull

/* Host path of the static pinhole-forwarder: $PINHOLE_FORWARDER, the
 * installed one, then (build trees) the one next to the build's binaries.
 * PH_E_UNSUPPORTED when none is executable. */
ph_status ph_gvisor_forwarder_path(char out[static PATH_MAX], ph_diag *diag);

/* The read-only root filesystem directory (see mechanism_gvisor.c). */
ph_status ph_gvisor_rootfs_path(char out[static PATH_MAX], ph_diag *diag);

/* PH_OK when the root filesystem holds the mount-point stubs runsc would
 * otherwise create in it (see mechanism_gvisor.c); PH_E_UNSUPPORTED
 * (rootfs_stubs_missing) otherwise. */
ph_status ph_gvisor_check_rootfs(const char *rootfs, ph_diag *diag);

/* Maps the exit code of `pinhole-forwarder --run` (as relayed by runsc or
 * docker exec) onto the outcome: 128 + N (N <= 64) is signal N. */
void ph_gvisor_map_status(int code, ph_mech_outcome *o);

extern const ph_mechanism_ops ph_mechanism_gvisor;
extern const ph_mechanism_ops ph_mechanism_docker;

#endif
