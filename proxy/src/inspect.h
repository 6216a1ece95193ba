/* inspect.h - a CONNECT tunnel's inspection: what the client's first bytes
 * may be (docs/pinhole-proxy.md, TUNNEL INSPECTION). Pure (no I/O, no
 * allocation): tunnel.c feeds it the bytes its relay holds (relay.h,
 * px_relay_hold) and relays them, or ends the tunnel, on its word. */
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
} px_inspect_verdict;

/* One ask's state; between asks only need is kept (tunnel.c keeps it in
 * the connection: no allocation per tunnel). */
typedef struct px_inspect {
    size_t need;            /* the parser's next useful length */
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
 *     sni_mismatch or sni_encrypted with an access_denied alert.
 *   HTTP/1 (a method token and a space; default or http): HTTP, decided
 *     on the first byte and the method, before the request is complete.
 *   Anything else, or the one the rule does not allow: protocol_not_allowed.
 */
px_inspect_verdict px_inspect_step(px_inspect *in, const uint8_t *held, size_t len,
                                   const char *host, ph_protocol proto, bool last);

#endif
