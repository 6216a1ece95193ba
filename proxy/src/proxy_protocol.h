/*
 * proxy_protocol.h - the PROXY protocol header a TCP load balancer puts in
 * front of a connection's bytes to name the client it accepted (HAProxy's
 * proxy-protocol.txt, version 2: the binary form), read by pinhole-proxy
 * on a listener with --proxy-protocol (accept_proxied.c).
 *
 * Pure (no allocation, no I/O, no globals), like http1.h, so it is fuzzed
 * (fuzz/proxy_protocol.c) and unit-tested alone
 * (tests/proxy/test_proxy_protocol.c). The header may arrive in any number
 * of pieces: call again with the longer buffer after INCOMPLETE; the answer
 * depends on the bytes, never on how they were split, and bytes after the
 * header are never looked at.
 *
 * The header: the 12-byte signature, the version/command byte (version 2;
 * command LOCAL or PROXY), the family/transport byte, a 16-bit length of
 * what follows, then the addresses of that family and TLVs. Strict: every
 * length is checked against the one enclosing it. Refused (reason
 * proxy_protocol_malformed, with a message and a byte offset):
 *   - a version other than 2, a command other than LOCAL (0) or PROXY (1);
 *   - for PROXY: a family other than UNSPEC, INET or INET6 (AF_UNIX clients
 *     have no address to count), a transport other than STREAM for INET
 *     and INET6 (UNSPEC only with UNSPEC), a length shorter than the
 *     family's addresses (12, 36 bytes);
 *   - TLVs (type, 16-bit length, value) that do not fill the rest of the
 *     header exactly (a TLV running past it, a lone byte or two);
 *   - a header over PH_PP_HEADER_MAX bytes;
 *   - the text form of version 1 ("PROXY TCP4 ..."): one binary form with
 *     explicit lengths is read, never a second, textual parser beside it
 *     (HAProxy, AWS NLB, Envoy send v2; nginx's stream module and Google
 *     Cloud's proxy load balancers send only v1: docs/pinhole-proxy.md).
 * Bytes that are not a PROXY header at all (their start differs from the
 * signature) are refused with reason proxy_protocol_missing.
 *
 * TLVs are skipped (none changes what the proxy does with the connection);
 * their values are not read. A LOCAL header (a balancer's own health check)
 * or a PROXY header of family UNSPEC names no client: DONE with has_client
 * false, and the connection's own source stands for the client.
 */
#ifndef PINHOLE_PROXY_PROTOCOL_H
#define PINHOLE_PROXY_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PH_PP_SIG_LEN 12       /* the v2 signature */
#define PH_PP_FIXED_LEN 16     /* signature, version/command, family, length */
#define PH_PP_HEADER_MAX 2048  /* a whole header; real ones are well under 600 bytes */

typedef enum ph_pp_result {
    PH_PP_INCOMPLETE = 0, /* no error so far; more bytes are needed */
    PH_PP_DONE = 1,       /* a complete header */
    PH_PP_REFUSED = 2,    /* see reason, message, error_offset */
} ph_pp_result;

typedef struct ph_pp_header {
    size_t len;          /* DONE: bytes of the header (the connection's own
                          * bytes start there) */
    bool local;          /* DONE: the LOCAL command */
    bool has_client;     /* DONE: client holds the client's address and port
                          * (PROXY over INET or INET6) */
    struct sockaddr_storage client; /* DONE, has_client: sockaddr_in or sockaddr_in6 */
    socklen_t client_len;
    size_t need;         /* INCOMPLETE: nothing can change before the input
                          * is this long */
    /* REFUSED: proxy_protocol_missing or proxy_protocol_malformed */
    ph_reason reason;
    const char *message; /* static, one line */
    size_t error_offset; /* into the input */
} ph_pp_header;

/* Reads the header from buf[0..len), the first bytes of a connection.
 * *out is always overwritten. */
ph_pp_result ph_pp_parse(const uint8_t *buf, size_t len, ph_pp_header *out);

/* True when buf[0..len) starts with a whole PROXY header signature, of
 * version 2 or 1 ("PROXY "): what a source not allowed to send a header is
 * refused for. A shorter prefix is not enough (a trickled "P" may be a POST). */
bool ph_pp_signature(const uint8_t *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_PROXY_PROTOCOL_H */
