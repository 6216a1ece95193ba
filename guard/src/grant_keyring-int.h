/* grant_keyring-int.h - the keyring's layout, private to the grant code. */
#ifndef PINHOLE_GRANT_KEYRING_INT_H
#define PINHOLE_GRANT_KEYRING_INT_H

#include <stddef.h>
#include <stdint.h>

#include "pinhole/grant.h"

typedef struct ph_grant_key {
    char kid[PH_GRANT_KID_MAX + 1];
    uint8_t key[PH_GRANT_KEY_MAX];
    size_t len;
} ph_grant_key;

/* The key named kid[0..len), or NULL. */
const ph_grant_key *ph_keyring_find(const ph_keyring *kr, const char *kid, size_t len);
/* The signing key (the first added), or NULL when empty. */
const ph_grant_key *ph_keyring_first(const ph_keyring *kr);

/* The keyring's generation: a number no other keyring of the process had
 * or will have (its keys' contexts in grant.c's caches belong to it). */
uint64_t ph_keyring_generation(const ph_keyring *kr);

/* grant.c: frees (and wipes) every thread's keyed contexts of the keyring
 * of generation ring, which ends (ph_keyring_free). Safe from any thread. */
void ph_grant_mac_forget(uint64_t ring);
/* For tests: how many keyed contexts the calling thread keeps for
 * key[0..len) (grant.c's cache). */
size_t ph_grant_mac_cached(const uint8_t *key, size_t len);

#endif
