/* grant.c - issuing and verifying grant tokens (format in pinhole/grant.h and
 * docs/grants.md). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "pinhole/diag.h"
#include "grant-int.h"
#include "grant_keyring-int.h"
#include "pinhole/grant.h"

#define TOKEN_PREFIX "v1."
#define TOKEN_PREFIX_LEN 3
#define MAC_LEN 32
#define MAC_B64_LEN 43 /* base64url of 32 bytes, unpadded */
/* Three length-prefixed fields and two 64-bit times. */
#define PAYLOAD_MAX (3 * (1 + PH_GRANT_FIELD_MAX) + 16)

static bool char_in_id_set(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

bool ph_grant_kid_valid(const char *s, size_t len)
{
    if (len == 0 || len > PH_GRANT_KID_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!char_in_id_set((unsigned char)s[i]))
            return false;
    return true;
}

bool ph_grant_field_valid(const char *s, size_t len)
{
    if (len == 0 || len > PH_GRANT_FIELD_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!char_in_id_set((unsigned char)s[i]) && s[i] != '.')
            return false;
    return true;
}

/* HMAC-SHA256 under the keyring's keys.
 *
 * The HMAC implementation is fetched once: EVP_MAC_fetch walks the provider
 * store and costs as much as the MAC itself. A fetched EVP_MAC is immutable
 * and may be shared by threads; it lives until exit.
 *
 * Each thread keeps a few contexts already keyed (MAC_CACHE_SLOTS, each
 * beside a copy of its key): a MAC under a key the thread used before
 * re-initializes that context (EVP_MAC_init without a key keeps the key's
 * inner and outer digest states) instead of making one and deriving them
 * again, which costs a dozen allocations and a digest fetch by name. A slot
 * belongs to one keyring (its generation, never reused) and is found by
 * that and the key's bytes (compared in constant time), never by a
 * keyring's address or a key id: a keyring freed and another made at the
 * same place, or a kid that names another key after a rotation, cannot
 * reach a context keyed with something else. No context is used by two
 * threads at once (an EVP_MAC_CTX is not thread-safe), so workers sharing
 * one keyring share nothing mutable here. What remains per MAC is OpenSSL
 * 3.0's own: HMAC_Init_ex and HMAC_Final copy a SHA-256 state into a
 * freshly allocated one (two allocations, freed within the call).
 *
 * A key lives in the caches no longer than its keyring: ph_keyring_free
 * calls ph_grant_mac_forget, which frees (OpenSSL wipes a freed context)
 * and wipes the slots of that keyring in every thread's cache, so after a
 * reload replaced the keyring, no thread keeps a key rotated out, however
 * long it lives and whether or not it makes another MAC. For that the
 * caches are listed (all_caches, under all_lock) and each has a lock, held
 * by its thread around a MAC (uncontended but for a keyring's end) and by
 * ph_grant_mac_forget; the order is all_lock, then a cache's lock.
 *
 * fork(2) takes every one of those locks first (pthread_atfork, in that
 * order: a MAC in progress ends before it) and both processes release
 * them: a child of a process whose other threads were verifying starts
 * with none held by a thread it does not have, so freeing a keyring there
 * (which locks every cache, the other threads' too) cannot hang.
 *
 * The cache is freed at the thread's exit (its pthread key's destructor);
 * without memory for it, a MAC uses a context of its own, as before. */
#define MAC_CACHE_SLOTS 4

typedef struct mac_slot {
    EVP_MAC_CTX *ctx; /* keyed with key[0..len); NULL: free */
    uint64_t ring;    /* the generation of the keyring the key is of */
    size_t len;
    uint8_t key[PH_GRANT_KEY_MAX];
} mac_slot;

typedef struct mac_cache {
    pthread_mutex_t lock;          /* the slots */
    struct mac_cache *prev, *next; /* in all_caches */
    mac_slot slot[MAC_CACHE_SLOTS];
    unsigned victim; /* the slot the next new key replaces (round robin) */
} mac_cache;

static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;
static EVP_MAC *hmac_impl;
static pthread_key_t cache_key;
static bool cache_key_ok;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static mac_cache *all_caches;
/* The thread's cache (also reachable from cache_key, whose destructor
 * frees it). */
static _Thread_local mac_cache *thread_cache;

static void slot_clear(mac_slot *s)
{
    EVP_MAC_CTX_free(s->ctx);
    OPENSSL_cleanse(s, sizeof *s);
}

static void cache_free(void *p)
{
    mac_cache *c = p;
    pthread_mutex_lock(&all_lock);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        all_caches = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&all_lock);
    /* Unlisted: no other thread reaches it now. */
    for (size_t i = 0; i < MAC_CACHE_SLOTS; i++)
        slot_clear(&c->slot[i]);
    pthread_mutex_destroy(&c->lock);
    ph_secret_free(c, sizeof *c);
    thread_cache = NULL; /* runs in the exiting thread: a later MAC makes another */
}

