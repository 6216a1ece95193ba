/* s3-int.h - the S3 backend's configuration, its small XML extractor and
 * the hooks its tests use (private). */
#ifndef PINHOLE_ARTIFACTS_S3_INT_H
#define PINHOLE_ARTIFACTS_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/artifact_backend.h"

enum { PH_S3_SIGN_AUTO, PH_S3_SIGN_ALWAYS, PH_S3_SIGN_NEVER };

#define PH_S3_MIN_PART ((uint64_t)5 << 20) /* S3's floor for every part but the last */

typedef struct ph_s3_config {
    char endpoint[272];   /* scheme://host[:port], no path */
    char host[256];       /* host[:port] of the endpoint */
    bool https;
    char region[64];
    char bucket[64];
    char prefix[128];     /* no leading or trailing '/' */
    bool virtual_host;    /* bucket.host instead of host/bucket */
    bool allow_http;      /* plain http refused unless set */
    bool create_bucket;   /* PUT the bucket at open (tests, first run) */
    char access_key[128];
    char secret_key[128];
    char ca_file[512];
    long connect_timeout_ms, request_timeout_ms;
    int retries;          /* attempts after the first */
    long retry_base_ms;   /* backoff: base * 2^n, plus jitter up to the same */
    uint64_t multipart_threshold, part_size;
    /* x-amz-content-sha256 of content bodies (single PUT, parts): their
     * SHA-256 (PH_S3_SIGN_ALWAYS), or UNSIGNED-PAYLOAD (PH_S3_SIGN_NEVER);
     * PH_S3_SIGN_AUTO is unsigned over https or to a loopback host, signed
     * otherwise. Other bodies (metadata, XML) are always signed. */
    int sign_content;
    int64_t staging_grace_seconds; /* age before an unfinished upload is swept */
} ph_s3_config;

/* Parses the configuration file at path (format: docs/artifacts.md);
 * credentials come from its credentials_file (mode 0600, ours) or else from
 * PINHOLE_S3_ACCESS_KEY / PINHOLE_S3_SECRET_KEY. Errors name the line. */
ph_status ph_s3_config_load(const char *path, ph_s3_config *cfg, ph_diag *diag);

/* Opens the backend over an already parsed configuration. */
ph_status ph_s3_backend_open_config(const ph_s3_config *cfg, ph_artifact_backend **out,
                                    ph_diag *diag);

/* ---- the XML extractor: S3's small responses only ----
 * Finds the next <tag>text</tag> in doc[*pos..len) with no attributes on
 * tag, returns the span of text (entities still encoded) and moves *pos past
 * the close tag. Comments, CDATA, DOCTYPE and processing instructions other
 * than the leading <?xml?> are refused (PH_E_FORMAT), as is a tag left open.
 * PH_E_NOT_FOUND when there is no further <tag>. */
typedef struct ph_s3_span {
    const char *p;
    size_t len;
} ph_s3_span;

ph_status ph_s3_xml_check(const char *doc, size_t len, ph_diag *diag);
ph_status ph_s3_xml_next(const char *doc, size_t len, size_t *pos, const char *tag,
                         ph_s3_span *out);
/* Decodes the five predefined entities and &#N; / &#xH; (ASCII only) of
 * in into out (cap bytes, NUL-terminated). false on anything else. */
bool ph_s3_xml_text(ph_s3_span in, char *out, size_t cap);

/* Test hook: the number of unfinished multipart uploads under the prefix. */
ph_status ph_s3_backend_count_uploads(ph_artifact_backend *b, uint64_t *n, ph_diag *diag);

/* Test hook: one request (PUT with data, DELETE, HEAD with data NULL) on
 * the object `name` in the bucket, outside every rule of the port. */
ph_status ph_s3_backend_raw(ph_artifact_backend *b, const char *method, const char *name,
                            const void *data, size_t len, ph_diag *diag);

#endif
