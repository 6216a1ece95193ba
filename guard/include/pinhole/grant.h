/*
 * pinhole/grant.h - network grants: the second "yes" (DESIGN section 5).
 *
 * A worker that approved a sandbox's SANDBOX_NETWORK request issues a grant:
 * an HMAC-SHA256 token (OpenSSL EVP_MAC) over tenant, lease, list name,
 * not-before and expiry, tagged with the id of the key that signed it so keys
 * can rotate. The proxy verifies it statelessly with a keyring holding every
 * key still accepted. docs/grants.md specifies the token and key-file formats;
 * in short:
 *
 *   v1.<kid>.<base64url(payload)>.<base64url(hmac)>
 *
 *   payload = u8 len + tenant | u8 len + lease | u8 len + list
 *           | u64be not_before | u64be expires
 *   hmac    = HMAC-SHA256(key[kid], "v1.<kid>.<base64url(payload)>")
 *
 * base64url is strict: no padding, no whitespace, canonical trailing bits.
 * Verification checks the MAC (CRYPTO_memcmp) before it looks at any field.
 *
 * Every function that refuses a grant returns PH_E_DENIED and sets *reason to
 * PH_REASON_NO_GRANT, PH_REASON_GRANT_INVALID or PH_REASON_GRANT_EXPIRED; the
 * diagnostic says exactly why (for logs, never for the client).
 */
#ifndef PINHOLE_GRANT_H
#define PINHOLE_GRANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Key ids: 1..32 bytes of [A-Za-z0-9_-] (no '.', so the token splits one way). */
#define PH_GRANT_KID_MAX 32
/* Keys: 32..64 random bytes. */
#define PH_GRANT_KEY_MIN 32
#define PH_GRANT_KEY_MAX 64
/* Tenant, lease and list: 1..64 bytes of [A-Za-z0-9._-]. */
#define PH_GRANT_FIELD_MAX 64
/* A keyring holds at most this many keys. */
#define PH_GRANT_KEYS_MAX 16
/* Longest token, NUL excluded; a buffer of PH_GRANT_TOKEN_MAX + 1 always fits. */
#define PH_GRANT_TOKEN_MAX 400
/* Clock skew tolerated between issuer and verifier, in seconds: a grant is
 * accepted from not_before - skew until expires + skew (exclusive). */
#define PH_GRANT_CLOCK_SKEW_SECONDS 30
/* Latest representable time (9999-12-31T23:59:59Z): keeps arithmetic with
 * the skew far from overflow. */
#define PH_GRANT_TIME_MAX INT64_C(253402300799)

/* What a grant says. Strings are NUL-terminated. */
typedef struct ph_grant {
    char kid[PH_GRANT_KID_MAX + 1];       /* key that signed it (set by verify) */
    char tenant[PH_GRANT_FIELD_MAX + 1];
    char lease[PH_GRANT_FIELD_MAX + 1];
    char list[PH_GRANT_FIELD_MAX + 1];    /* the allowlist it opens */
    int64_t not_before;                   /* unix seconds (usually issue time) */
    int64_t expires;                      /* unix seconds, > not_before */
} ph_grant;

/* A set of HMAC keys by id. The first key added is the signing key (key files
 * list the newest first); every key verifies. Opaque; the keyring owns copies
 * of the key bytes and wipes them (OPENSSL_cleanse) when freed. A keyring is
 * immutable once shared: concurrent verify/issue calls on it are safe, adding
 * keys concurrently is not. */
typedef struct ph_keyring ph_keyring;

/* Creates an empty keyring in *out (caller frees with ph_keyring_free). */
PH_API ph_status ph_keyring_new(ph_keyring **out, ph_diag *diag);

/* Adds a copy of key[0..len) under kid. Refuses (PH_E_INVAL) a malformed kid,
 * a key shorter than PH_GRANT_KEY_MIN or longer than PH_GRANT_KEY_MAX, and a
 * kid already present; PH_E_LIMIT past PH_GRANT_KEYS_MAX keys. */
PH_API ph_status ph_keyring_add(ph_keyring *kr, const char *kid, const uint8_t *key, size_t len,
                                ph_diag *diag);

/* Parses key-file text (docs/grants.md) into a new keyring in *out. text
 * need not be NUL-terminated. Every error names its line (diag->offset is the
 * byte offset). Nothing is returned on error. */
PH_API ph_status ph_keyring_parse(const char *text, size_t len, ph_keyring **out, ph_diag *diag);

/* Reads and parses the key file at path. Refuses (PH_E_INVAL) a file that is
 * not a regular file (a FIFO or a device is not waited on: ph_open_regular)
 * or that grants any permission to group or others (keys must be mode 0600
 * or 0400), and files over 16 KiB (PH_E_LIMIT); PH_E_NOT_FOUND when there is
 * no file. */
PH_API ph_status ph_keyring_load_file(const char *path, ph_keyring **out, ph_diag *diag);