static void hmac_init_once(void)
{
    hmac_impl = EVP_MAC_fetch(NULL, "HMAC", NULL);
    cache_key_ok = pthread_key_create(&cache_key, cache_free) == 0;
}

/* fork(2)'s handlers: every lock of the caches held across it (the
 * forking thread takes them as ph_grant_mac_forget does), then released in
 * the parent and in the child (where the forking thread is the only one). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&all_lock);
    for (mac_cache *c = all_caches; c != NULL; c = c->next)
        pthread_mutex_lock(&c->lock);
}

static void fork_release(void)
{
    for (mac_cache *c = all_caches; c != NULL; c = c->next)
        pthread_mutex_unlock(&c->lock);
    pthread_mutex_unlock(&all_lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_handlers_once(void)
{
    /* Without them (out of memory) a fork is as unsafe as before. */
    (void)pthread_atfork(fork_prepare, fork_release, fork_release);
}

/* The calling thread's cache, made on first use; NULL without memory. */
static mac_cache *cache_get(void)
{
    if (thread_cache != NULL || !cache_key_ok)
        return thread_cache;
    mac_cache *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c);
        return NULL;
    }
    if (pthread_setspecific(cache_key, c) != 0) {
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
    }
    pthread_once(&fork_once, fork_handlers_once);
    pthread_mutex_lock(&all_lock);
    c->next = all_caches;
    if (all_caches != NULL)
        all_caches->prev = c;
    all_caches = c;
    pthread_mutex_unlock(&all_lock);
    thread_cache = c;
    return c;
}

void ph_grant_mac_forget(uint64_t ring)
{
    pthread_once(&fork_once, fork_handlers_once);
    pthread_mutex_lock(&all_lock);
    for (mac_cache *c = all_caches; c != NULL; c = c->next) {
        pthread_mutex_lock(&c->lock);
        for (size_t i = 0; i < MAC_CACHE_SLOTS; i++)
            if (c->slot[i].ctx != NULL && c->slot[i].ring == ring)
                slot_clear(&c->slot[i]);
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&all_lock);
}

