/*
 * pinhole/artifact_export.h - artifact.export: one workspace file into the
 * store (ADR-0029 decisions 8, 11).
 *
 * The file is read through the WorkspaceFiles port (pinhole/workspace.h)
 * only: never an execution handle, never a host path. The worker streams it
 * into the store, so the execution side holds no store credential.
 */
#ifndef PINHOLE_ARTIFACT_EXPORT_H
#define PINHOLE_ARTIFACT_EXPORT_H

#include "pinhole/artifact_store.h"
#include "pinhole/status.h"
#include "pinhole/workspace.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Exports the workspace file at path (workspace-relative) into store.
 * spec supplies the tenant and the optional fields; its source_path is
 * ignored (the normalized path is recorded) and a NULL filename becomes the
 * path's last component. Refusals, each with nothing stored:
 *  - PH_E_DENIED: the path is refused by the port (absolute, "..", a symlink
 *    leading out of the workspace, ...); the message starts with the port's
 *    stable code ("path_escape: ...");
 *  - PH_E_INVAL: not a regular file (directory, fifo, socket, device);
 *  - PH_E_LIMIT: larger than spec->max_size (or the store's limit);
 *  - PH_E_NOT_FOUND: no such file.
 * Reads at most the size the file had when opened, so a file still being
 * appended to is exported as it was at open. On success *out (caller frees)
 * is the stored metadata.
 */
PH_API ph_status ph_artifact_export(ph_artifact_store *store, ph_workspace *ws, const char *path,
                                    const ph_artifact_spec *spec, ph_artifact_metadata **out,
                                    ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
