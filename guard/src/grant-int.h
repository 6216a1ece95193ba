/* grant-int.h - strict base64 codecs shared by the grant token, the
 * Proxy-Authorization parser and the pinhole-guard tool (private).
 *
 * Why not OpenSSL's EVP_DecodeBlock: it accepts whitespace, ignores
 * non-canonical trailing bits and knows only the standard alphabet; a token
 * must have exactly one spelling so that the MAC covers exactly one string. */
#ifndef PINHOLE_GRANT_INT_H
#define PINHOLE_GRANT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/base64.h"
#include "pinhole/status.h"

/* True for a well-formed key id / grant field (grant.h rules). */
bool ph_grant_kid_valid(const char *s, size_t len);
bool ph_grant_field_valid(const char *s, size_t len);

#endif
