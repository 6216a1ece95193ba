/*
 * pinhole/host.h - the one definition of a canonical destination host name.
 *
 * Allowlists (policyc), URLs and CONNECT authorities (guard, proxy) all name
 * hosts with these rules, so a name that passes here means the same thing
 * everywhere:
 *   - ASCII only, lowercase, LDH labels (a-z 0-9 '-', no '-' at either end),
 *     each label 1..63 bytes, the whole name at most 253 bytes;
 *   - no trailing dot, no empty label, at least two labels;
 *   - never an IP address in any spelling: anything inet_pton accepts,
 *     anything containing ':' or '[' or ']', and any name whose last label is
 *     all decimal digits or 0x-hex (what WHATWG URL parsers and glibc read as
 *     an IPv4 number: "127.1", "2130706433", "0x7f.1", "a.0x10").
 *
 * Character classes are locale-independent; nothing here calls tolower().
 */
#ifndef PINHOLE_HOST_H
#define PINHOLE_HOST_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/ascii.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PH_HOST_MAX 253
#define PH_LABEL_MAX 63

typedef enum ph_host_error {
    PH_HOST_OK = 0,
    PH_HOST_EMPTY = 1,
    PH_HOST_TOO_LONG = 2,
    PH_HOST_EMPTY_LABEL = 3,
    PH_HOST_TRAILING_DOT = 4,
    PH_HOST_LABEL_TOO_LONG = 5,
    PH_HOST_UPPERCASE = 6,
    PH_HOST_NON_ASCII = 7,
    PH_HOST_BAD_CHAR = 8,
    PH_HOST_HYPHEN_EDGE = 9,
    PH_HOST_SINGLE_LABEL = 10,
    PH_HOST_IP_LITERAL = 11,
} ph_host_error;

/*
 * Checks that host[0..len) is a canonical host name (rules above). IP-literal
 * detection runs first, so "127.0.0.1." and "[::1]" report PH_HOST_IP_LITERAL
 * rather than a syntax error. On failure *where (if not NULL) receives the
 * byte offset of the first offending byte. host need not be NUL-terminated.
 */
PH_API ph_host_error ph_host_check(const char *host, size_t len, size_t *where);

/* True when host[0..len) is an IP address in any spelling (rules above). */
PH_API bool ph_host_is_ip_literal(const char *host, size_t len);

/* A static one-line description of e, e.g. "uppercase letter in host name". */
PH_API const char *ph_host_error_string(ph_host_error e);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_HOST_H */
