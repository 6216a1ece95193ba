/* export.c - artifact.export: one workspace file, read through the
 * WorkspaceFiles port only, streamed into the store by the worker. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/artifact_export.h"
#include "pinhole/utf8.h"
#include "store-int.h"

/* A descriptor read up to the size the file had when it was opened. */
typedef struct bounded_fd {
    int fd;
    uint64_t left;
} bounded_fd;

static ph_status bounded_read(void *ctx, void *buf, size_t cap, size_t *got, ph_diag *diag)
{
    bounded_fd *b = ctx;
    if (cap > b->left)
        cap = (size_t)b->left;
    *got = 0;
    if (cap == 0)
        return PH_OK;
    ph_status st = ph_artifact_read_fd(&b->fd, buf, cap, got, diag);
    if (st == PH_OK)
        b->left -= *got;
    return st;
}

ph_status ph_artifact_export(ph_artifact_store *store, ph_workspace *ws, const char *path,
                             const ph_artifact_spec *spec, ph_artifact_metadata **out,
                             ph_diag *diag)
{
    *out = NULL;
    if (path == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "export: no path");
    char norm[PH_WS_PATH_MAX + 1];
    ph_ws_path_verdict v = ph_ws_path_normalize(path, strlen(path), norm, sizeof norm);
    if (v != PH_WS_PATH_OK)
        return ph_diag_set(diag, PH_E_DENIED, 0, "%s: export path refused",
                           ph_ws_path_verdict_code(v));
    if (strcmp(norm, ".") == 0)
        return ph_diag_set(diag, PH_E_INVAL, 0, "path_is_root: export needs a file");
    uint64_t limit = store->max_size;
    if (spec->max_size && spec->max_size < limit)
        limit = spec->max_size;
    /* A clear refusal for directories and special files before any open
     * (the port's open refuses them too, but a socket only shows up as an
     * I/O error there). A symlink goes on to open_read, which follows it
     * only while it stays inside the workspace. */
    /* The port is given the path as asked, not norm: a trailing slash names
     * a directory there (path_not_directory for a file), which the
     * normalized form no longer says. */
    ph_ws_stat st;
    ph_status rc = ph_workspace_stat(ws, path, &st, diag);
    if (rc != PH_OK)
        return rc;
    if (st.type == PH_WS_TYPE_DIR || st.type == PH_WS_TYPE_OTHER)
        return ph_diag_set(diag, PH_E_INVAL, 0, "export: %s is a %s, not a regular file", norm,
                           st.type == PH_WS_TYPE_DIR ? "directory" : "special file");
    int fd = -1;
    rc = ph_workspace_open_read(ws, path, limit, &fd, &st, diag);
    if (rc != PH_OK)
        return rc;
    /* A name is any bytes but NUL and '/'; source_path is text (UTF-8, no
     * control): it records the path's text form, the filename its bytes. */
    char *shown = ph_text_escape(norm, strlen(norm));
    if (shown == NULL) {
        close(fd);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    ph_artifact_spec s = *spec;
    s.source_path = shown;
    if (s.filename == NULL) {
        const char *slash = strrchr(norm, '/');
        s.filename = slash ? slash + 1 : norm;
        s.filename_len = strlen(s.filename);
    }
    s.max_size = limit;
    bounded_fd b = {.fd = fd, .left = st.size};
    ph_artifact_source src = {.read = bounded_read, .ctx = &b};
    rc = ph_artifact_put(store, &s, &src, out, diag);
    close(fd);
    free(shown);
    return rc;
}
