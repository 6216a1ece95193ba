/*
 * pinhole/artifact_name.h - filenames on the way out (ADR-0029 decision 12).
 *
 * An artifact's filename is stored exactly as given and is display metadata
 * only. Before it is shown to a browser or written to a disk it goes through
 * one of these functions. Every rule is listed in docs/filenames.md.
 */
#ifndef PINHOLE_ARTIFACT_NAME_H
#define PINHOLE_ARTIFACT_NAME_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/artifact_store.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A safe local filename is at most this many bytes (plus a NUL). */
#define PH_FILENAME_SAFE_MAX 255
/* A Content-Disposition value never exceeds this many bytes (plus a NUL). */
#define PH_CONTENT_DISPOSITION_MAX 2048

/* Turns any bytes into a safe local filename: one component, valid UTF-8
 * in NFC, no control, format (Cf) or other invisible characters, no quotes,
 * backslashes, separator look-alikes or Windows-reserved characters, no
 * leading dots, spaces or dashes, no trailing dots or spaces, no reserved
 * device name, 1..255 bytes never splitting a UTF-8 sequence; and all of it
 * holds again after NFKC normalization. When nothing is left the result is
 * "artifact-<first 8 chars of artifact_id>" or "artifact" when artifact_id
 * is NULL or malformed. Idempotent. Writes a NUL-terminated string to out
 * and returns its length (never 0). */
PH_API size_t ph_filename_sanitize(const void *name, size_t len, const char *artifact_id,
                                   char out[static PH_FILENAME_SAFE_MAX + 1]);

/* The single checker of every rule above, used by the tests and the fuzzer.
 * Returns true when name (len bytes) is a safe local filename; otherwise
 * false with *why (if not NULL) set to a static description of the first
 * broken rule. */
PH_API bool ph_filename_is_safe(const char *name, size_t len, const char **why);

/* The Content-Disposition header value for an artifact (RFC 6266):
 *   attachment; filename="<ASCII fallback>"; filename*=UTF-8''<RFC 8187>
 * The fallback is the sanitized name with every non-ASCII character and '%'
 * replaced by '_'; filename* percent-encodes the sanitized UTF-8 name.
 * Writes a NUL-terminated value to out and returns its length. */
PH_API size_t ph_content_disposition(const void *name, size_t len, const char *artifact_id,
                                     char out[static PH_CONTENT_DISPOSITION_MAX + 1]);

/* Convenience: both of the above for a stored artifact. */
PH_API size_t ph_artifact_safe_filename(const ph_artifact_metadata *m,
                                        char out[static PH_FILENAME_SAFE_MAX + 1]);
PH_API size_t ph_artifact_content_disposition(const ph_artifact_metadata *m,
                                              char out[static PH_CONTENT_DISPOSITION_MAX + 1]);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_ARTIFACT_NAME_H */
