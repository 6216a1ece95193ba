/*
 * pinhole/artifact_backend.h - what a storage backend implements for the
 * ArtifactStore port (pinhole/artifact_store.h).
 *
 * The port (store.c) owns every rule: id generation, key derivation,
 * validation, hashing, size limits, metadata encoding, expiry. A backend only
 * moves opaque bytes under a 64-hex-character key:
 *  - a write is begin / write* / commit-or-abort. Bytes are pushed as they
 *    arrive, so an object store can stream a multipart upload without local
 *    staging; the metadata document (JSON, produced by the port) arrives at
 *    commit, after the content, and commit publishes both whole-or-nothing.
 *  - open returns the metadata document and, on request, a content reader.
 *  - remove, list, clean_staging (leftovers of dead writers).
 * Backends embed struct ph_artifact_backend as their first member.
 */
#ifndef PINHOLE_ARTIFACT_BACKEND_H
#define PINHOLE_ARTIFACT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/artifact_store.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_artifact_backend_writer ph_artifact_backend_writer;
typedef struct ph_artifact_backend_reader ph_artifact_backend_reader;

typedef bool (*ph_artifact_backend_visit_fn)(void *arg, const char *key, const char *meta,
                                             size_t meta_len);

typedef struct ph_artifact_backend_ops {
    const char *name;
    /* Starts writing the object `key` (never published before commit). */
    ph_status (*write_begin)(ph_artifact_backend *b, const char *key,
                             ph_artifact_backend_writer **w, ph_diag *diag);
    /* Appends len bytes. On failure the caller still calls write_abort. */
    ph_status (*write)(ph_artifact_backend_writer *w, const void *buf, size_t len, ph_diag *diag);
    /* Publishes content + metadata whole-or-nothing. Always consumes w. */
    ph_status (*write_commit)(ph_artifact_backend_writer *w, const char *meta, size_t meta_len,
                              ph_diag *diag);
    /* Discards everything written. Always consumes w; NULL-safe. */
    void (*write_abort)(ph_artifact_backend_writer *w);
    /* Opens `key`: *meta (malloc'd, NUL-terminated, caller frees) and, when
     * r is not NULL, a reader and the content's current size. PH_E_NOT_FOUND
     * when absent. */
    ph_status (*open)(ph_artifact_backend *b, const char *key, char **meta, size_t *meta_len,
                      ph_artifact_backend_reader **r, uint64_t *content_size, ph_diag *diag);
    ph_status (*read)(ph_artifact_backend_reader *r, void *buf, size_t cap, size_t *got,
                      ph_diag *diag);
    void (*read_close)(ph_artifact_backend_reader *r); /* NULL-safe */
    /* Optional (NULL: a read never blocks for long). The one call that may
     * come from another thread while read runs on r: makes that read and
     * every later one on r return promptly with an error. r stays owned by
     * the caller, who still calls read_close once read has returned. */
    void (*read_interrupt)(ph_artifact_backend_reader *r);
    /* Removes `key` (invisible atomically). PH_E_NOT_FOUND when absent. */
    ph_status (*remove)(ph_artifact_backend *b, const char *key, ph_diag *diag);
    /* Visits every published object's metadata; stops when visit returns false. */
    ph_status (*list)(ph_artifact_backend *b, ph_artifact_backend_visit_fn visit, void *arg,
                      ph_diag *diag);
    /* Removes staging leftovers whose writer is gone; counts them in *removed. */
    ph_status (*clean_staging)(ph_artifact_backend *b, uint64_t *removed, ph_diag *diag);
    void (*destroy)(ph_artifact_backend *b);
} ph_artifact_backend_ops;

struct ph_artifact_backend {
    const ph_artifact_backend_ops *ops;
};

/* The filesystem backend rooted at root (created with mode 0700 if missing).
 * Layout and crash guarantees: docs/artifacts.md. *out is owned by the
 * caller (or by the store it is given to). */
PH_API ph_status ph_artifact_backend_fs_open(const char *root, ph_artifact_backend **out,
                                             ph_diag *diag);

/* The S3-compatible object store backend configured by the file at
 * config_path (format, layout and guarantees: docs/artifacts.md). Checks the
 * credentials and the bucket before it returns: PH_E_DENIED for a refused
 * key or secret, PH_E_NOT_FOUND for a missing bucket. *out is owned by the
 * caller (or by the store it is given to). */
PH_API ph_status ph_artifact_backend_s3_open(const char *config_path, ph_artifact_backend **out,
                                             ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_ARTIFACT_BACKEND_H */
