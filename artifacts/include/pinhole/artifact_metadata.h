/*
 * pinhole/artifact_metadata.h - the metadata document stored beside each
 * artifact: one JSON object, encoded and parsed strictly (jansson).
 *
 * Format (version 1), every member required, no other member allowed,
 * duplicates refused:
 *   {"v":1, "tenant_id_hex":"..", "artifact_id":"<32 hex>",
 *    "filename":"<UTF-8>" | "filename_hex":"<hex>",   (exactly one)
 *    "content_type":"..", "run_id":"..", "source_path":"..",
 *    "size":N, "sha256":"<64 hex>", "created_at":N, "expires_at":N}
 * tenant_id is hex because it may be any bytes; the filename is a JSON
 * string when it is valid UTF-8 (NUL escaped as \u0000) and hex otherwise,
 * so it round-trips byte for byte.
 */
#ifndef PINHOLE_ARTIFACT_METADATA_H
#define PINHOLE_ARTIFACT_METADATA_H

#include <stddef.h>

#include "pinhole/artifact_store.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Encodes m as compact JSON. *out is malloc'd (caller frees), NUL-terminated,
 * *out_len its length. PH_E_INVAL when m breaks a field rule. */
PH_API ph_status ph_artifact_metadata_encode(const ph_artifact_metadata *m, char **out,
                                             size_t *out_len, ph_diag *diag);

/* Parses a document produced by ph_artifact_metadata_encode. Refuses (PH_E_FORMAT)
 * anything else: unknown, missing, duplicate or mistyped members, bad hex,
 * negative or out-of-range numbers, field rules broken, documents larger
 * than PH_ARTIFACT_METADATA_MAX. On success *out is owned by the caller. */
PH_API ph_status ph_artifact_metadata_decode(const char *json, size_t len,
                                             ph_artifact_metadata **out, ph_diag *diag);

/* The field rules shared by put and decode: content type and run id are
 * printable ASCII (0x20..0x7e) up to PH_ARTIFACT_FIELD_MAX bytes (content
 * type non-empty); the source path is valid UTF-8 without control characters,
 * not absolute, up to PH_ARTIFACT_SOURCE_PATH_MAX bytes. */
PH_API ph_status ph_artifact_metadata_check(const ph_artifact_metadata *m, ph_diag *diag);

/* Deep copy; *out owned by the caller. */
PH_API ph_status ph_artifact_metadata_copy(const ph_artifact_metadata *m,
                                           ph_artifact_metadata **out, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif
