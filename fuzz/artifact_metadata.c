/* artifact_metadata.c - fuzzes the strict metadata parser: any document it
 * accepts re-encodes to a document that decodes to the same metadata and
 * re-encodes to the very same bytes (one canonical spelling). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/artifact_metadata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const ph_artifact_metadata *a, const ph_artifact_metadata *b)
{
    return a->tenant_id_len == b->tenant_id_len &&
           memcmp(a->tenant_id, b->tenant_id, a->tenant_id_len) == 0 &&
           strcmp(a->artifact_id, b->artifact_id) == 0 && a->filename_len == b->filename_len &&
           memcmp(a->filename, b->filename, a->filename_len) == 0 &&
           strcmp(a->content_type, b->content_type) == 0 && strcmp(a->run_id, b->run_id) == 0 &&
           strcmp(a->source_path, b->source_path) == 0 && a->size == b->size &&
           memcmp(a->sha256, b->sha256, sizeof a->sha256) == 0 &&
           a->created_at == b->created_at && a->expires_at == b->expires_at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ph_artifact_metadata *m = NULL, *m2 = NULL;
    if (ph_artifact_metadata_decode((const char *)data, size, &m, NULL) != PH_OK)
        return 0;
    char *doc = NULL, *doc2 = NULL;
    size_t len = 0, len2 = 0;
    if (ph_artifact_metadata_encode(m, &doc, &len, NULL) != PH_OK)
        abort(); /* accepted but not encodable */
    if (ph_artifact_metadata_decode(doc, len, &m2, NULL) != PH_OK || !same(m, m2))
        abort();
    if (ph_artifact_metadata_encode(m2, &doc2, &len2, NULL) != PH_OK || len != len2 ||
        memcmp(doc, doc2, len) != 0)
        abort();
    free(doc);
    free(doc2);
    ph_artifact_metadata_free(&m);
    ph_artifact_metadata_free(&m2);
    return 0;
}
