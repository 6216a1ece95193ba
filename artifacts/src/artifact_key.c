/* artifact_key.c - the storage key of an artifact (ADR-0029 decision 12).
 *
 * key = hex(SHA-256("pinhole-artifact-key-v1" 0x00 || be64(len tenant) ||
 *                   tenant || be64(32) || artifact id))
 * Inputs are length-prefixed so no two (tenant, id) pairs share a preimage,
 * the tenant may be any bytes (it never becomes a path) and the filename is
 * not an input at all: a key cannot be steered by anything but the pair. */
#include <string.h>

#include <openssl/evp.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "ids-int.h"
#include "pinhole/artifact_store.h"

static const char key_domain[] = "pinhole-artifact-key-v1"; /* + its NUL */

static void be64(uint64_t v, unsigned char out[8])
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (unsigned char)(v & 0xff);
}

ph_status ph_artifact_key(const void *tenant_id, size_t tenant_id_len, const char *artifact_id,
                          size_t id_len, char key[static PH_ARTIFACT_KEY_LEN + 1], ph_diag *diag)
{
    key[0] = '\0';
    ph_status st = ph_artifact_check_pair(tenant_id, tenant_id_len, artifact_id, id_len, diag);
    if (st != PH_OK)
        return st;
    unsigned char tlen[8], ilen[8], digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    be64(tenant_id_len, tlen);
    be64(id_len, ilen);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, key_domain, sizeof key_domain) == 1 &&
             EVP_DigestUpdate(ctx, tlen, sizeof tlen) == 1 &&
             EVP_DigestUpdate(ctx, tenant_id, tenant_id_len) == 1 &&
             EVP_DigestUpdate(ctx, ilen, sizeof ilen) == 1 &&
             EVP_DigestUpdate(ctx, artifact_id, id_len) == 1 &&
             EVP_DigestFinal_ex(ctx, digest, &dlen) == 1 && dlen == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "SHA-256 failed while deriving a key");
    ph_hex_encode(digest, 32, key);
    return PH_OK;
}
