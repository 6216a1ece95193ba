/*
 * tls_hello.h - the TLS ClientHello reader of a CONNECT tunnel's inspection
 * (RFC 8446 section 4.1.2, RFC 6066 section 3): the server name a client
 * asks for, read from the first bytes it sends into a tunnel, without
 * decrypting anything.
 *
 * Pure (no allocation, no I/O, no globals), like http1.h, so it is fuzzed
 * (fuzz/tls_hello.c) and unit-tested alone (tests/proxy/test_tls_hello.c,
 * over ClientHellos captured from real clients). The hello may come in any
 * number of handshake records and TCP segments: call again with the longer
 * buffer after INCOMPLETE; the answer depends on the bytes, never on how
 * they were split.
 *
 * Strict, since the proxy and the upstream must not read one hello two
 * ways (a name the proxy checks and another the upstream routes on): every
 * length is checked against the length that encloses it, and each of these
 * is refused (reason tls_malformed, with a message and a byte offset):
 *   - a record that is not a handshake record (type 22), whose version is
 *     not 3.x, whose length is 0 or over 2^14 (RFC 8446 5.1), or another
 *     record before the hello is complete;
 *   - a hello over PH_TLS_RECORDS_MAX records;
 *   - a first handshake message that is not a client_hello, or one over
 *     PH_TLS_HELLO_MAX bytes; bytes of another message in the record that
 *     ends the hello (a client sends nothing more before the server's
 *     answer);
 *   - a legacy_version that is not 3.x, a session id over 32 bytes, an
 *     empty or odd cipher suite list, no compression method;
 *   - extensions that do not fill their block exactly, any extension type
 *     present twice;
 *   - a server_name extension whose list does not fill it exactly, holds
 *     more than one name, a name type other than host_name (0), a name that
 *     is empty, over 253 bytes, ends in a dot, has an empty label or a
 *     label over 63 bytes, or a byte other than ASCII letter, digit, '-' or
 *     '_' (RFC 6066: an ASCII DNS name, no trailing dot; an IDN is sent as
 *     its A-label).
 * A hello without a server_name extension is DONE with has_sni false (the
 * caller decides what a missing name means). With an encrypted_client_hello
 * extension (0xfe0d, or a draft's 0xfe08 to 0xfe0c, or ESNI's 0xffce) the
 * name returned is the outer hello's, the one the network sees, and has_ech
 * says the server may route on another, encrypted one.
 */
#ifndef PINHOLE_TLS_HELLO_H
#define PINHOLE_TLS_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PH_TLS_RECORD_MAX 16384   /* a TLSPlaintext fragment (RFC 8446 5.1) */
#define PH_TLS_HELLO_MAX 65535    /* a ClientHello's body, the handshake header excluded */
#define PH_TLS_NAME_MAX 253       /* a DNS name in text form, no trailing dot */
#define PH_TLS_RECORDS_MAX 32     /* records one hello may span (real ones: 1 or 2) */
#define PH_TLS_RECORD_HANDSHAKE 22

typedef enum ph_tls_result {
    PH_TLS_INCOMPLETE = 0, /* no error so far; more bytes are needed */
    PH_TLS_DONE = 1,       /* the ClientHello is complete */
    PH_TLS_REFUSED = 2,    /* malformed: see message, error_offset */
} ph_tls_result;

typedef struct ph_tls_hello {
    size_t end;          /* DONE: input bytes up to the end of the record
                          * that completed the hello */
    bool has_sni;        /* DONE: a server_name extension was present */
    bool has_ech;        /* DONE: an encrypted_client_hello (or ESNI) extension was */
    size_t sni_len;      /* DONE, has_sni: bytes of sni */
    char sni[PH_TLS_NAME_MAX + 1]; /* DONE, has_sni: the name as sent, NUL-terminated
                                    * (it may span records, so it is copied) */
    size_t need;         /* INCOMPLETE: nothing can change before the input
                          * is this long (the end of the record being read) */
    /* REFUSED (reason is always tls_malformed) */
    ph_reason reason;
    const char *message; /* static, one line */
    size_t error_offset; /* into the input */
} ph_tls_hello;

/*
 * Reads the ClientHello from buf[0..len), the bytes the client sent so far
 * (in[0] is the first byte of the tunnel). *out is always overwritten.
 * Bytes after the record that completed the hello are not looked at.
 */
ph_tls_result ph_tls_hello_parse(const uint8_t *buf, size_t len, ph_tls_hello *out);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_TLS_HELLO_H */