size_t ph_grant_mac_cached(const uint8_t *key, size_t len)
{
    mac_cache *c = thread_cache;
    size_t n = 0;
    if (c == NULL)
        return 0;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < MAC_CACHE_SLOTS; i++) {
        const mac_slot *s = &c->slot[i];
        n += s->ctx != NULL && s->len == len && CRYPTO_memcmp(s->key, key, len) == 0;
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

/* A context keyed with key[0..keylen), ready for EVP_MAC_update. */
static EVP_MAC_CTX *keyed_new(const uint8_t *key, size_t keylen)
{
    EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(hmac_impl);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    if (ctx != NULL && EVP_MAC_init(ctx, key, keylen, params) != 1) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

/* The slot of c keyed with k (of keyring generation ring), made
 * (replacing the victim) when there is none; NULL without memory. Its
 * context is ready for EVP_MAC_update. c's lock is held. */
static mac_slot *keyed_slot(mac_cache *c, uint64_t ring, const ph_grant_key *k)
{
    for (size_t i = 0; i < MAC_CACHE_SLOTS; i++) {
        mac_slot *s = &c->slot[i];
        if (s->ctx != NULL && s->ring == ring && s->len == k->len &&
            CRYPTO_memcmp(s->key, k->key, k->len) == 0)
            return EVP_MAC_init(s->ctx, NULL, 0, NULL) == 1 ? s : NULL;
    }
    mac_slot *s = &c->slot[c->victim];
    c->victim = (c->victim + 1) % MAC_CACHE_SLOTS;
    slot_clear(s);
    if ((s->ctx = keyed_new(k->key, k->len)) == NULL)
        return NULL;
    memcpy(s->key, k->key, k->len);
    s->len = k->len;
    s->ring = ring;
    return s;
}

/* HMAC-SHA256(key k of keyring kr, msg) through the OpenSSL 3 EVP_MAC
 * interface. */
static ph_status hmac_sha256(const ph_keyring *kr, const ph_grant_key *k, const char *msg,
                             size_t len, uint8_t mac[static MAC_LEN], ph_diag *diag)
{
    pthread_once(&hmac_once, hmac_init_once);
    if (hmac_impl == NULL)
        return ph_diag_set(diag, PH_E_UNSUPPORTED, 0, "OpenSSL has no HMAC");
    mac_cache *c = cache_get();
    if (c != NULL)
        pthread_mutex_lock(&c->lock);
    mac_slot *s = c != NULL ? keyed_slot(c, ph_keyring_generation(kr), k) : NULL;
    EVP_MAC_CTX *own = s == NULL ? keyed_new(k->key, k->len) : NULL;
    EVP_MAC_CTX *ctx = s != NULL ? s->ctx : own;
    size_t outl = 0;
    ph_status st = PH_OK;
    if (ctx == NULL) {
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    } else if (EVP_MAC_update(ctx, (const unsigned char *)msg, len) != 1 ||
               EVP_MAC_final(ctx, mac, &outl, MAC_LEN) != 1 || outl != MAC_LEN) {
        st = ph_diag_set(diag, PH_E_INTERNAL, 0, "HMAC-SHA256 failed");
        if (s != NULL)
            slot_clear(s); /* its state is unknown: keyed again next time */
    }
    if (c != NULL)
        pthread_mutex_unlock(&c->lock);
    EVP_MAC_CTX_free(own);
    return st;
}

static size_t put_field(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    p[0] = (uint8_t)n;
    memcpy(p + 1, s, n);
    return n + 1;
}

static size_t put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
    return 8;
}

static bool field_ok(const char *s)
{
    return ph_grant_field_valid(s, strnlen(s, PH_GRANT_FIELD_MAX + 1));
}

ph_status ph_grant_issue(const ph_keyring *kr, const char *kid, const ph_grant *g, char *out,
                         size_t cap, size_t *token_len, ph_diag *diag)
{
    if (kr == NULL || g == NULL || out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "grant issue: missing argument");
    if (!field_ok(g->tenant))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "tenant must be 1..%d characters of [A-Za-z0-9._-]",
                           PH_GRANT_FIELD_MAX);
    if (!field_ok(g->lease))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "lease must be 1..%d characters of [A-Za-z0-9._-]", PH_GRANT_FIELD_MAX);
    if (!field_ok(g->list))
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "list must be 1..%d characters of [A-Za-z0-9._-]", PH_GRANT_FIELD_MAX);
    if (g->not_before < 0 || g->expires <= g->not_before || g->expires > PH_GRANT_TIME_MAX)
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "times must satisfy 0 <= not_before < expires <= %lld",
                           (long long)PH_GRANT_TIME_MAX);
    const ph_grant_key *key =
        kid != NULL ? ph_keyring_find(kr, kid, strlen(kid)) : ph_keyring_first(kr);
    if (key == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no key %s in the keyring",
                           kid != NULL ? "with that id" : "at all");

    uint8_t payload[PAYLOAD_MAX];
    size_t pn = 0;
    pn += put_field(payload + pn, g->tenant);
    pn += put_field(payload + pn, g->lease);
    pn += put_field(payload + pn, g->list);
    pn += put_u64(payload + pn, (uint64_t)g->not_before);
    pn += put_u64(payload + pn, (uint64_t)g->expires);

    char buf[PH_GRANT_TOKEN_MAX + 1];
    size_t kidlen = strlen(key->kid);
    size_t n = 0;
    memcpy(buf, TOKEN_PREFIX, TOKEN_PREFIX_LEN);
    n += TOKEN_PREFIX_LEN;
    memcpy(buf + n, key->kid, kidlen);
    n += kidlen;
    buf[n++] = '.';
    n += ph_b64_encode(payload, pn, PH_B64_URL_NOPAD, buf + n, sizeof buf - n);
    uint8_t mac[MAC_LEN];
    ph_status st = hmac_sha256(kr, key, buf, n, mac, diag);
    if (st != PH_OK)
        return st;
    buf[n++] = '.';
    n += ph_b64_encode(mac, MAC_LEN, PH_B64_URL_NOPAD, buf + n, sizeof buf - n);
    OPENSSL_cleanse(mac, sizeof mac);
    if (cap < n + 1) {
        OPENSSL_cleanse(buf, n);
        return ph_diag_set(diag, PH_E_LIMIT, 0, "token needs %zu bytes, buffer has %zu", n + 1,
                           cap);
    }
    memcpy(out, buf, n + 1);
    OPENSSL_cleanse(buf, n);
    if (token_len != NULL)
        *token_len = n;
    return PH_OK;
}

static ph_status refuse(ph_reason *reason, ph_reason r, ph_diag *diag, size_t off, const char *msg)
{
    if (reason != NULL)
        *reason = r;
    return ph_diag_set(diag, PH_E_DENIED, off, "%s", msg);
}

/* Reads one length-prefixed field from p[*pos..n) into dst (NUL-terminated). */
static bool get_field(const uint8_t *p, size_t n, size_t *pos, char dst[PH_GRANT_FIELD_MAX + 1])
{
    if (*pos >= n)
        return false;
    size_t len = p[*pos];
    if (len > n - *pos - 1 || !ph_grant_field_valid((const char *)p + *pos + 1, len))
        return false;
    memcpy(dst, p + *pos + 1, len);
    dst[len] = '\0';
    *pos += len + 1;
    return true;
}

