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

#endif
