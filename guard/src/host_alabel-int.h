/* host_alabel-int.h - validating the IDN A-labels ("xn--...") of a host name.
 * Private to libpinhole (used by the URL / CONNECT authority parser);
 * policyc reaches it through compiler-int.h. */
#ifndef PINHOLE_HOST_ALABEL_INT_H
#define PINHOLE_HOST_ALABEL_INT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * host[0..len) is a canonical host name (ph_host_check passed: lowercase LDH
 * labels). Returns true when every label that starts with "xn--" is a valid
 * IDNA A-label: it decodes, and encoding the result again (UTS 46
 * non-transitional, IDNA 2008 rules, NFC) gives the label back byte for byte.
 * Otherwise returns false and *where (if not NULL) gets the byte offset of
 * the first invalid label. Thread-safe; libidn2 allocates internally only
 * while an xn-- label is being checked.
 */
bool ph_host_a_labels_valid(const char *host, size_t len, size_t *where);

#endif
