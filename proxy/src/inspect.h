/* inspect.h - a CONNECT tunnel's inspection: what the client's first bytes
 * may be, and its second ClientHello when the server asks for one
 * (docs/pinhole-proxy.md, TUNNEL INSPECTION). Pure (no I/O, no
 * allocation): tunnel.c feeds it the bytes its relay holds (relay.h,
 * px_relay_hold) and those the server answers the first hello with, and
 * relays them, or ends the tunnel, on its word. */
#ifndef PX_INSPECT_H
#define PX_INSPECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"
#include "pinhole/table.h"
#include "tls_hello.h"

typedef enum px_inspect_verdict {
    PX_INSPECT_WAIT = 0,   /* more bytes are needed */
    PX_INSPECT_PASS = 1,   /* a ClientHello for the CONNECT host */
    PX_INSPECT_REFUSE = 2, /* reason, detail; alert_len > 0: send alert */
    PX_INSPECT_HTTP = 3,   /* an HTTP/1 request line: the forwarding engine serves the
                            * tunnel, checking every request's Host (forward.h) */
    PX_INSPECT_PASS_HELLO = 4, /* the first ClientHello passed: its hello.end bytes go,
                                * what follows waits for the server's answer
                                * (px_inspect_server) */
} px_inspect_verdict;

/* Where a TLS tunnel's inspection is. A client may send a second
 * ClientHello after a HelloRetryRequest (RFC 8446 section 4.1.4) naming
 * any server, and a server reads that name as it read the first (OpenSSL's
 * servername callback runs again): so the client's bytes after its first
 * hello wait for the server's answer. */
typedef enum px_inspect_stage {
    PX_INSPECT_FIRST_HELLO = 0,
    PX_INSPECT_AWAIT_SERVER = 1, /* the first hello went; the client's next bytes wait */
    PX_INSPECT_SECOND_HELLO = 2, /* the server asked for another hello (or its answer does
                                  * not show it did not): inspected as the first */
    PX_INSPECT_RELEASED = 3,     /* the server answered with a ServerHello: PASS */
} px_inspect_stage;

/* What an inspection keeps between asks (tunnel.c keeps it in the
 * connection: no allocation per tunnel); the rest of px_inspect is one
 * ask's. */
typedef struct px_inspect_kept {
    uint32_t need;          /* the parser's next useful length (a hello is at most
                             * PH_TLS_RECORDS_MAX records) */
    uint8_t stage;          /* px_inspect_stage */
    uint8_t srv_at;         /* AWAIT_SERVER: bytes seen of the server's current
                             * record, up to a ServerHello's random */
    uint8_t srv_flags;      /* AWAIT_SERVER: what those bytes showed (inspect.c) */
} px_inspect_kept;

typedef struct px_inspect {
    px_inspect_kept kept;
    ph_tls_hello hello;     /* the last parse (its sni once DONE) */
    bool has_sni;           /* a ClientHello named a server: hello.sni */
    ph_reason reason;       /* REFUSE */
    const char *detail;     /* REFUSE: static, one line */
    const uint8_t *alert;   /* REFUSE: a fatal TLS alert record, when TLS (static) */
    size_t alert_len;
} px_inspect;

/* Starts an inspection (zeroes *in). */
void px_inspect_init(px_inspect *in);

/*
 * The client's bytes so far, held[0..len); host: the CONNECT host the
 * decision was for (lowercase, an A-label, no trailing dot); proto: its
 * rule's protocol (PH_PROTOCOL_TCP only when a reload made the rule tcp
 * while the bytes were held: PASS, the bytes go on uninspected).
 * last: no more bytes will come (the client's EOF, the hold's cap or
 * deadline): WAIT is then a refusal (returned as REFUSE).
 *   TLS (a handshake record; default or tls): a ClientHello (tls_hello.h)
 *     whose server name equals host ASCII case-insensitively and that
 *     offers no Encrypted Client Hello, else tls_malformed, sni_missing,
 *     sni_mismatch or sni_encrypted with an access_denied alert. It is
 *     PASS_HELLO: its hello.end bytes go, and what follows them waits for
 *     the server's answer (px_inspect_server): WAIT until it came (a last
 *     step then is tls_malformed), PASS once it showed a ServerHello, and
 *     after anything else the client's next bytes must be a second
 *     ClientHello (after the dummy change_cipher_spec record a TLS 1.3
 *     client may send) that passes as the first would (then PASS), else
 *     the same refusals.
 *   HTTP/1 (a method token and a space; default or http): HTTP, decided
 *     on the first byte and the method, before the request is complete.
 *   Anything else, or the one the rule does not allow: protocol_not_allowed.
 */
px_inspect_verdict px_inspect_step(px_inspect *in, const uint8_t *held, size_t len,
                                   const char *host, ph_protocol proto, bool last);

/*
 * After PASS_HELLO: p[0..n) are the server's next bytes (in order, from
 * its first, in any pieces). Once they show a ServerHello that is not a
 * HelloRetryRequest (after warning alerts, which some servers send first),
 * the stage is RELEASED; once they show a HelloRetryRequest, or anything
 * else, SECOND_HELLO. Bytes after that are not looked at.
 */
void px_inspect_server(px_inspect_kept *k, const uint8_t *p, size_t n);

#endif
