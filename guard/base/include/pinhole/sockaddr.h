/*
 * pinhole/sockaddr.h - numeric socket addresses to and from text, one
 * spelling for every module: "1.2.3.4:80" and "[2001:db8::1]:80" in
 * settings (listeners, DNS servers, the in-sandbox forwarder) and in logs.
 * Nothing here resolves a name: an address that is not numeric is refused.
 */
#ifndef PINHOLE_SOCKADDR_H
#define PINHOLE_SOCKADDR_H

#include <stddef.h>
#include <sys/socket.h>

#include "pinhole/diag.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A parsed address; caller-owned, usually on the stack. */
typedef struct ph_sockaddr {
    struct sockaddr_storage ss; /* sockaddr_in or sockaddr_in6, port set */
    socklen_t len;              /* 0 until parsed */
} ph_sockaddr;

/* For default_port: the text must carry its port. */
#define PH_SOCKADDR_PORT_REQUIRED (-1)
/* Room for ph_sockaddr_text: "[" INET6_ADDRSTRLEN "]:65535". */
#define PH_SOCKADDR_TEXT_MAX 64

/*
 * Parses text[0..len) (need not be NUL-terminated): a dotted-quad IPv4
 * address or a bracketed IPv6 address ("[::1]"), each as inet_pton(3)
 * reads it (no zone id, no short IPv4 forms), then ":PORT" (decimal
 * 0..65535: digits only, no sign, space or leading zero), which may be
 * left out when default_port (0..65535) is given instead of
 * PH_SOCKADDR_PORT_REQUIRED. Port 0 is the caller's to refuse.
 * On PH_OK *out holds the address; otherwise PH_E_INVAL, *out zeroed, and
 * diag (may be NULL) says what is wrong, with the offset of the bad part:
 * "expected ADDR:PORT", "bad port", "bad IPv6 address", "expected a
 * numeric IPv4 or [IPv6] address".
 */
PH_API ph_status ph_sockaddr_parse(const char *text, size_t len, int default_port,
                                   ph_sockaddr *out, ph_diag *diag);

/* The address of sa without its port ("1.2.3.4", "2001:db8::1"); "unix"
 * for AF_UNIX and "?" for any other family. Writes at most cap bytes with
 * a NUL (cap > 0); the caller owns both. */
PH_API void ph_sockaddr_addr_text(const struct sockaddr *sa, char *buf, size_t cap);

/* sa with its port as ph_sockaddr_parse reads it ("1.2.3.4:80",
 * "[2001:db8::1]:80"); "unix" and "?" as ph_sockaddr_addr_text. */
PH_API void ph_sockaddr_text(const struct sockaddr *sa, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_SOCKADDR_H */