/* Number of keys; the id of the signing key (NULL when empty). Borrowed. */
PH_API size_t ph_keyring_count(const ph_keyring *kr);
PH_API const char *ph_keyring_signing_kid(const ph_keyring *kr);

/* The keyring's id: 64 lowercase hex digits (SHA-256 over every key id and
 * key in order), for logs and reload reports; it reveals nothing of the
 * keys. PH_E_INVAL for NULL. */
#define PH_KEYRING_ID_HEX_LEN 64
PH_API ph_status ph_keyring_id(const ph_keyring *kr, char out[static PH_KEYRING_ID_HEX_LEN + 1]);

/* Wipes and frees *kr, sets it to NULL; the keyed HMAC contexts any
 * thread keeps for its keys go with it. NULL-safe. */
PH_API void ph_keyring_free(ph_keyring **kr);

/* Wipes p[0..len) (OPENSSL_cleanse, which the compiler cannot drop) and
 * frees p (from malloc): for memory that held a token, a key or a header
 * carrying one, so that no copy outlives its use in freed memory. len may
 * be less than the block (the part that held secrets). NULL-safe. */
PH_API void ph_secret_free(void *p, size_t len);

/* Fills key[0..len) from RAND_bytes (len within the key limits). */
PH_API ph_status ph_grant_keygen(uint8_t *key, size_t len, ph_diag *diag);

/* Formats one key-file line "<kid> <lowercase hex>\n" into out[0..cap).
 * PH_E_LIMIT when cap is too small (2 * len + PH_GRANT_KID_MAX + 3 fits). */
PH_API ph_status ph_grant_format_key_line(const char *kid, const uint8_t *key, size_t len,
                                          char *out, size_t cap, ph_diag *diag);

/*
 * Issues a token for g (its kid field is ignored) signed with the key named
 * kid, or with the keyring's signing key when kid is NULL. Writes the token
 * and a NUL into out[0..cap); *token_len (if not NULL) gets its length.
 * PH_E_INVAL for malformed fields, times out of order or past
 * PH_GRANT_TIME_MAX, or an unknown kid; PH_E_LIMIT when cap is too small.
 */
PH_API ph_status ph_grant_issue(const ph_keyring *kr, const char *kid, const ph_grant *g, char *out,
                                size_t cap, size_t *token_len, ph_diag *diag);

/*
 * Verifies token[0..len) at time now (unix seconds). When want_list is not
 * NULL the grant must name exactly that list. On PH_OK *out (if not NULL)
 * holds the grant. Otherwise returns PH_E_DENIED with *reason:
 *   PH_REASON_NO_GRANT       len == 0;
 *   PH_REASON_GRANT_INVALID  malformed, oversized, unknown key id, bad MAC,
 *                            not yet valid, or another list;
 *   PH_REASON_GRANT_EXPIRED  now >= expires + PH_GRANT_CLOCK_SKEW_SECONDS.
 * *reason is PH_REASON_ALLOWED on success. The MAC comparison is constant
 * time; fields are looked at only once the MAC matched. PH_E_INVAL for a
 * NULL keyring (or NULL token with len > 0).
 */
PH_API ph_status ph_grant_verify(const ph_keyring *kr, const char *token, size_t len, int64_t now,
                                 const char *want_list, ph_grant *out, ph_reason *reason,
                                 ph_diag *diag);

/* The credentials carried by a Proxy-Authorization header value. */
typedef struct ph_proxy_credentials {
    char token[PH_GRANT_TOKEN_MAX + 1]; /* NUL-terminated */
    size_t token_len;
    bool has_lease;                      /* Basic: the user name part */
    char lease[PH_GRANT_FIELD_MAX + 1];
} ph_proxy_credentials;

/*
 * Parses a Proxy-Authorization field value (OWS already trimmed by the HTTP
 * parser) in one of the two transports:
 *   "Basic " base64(lease ":" token)   (what http://lease:token@proxy sends)
 *   "Bearer " token
 * The scheme is matched case-insensitively (RFC 9110), followed by exactly one
 * space; base64 must be canonical with padding; nothing may follow. value ==
 * NULL or len == 0 gives PH_REASON_NO_GRANT; anything malformed gives
 * PH_REASON_GRANT_INVALID (both with PH_E_DENIED). *out is filled on PH_OK.
 */
PH_API ph_status ph_proxy_authorization_parse(const char *value, size_t len,
                                              ph_proxy_credentials *out, ph_reason *reason,
                                              ph_diag *diag);

/*
 * Parses a Proxy-Authorization value and verifies its grant (ph_grant_verify
 * rules). With Basic, the user name must equal the grant's lease, else
 * PH_REASON_GRANT_INVALID. What the proxy calls for every request.
 */
PH_API ph_status ph_grant_verify_proxy_authorization(const ph_keyring *kr, const char *value,
                                                     size_t len, int64_t now,
                                                     const char *want_list, ph_grant *out,
                                                     ph_reason *reason, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_GRANT_H */
