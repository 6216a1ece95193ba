/* grant_keyring.c - the set of grant keys, key generation, and the key file
 * (format in docs/grants.md):
 *
 *   # comment
 *   <kid> <64..128 lowercase hex digits>
 *
 * one key per line, the signing (newest) key first, at most
 * PH_GRANT_KEYS_MAX keys, exactly one space, no other whitespace. */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "pinhole/diag.h"
#include "pinhole/hex.h"
#include "grant-int.h"
#include "grant_keyring-int.h"
#include "policy_file-int.h"

#define KEY_FILE_MAX (16 * 1024)

struct ph_keyring {
    uint64_t generation; /* ph_keyring_generation */
    size_t count;
    ph_grant_key keys[PH_GRANT_KEYS_MAX];
};

/* The next keyring's generation: 2^64 keyrings never come. */
static atomic_uint_fast64_t next_generation = 1;

void ph_secret_free(void *p, size_t len)
{
    if (p == NULL)
        return;
    OPENSSL_cleanse(p, len);
    free(p);
}

ph_status ph_keyring_new(ph_keyring **out, ph_diag *diag)
{
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "keyring: missing argument");
    *out = calloc(1, sizeof **out);
    if (*out == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    (*out)->generation = atomic_fetch_add(&next_generation, 1);
    return PH_OK;
}

void ph_keyring_free(ph_keyring **kr)
{
    if (kr == NULL || *kr == NULL)
        return;
    /* Its keys leave every thread's keyed contexts with it (grant.c). */
    ph_grant_mac_forget((*kr)->generation);
    ph_secret_free(*kr, sizeof **kr);
    *kr = NULL;
}

uint64_t ph_keyring_generation(const ph_keyring *kr)
{
    return kr->generation;
}

size_t ph_keyring_count(const ph_keyring *kr) { return kr != NULL ? kr->count : 0; }

const ph_grant_key *ph_keyring_first(const ph_keyring *kr)
{
    return kr != NULL && kr->count > 0 ? &kr->keys[0] : NULL;
}

const char *ph_keyring_signing_kid(const ph_keyring *kr)
{
    const ph_grant_key *k = ph_keyring_first(kr);
    return k != NULL ? k->kid : NULL;
}

const ph_grant_key *ph_keyring_find(const ph_keyring *kr, const char *kid, size_t len)
{
    for (size_t i = 0; kr != NULL && i < kr->count; i++)
        if (strlen(kr->keys[i].kid) == len && memcmp(kr->keys[i].kid, kid, len) == 0)
            return &kr->keys[i];
    return NULL;
}

ph_status ph_keyring_add(ph_keyring *kr, const char *kid, const uint8_t *key, size_t len,
                         ph_diag *diag)
{
    if (kr == NULL || kid == NULL || key == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "keyring add: missing argument");
    size_t kidlen = strnlen(kid, PH_GRANT_KID_MAX + 1);
    if (!ph_grant_kid_valid(kid, kidlen))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "key id must be 1..%d characters of [A-Za-z0-9_-]", PH_GRANT_KID_MAX);
    if (len < PH_GRANT_KEY_MIN || len > PH_GRANT_KEY_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "key %s has %zu bytes; keys have %d to %d", kid,
                           len, PH_GRANT_KEY_MIN, PH_GRANT_KEY_MAX);
    if (ph_keyring_find(kr, kid, kidlen) != NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "duplicate key id %s", kid);
    if (kr->count == PH_GRANT_KEYS_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "a keyring holds at most %d keys",
                           PH_GRANT_KEYS_MAX);
    ph_grant_key *k = &kr->keys[kr->count++];
    memcpy(k->kid, kid, kidlen + 1);
    memcpy(k->key, key, len);
    k->len = len;
    return PH_OK;
}

ph_status ph_grant_keygen(uint8_t *key, size_t len, ph_diag *diag)
{
    if (key == NULL || len < PH_GRANT_KEY_MIN || len > PH_GRANT_KEY_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "keys have %d to %d bytes", PH_GRANT_KEY_MIN,
                           PH_GRANT_KEY_MAX);
    if (RAND_bytes(key, (int)len) != 1)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "RAND_bytes failed");
    return PH_OK;
}

ph_status ph_grant_format_key_line(const char *kid, const uint8_t *key, size_t len, char *out,
                                   size_t cap, ph_diag *diag)
{
    if (kid == NULL || key == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "key line: missing argument");
    size_t kidlen = strnlen(kid, PH_GRANT_KID_MAX + 1);
    if (!ph_grant_kid_valid(kid, kidlen) || len < PH_GRANT_KEY_MIN || len > PH_GRANT_KEY_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0, "malformed key id or key length");
    if (cap < kidlen + 2 * len + 3)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "key line buffer too small");
    size_t n = 0;
    memcpy(out, kid, kidlen);
    n += kidlen;
    out[n++] = ' ';
    ph_hex_encode(key, len, out + n);
    n += 2 * len;
    out[n++] = '\n';
    out[n] = '\0';
    return PH_OK;
}

