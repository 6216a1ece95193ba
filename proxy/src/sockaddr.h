/* sockaddr.h - numeric socket addresses as the proxy's settings and logs
 * spell them ("1.2.3.4:80", "[::1]:80"). Listeners are not destinations:
 * nothing here resolves a name. */
#ifndef PX_SOCKADDR_H
#define PX_SOCKADDR_H

#include <stddef.h>
#include <sys/socket.h>

#include "pinhole/status.h"

typedef struct px_sockaddr {
    struct sockaddr_storage ss;
    socklen_t len;
} px_sockaddr;

/* Parses "1.2.3.4:80" or "[::1]:80" (numeric only: listeners are not
 * destinations and are never resolved). */
ph_status px_sockaddr_parse(const char *text, px_sockaddr *out, ph_diag *diag);
/* Formats an address as "1.2.3.4:80" / "[::1]:80". */
void px_sockaddr_format(const struct sockaddr *sa, char *buf, size_t cap);
/* Formats only the address part ("1.2.3.4", "::1"). */
void px_addr_format(const struct sockaddr *sa, char *buf, size_t cap);

#endif
