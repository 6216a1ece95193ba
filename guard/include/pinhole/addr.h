/*
 * pinhole/addr.h - the fixed address denylist (DESIGN section 4).
 *
 * Every address a destination name resolves to is checked here before it is
 * dialed. The list is compiled in and not configurable: every block of the
 * IANA IPv4 and IPv6 Special-Purpose Address Registries (whatever their
 * "globally reachable" flag), multicast, reserved space (240.0.0.0/4, all of
 * IPv6 outside 2000::/3), every IPv4-embedding IPv6 prefix in full (mapped,
 * compatible, SIIT, NAT64 well-known and local-use, 6to4, Teredo) and cloud
 * metadata endpoints. docs/denylist.md lists every block; it is checked
 * against this table by a test.
 *
 * A denial names the most specific block that contains the address (e.g.
 * 169.254.169.254 names the metadata endpoint, not link-local).
 *
 * Builds with PINHOLE_TEST_LOOPBACK_UPSTREAM exempt exactly 127.0.0.0/8 and
 * ::1/128 (so end-to-end tests can reach a local upstream) and nothing else;
 * ph_build_is_test_loopback() says so, and binaries must print it.
 *
 * All functions are thread-safe and allocation-free.
 */
#ifndef PINHOLE_ADDR_H
#define PINHOLE_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One denylist block. All strings are static and NUL-terminated. */
typedef struct ph_addr_block {
    const char *name;    /* e.g. "Loopback", "Private-Use", "IPv4-mapped Address" */
    const char *rfc;     /* the defining document, e.g. "RFC 1122"; vendor
                            documentation for metadata endpoints without one */
    const char *prefix;  /* canonical text, e.g. "127.0.0.0/8", "::ffff:0:0/96" */
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];    /* network address (first 4 bytes for AF_INET) */
    uint8_t prefix_len;  /* 0..32 or 0..128 */
} ph_addr_block;

/* The verdict on one address. */
typedef struct ph_addr_verdict {
    ph_reason reason;            /* PH_REASON_ALLOWED or PH_REASON_DENIED_ADDRESS */
    const ph_addr_block *block;  /* most specific block hit (static); NULL when
                                    allowed, except under loopback_exempt */
    bool loopback_exempt;        /* allowed only because this is a
                                    PINHOLE_TEST_LOOPBACK_UPSTREAM build; block
                                    then names the exempted block */
} ph_addr_verdict;

/* A parsed address (ph_addr_parse_and_classify). */
typedef struct ph_addr {
    int family;          /* AF_INET or AF_INET6 */
    uint8_t bytes[16];   /* network order; first 4 bytes for AF_INET */
} ph_addr;

/*
 * Classifies the address of sa (AF_INET or AF_INET6; the port is ignored).
 * Returns PH_OK when allowed, PH_E_DENIED when denied (out->block names the
 * block), PH_E_INVAL for NULL arguments, another family or len too short;
 * then out (if not NULL) is denied with block NULL: fail closed.
 */
PH_API ph_status ph_addr_classify(const struct sockaddr *sa, socklen_t len,
                                  ph_addr_verdict *out);

/* The same on raw network-order bytes. out must not be NULL. */
PH_API ph_status ph_addr_classify_v4(const uint8_t addr[static 4], ph_addr_verdict *out);
PH_API ph_status ph_addr_classify_v6(const uint8_t addr[static 16], ph_addr_verdict *out);

/*
 * Parses text (NUL-terminated; the strict forms inet_pton accepts: dotted-quad
 * IPv4 or IPv6, optionally in brackets, no zone id) and classifies it. For
 * the CLI (`pinhole-guard addr`). addr (may be NULL) receives the address.
 * Returns PH_OK / PH_E_DENIED as ph_addr_classify, or PH_E_INVAL with diag
 * filled when text is not an address (out is then denied, block NULL).
 */
PH_API ph_status ph_addr_parse_and_classify(const char *text, ph_addr *addr,
                                            ph_addr_verdict *out, ph_diag *diag);

/* The denylist itself, for docs and the CLI: ph_addr_block_at(i) for
 * i < ph_addr_block_count() (NULL past the end). Order: IPv4 then IPv6, each
 * by address then prefix length. */
PH_API size_t ph_addr_block_count(void);
PH_API const ph_addr_block *ph_addr_block_at(size_t i);

/* True in PINHOLE_TEST_LOOPBACK_UPSTREAM builds (see above). */
PH_API bool ph_build_is_test_loopback(void);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_ADDR_H */