/* One non-comment line: "<kid> <hex>". off is the line's byte offset. */
static ph_status parse_key_line(void *ctx, const char *line, size_t len, size_t lineno,
                                size_t off, ph_diag *diag)
{
    ph_keyring *kr = ctx;
    const char *sp = memchr(line, ' ', len);
    if (sp == NULL)
        return ph_diag_set(diag, PH_E_FORMAT, off,
                           "line %zu: expected \"<kid> <hex key>\" separated by one space",
                           lineno);
    size_t kidlen = (size_t)(sp - line);
    if (!ph_grant_kid_valid(line, kidlen))
        return ph_diag_set(diag, PH_E_FORMAT, off,
                           "line %zu: key id must be 1..%d characters of [A-Za-z0-9_-]", lineno,
                           PH_GRANT_KID_MAX);
    const char *hex = sp + 1;
    size_t hexlen = len - kidlen - 1;
    uint8_t key[PH_GRANT_KEY_MAX];
    for (size_t i = 0; i < hexlen; i++)
        if (ph_hex_value((unsigned char)hex[i]) < 0)
            return ph_diag_set(diag, PH_E_FORMAT, off + kidlen + 1 + i,
                               "line %zu column %zu: the key must be lowercase hex digits only",
                               lineno, kidlen + 2 + i);
    if (hexlen % 2 != 0 || hexlen < 2 * PH_GRANT_KEY_MIN || hexlen > 2 * PH_GRANT_KEY_MAX)
        return ph_diag_set(diag, PH_E_FORMAT, off + kidlen + 1,
                           "line %zu: the key has %zu hex digits; keys have %d to %d bytes "
                           "(an even number of %d to %d digits)",
                           lineno, hexlen, PH_GRANT_KEY_MIN, PH_GRANT_KEY_MAX,
                           2 * PH_GRANT_KEY_MIN, 2 * PH_GRANT_KEY_MAX);
    (void)ph_hex_decode(hex, hexlen, key, NULL); /* every digit checked above */
    char kid[PH_GRANT_KID_MAX + 1];
    memcpy(kid, line, kidlen);
    kid[kidlen] = '\0';
    ph_diag inner;
    ph_status st = ph_keyring_add(kr, kid, key, hexlen / 2, &inner);
    OPENSSL_cleanse(key, sizeof key);
    if (st != PH_OK)
        return ph_diag_set(diag, st == PH_E_LIMIT ? PH_E_LIMIT : PH_E_FORMAT, off,
                           "line %zu: %s", lineno, inner.message);
    return PH_OK;
}

ph_status ph_keyring_parse(const char *text, size_t len, ph_keyring **out, ph_diag *diag)
{
    if (out == NULL || (text == NULL && len > 0))
        return ph_diag_set(diag, PH_E_INVAL, 0, "keyring parse: missing argument");
    *out = NULL;
    if (len > KEY_FILE_MAX)
        return ph_diag_set(diag, PH_E_LIMIT, 0, "key file is over %d bytes", KEY_FILE_MAX);
    ph_keyring *kr = NULL;
    ph_status st = ph_keyring_new(&kr, diag);
    if (st != PH_OK)
        return st;
    st = ph_policy_lines(text, len, parse_key_line, kr, diag);
    if (st != PH_OK)
        goto fail;
    if (kr->count == 0) {
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "the key file holds no key");
        goto fail;
    }
    *out = kr;
    return PH_OK;
fail:
    ph_keyring_free(&kr);
    return st;
}

static ph_status parse_keys(const char *text, size_t len, void *out, ph_diag *diag)
{
    return ph_keyring_parse(text, len, out, diag);
}

ph_status ph_keyring_load_file(const char *path, ph_keyring **out, ph_diag *diag)
{
    if (path == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "keyring load: missing argument");
    *out = NULL;
    return ph_policy_file_load(path, KEY_FILE_MAX, 077, "gives group or others access to the keys",
                               parse_keys, out, diag);
}

ph_status ph_keyring_id(const ph_keyring *kr, char out[static PH_KEYRING_ID_HEX_LEN + 1])
{
    out[0] = '\0';
    if (kr == NULL)
        return PH_E_INVAL;
    /* SHA-256 over (kid, NUL, length, key) of every key in order: it changes
     * with any key, kid or order, and reveals nothing of the keys. */
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    uint8_t md[32];
    unsigned mdlen = 0;
    bool ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1;
    for (size_t i = 0; ok && i < kr->count; i++) {
        const ph_grant_key *k = &kr->keys[i];
        uint8_t len = (uint8_t)k->len;
        ok = EVP_DigestUpdate(ctx, k->kid, strlen(k->kid) + 1) == 1 &&
             EVP_DigestUpdate(ctx, &len, 1) == 1 && EVP_DigestUpdate(ctx, k->key, k->len) == 1;
    }
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == sizeof md;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return PH_E_INTERNAL;
    ph_hex_encode(md, sizeof md, out); /* PH_KEYRING_ID_HEX_LEN digits and a NUL */
    OPENSSL_cleanse(md, sizeof md);
    return PH_OK;
}