static bool get_time(const uint8_t *p, size_t n, size_t *pos, int64_t *out)
{
    if (n - *pos < 8)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = v << 8 | p[*pos + i];
    if (v > (uint64_t)PH_GRANT_TIME_MAX)
        return false;
    *out = (int64_t)v;
    *pos += 8;
    return true;
}

ph_status ph_grant_verify(const ph_keyring *kr, const char *token, size_t len, int64_t now,
                          const char *want_list, ph_grant *out, ph_reason *reason, ph_diag *diag)
{
    if (reason != NULL)
        *reason = PH_REASON_GRANT_INVALID;
    if (kr == NULL || (token == NULL && len > 0))
        return ph_diag_set(diag, PH_E_INVAL, 0, "grant verify: missing argument");
    if (len == 0)
        return refuse(reason, PH_REASON_NO_GRANT, diag, 0, "no grant presented");
    if (len > PH_GRANT_TOKEN_MAX)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, PH_GRANT_TOKEN_MAX,
                      "grant token is too long");
    if (len < TOKEN_PREFIX_LEN || memcmp(token, TOKEN_PREFIX, TOKEN_PREFIX_LEN) != 0)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, 0,
                      "grant token does not start with \"v1.\"");

    /* Split into kid, payload and MAC at the only three dots allowed. */
    const char *kid = token + TOKEN_PREFIX_LEN;
    const char *end = token + len;
    const char *dot1 = memchr(kid, '.', (size_t)(end - kid));
    if (dot1 == NULL)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, len, "grant token is truncated");
    size_t kidlen = (size_t)(dot1 - kid);
    if (!ph_grant_kid_valid(kid, kidlen))
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, TOKEN_PREFIX_LEN,
                      "grant key id is malformed");
    const char *pay = dot1 + 1;
    const char *dot2 = memchr(pay, '.', (size_t)(end - pay));
    if (dot2 == NULL)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, len, "grant token is truncated");
    const char *macs = dot2 + 1;
    size_t maclen = (size_t)(end - macs);
    if (maclen != MAC_B64_LEN || memchr(macs, '.', maclen) != NULL)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, (size_t)(macs - token),
                      "grant MAC has the wrong length");
    uint8_t mac[MAC_LEN];
    size_t macn = 0;
    if (!ph_b64_decode(macs, maclen, PH_B64_URL_NOPAD, mac, sizeof mac, &macn) ||
        macn != MAC_LEN)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, (size_t)(macs - token),
                      "grant MAC is not canonical base64url");

    const ph_grant_key *key = ph_keyring_find(kr, kid, kidlen);
    if (key == NULL)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, TOKEN_PREFIX_LEN,
                      "grant key id is not in the keyring");
    uint8_t want[MAC_LEN];
    ph_status st = hmac_sha256(kr, key, token, (size_t)(dot2 - token), want, diag);
    if (st != PH_OK)
        return st;
    int differ = CRYPTO_memcmp(mac, want, MAC_LEN);
    OPENSSL_cleanse(want, sizeof want);
    OPENSSL_cleanse(mac, sizeof mac);
    if (differ != 0)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, (size_t)(macs - token),
                      "grant MAC does not match");

    /* Authentic: only an issuer bug can make the rest fail, still checked. */
    uint8_t payload[PAYLOAD_MAX];
    size_t pn = 0, pos = 0;
    ph_grant g;
    memset(&g, 0, sizeof g);
    if (!ph_b64_decode(pay, (size_t)(dot2 - pay), PH_B64_URL_NOPAD, payload, sizeof payload,
                       &pn) ||
        !get_field(payload, pn, &pos, g.tenant) || !get_field(payload, pn, &pos, g.lease) ||
        !get_field(payload, pn, &pos, g.list) || !get_time(payload, pn, &pos, &g.not_before) ||
        !get_time(payload, pn, &pos, &g.expires) || pos != pn || g.expires <= g.not_before)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, (size_t)(pay - token),
                      "grant payload is malformed");
    memcpy(g.kid, kid, kidlen);
    g.kid[kidlen] = '\0';

    if (now < g.not_before - PH_GRANT_CLOCK_SKEW_SECONDS)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, 0, "grant is not valid yet");
    if (now >= g.expires + PH_GRANT_CLOCK_SKEW_SECONDS)
        return refuse(reason, PH_REASON_GRANT_EXPIRED, diag, 0, "grant has expired");
    if (want_list != NULL && strcmp(want_list, g.list) != 0)
        return refuse(reason, PH_REASON_GRANT_INVALID, diag, 0,
                      "grant is for another allowlist");
    if (out != NULL)
        *out = g;
    if (reason != NULL)
        *reason = PH_REASON_ALLOWED;
    return PH_OK;
}
