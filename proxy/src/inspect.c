/* inspect.c - a CONNECT tunnel's inspection (inspect.h).
 *
 * Domain fronting is the threat: a tunnel decided for allowed.example:443
 * whose ClientHello names another host served from the same address (a
 * CDN routes on the inner name). The name is read from the first bytes,
 * nothing is decrypted; the bytes are relayed only once the name is the
 * CONNECT host. A hello offering Encrypted Client Hello is refused even
 * when its outer name is the CONNECT host: a server that decrypts it routes
 * on the inner name, which is fronting the proxy cannot see (and a GREASE
 * ECH extension cannot be told from a real one).
 *
 * A TLS 1.3 server may answer the hello with a HelloRetryRequest, and the
 * client's second hello may then name another server, which the server
 * reads as it read the first. So the first hello goes alone; the client's
 * next bytes wait until the server's first bytes showed what they are (a
 * ServerHello: they go; a HelloRetryRequest or anything else: they are
 * the second hello, inspected as the first). The server's answer is read
 * as it comes, a byte at a time, keeping a few bytes of state
 * (px_inspect_kept), never a copy.
 */
#include "inspect.h"

#include <string.h>

#include "pinhole/ascii.h"

#define ALERT_FATAL 2
#define ALERT_ACCESS_DENIED 49
#define RECORD_ALERT 21

void px_inspect_init(px_inspect *in)
{
    memset(in, 0, sizeof *in);
}

static px_inspect_verdict refuse(px_inspect *in, ph_reason reason, const char *detail, bool tls)
{
    static const uint8_t alert[7] = { RECORD_ALERT, 3, 3, 0, 2, ALERT_FATAL, ALERT_ACCESS_DENIED };
    in->reason = reason;
    in->detail = detail;
    in->alert = tls ? alert : NULL;
    in->alert_len = tls ? sizeof alert : 0;
    return PX_INSPECT_REFUSE;
}

/* The longest method an HTTP/1 request line may start with here (the
 * registered ones are at most 17 bytes; a token longer than this is not
 * taken for HTTP). */
#define METHOD_MAX 32

/* held[0..len) starts an HTTP/1 request line: 1 = a method (uppercase
 * letters, '-' and '_', as every registered method is) and a space, 0 = not
 * one, -1 = a method so far (more bytes needed). Narrower than RFC 9110's
 * token on purpose: an SSH banner ("SSH-2.0-OpenSSH_9.2p1 Debian") is not
 * taken for a request. The forwarding engine then parses the request
 * strictly; this only tells the protocols apart. */
static int http_start(const uint8_t *held, size_t len)
{
    if (!(held[0] >= 'A' && held[0] <= 'Z'))
        return 0;
    for (size_t i = 1; i < len && i <= METHOD_MAX; i++) {
        uint8_t b = held[i];
        if (b == ' ')
            return 1;
        if (!((b >= 'A' && b <= 'Z') || b == '-' || b == '_'))
            return 0;
    }
    return len > METHOD_MAX ? 0 : -1;
}

/* A ClientHello for host in held[0..len) (a handshake record first). */
static px_inspect_verdict hello_step(px_inspect *in, const uint8_t *held, size_t len,
                                     const char *host, bool last)
{
    /* The parser is asked again only once what it needs arrived: a hello
     * trickled a byte at a time is parsed once per record. */
    if (len < in->kept.need && !last)
        return PX_INSPECT_WAIT;
    switch (ph_tls_hello_parse(held, len, &in->hello)) {
    case PH_TLS_INCOMPLETE:
        in->kept.need = (uint32_t)in->hello.need;
        return last ? refuse(in, PH_REASON_TLS_MALFORMED,
                             "the ClientHello did not end within the inspection's limits", true)
                    : PX_INSPECT_WAIT;
    case PH_TLS_REFUSED:
        return refuse(in, PH_REASON_TLS_MALFORMED, in->hello.message, true);
    case PH_TLS_DONE:
        break;
    }
    if (!in->hello.has_sni)
        return refuse(in, PH_REASON_SNI_MISSING, "the ClientHello names no server", true);
    in->has_sni = true;
    if (!ph_ascii_equal_nocase(in->hello.sni, in->hello.sni_len, host))
        return refuse(in, PH_REASON_SNI_MISMATCH,
                      "the ClientHello names another server than the CONNECT host", true);
    if (in->hello.has_ech)
        return refuse(in, PH_REASON_SNI_ENCRYPTED,
                      "the ClientHello offers Encrypted Client Hello: the server may route on "
                      "a name the proxy cannot read",
                      true);
    return PX_INSPECT_PASS;
}

#define RECORD_CCS 20

/* The client's flight after the server asked for another hello: the dummy
 * change_cipher_spec record a TLS 1.3 client may send first (RFC 8446
 * appendix D.4: exactly {20, 3, 3, 0, 1, 1}), then a ClientHello read as
 * the first was. */
static px_inspect_verdict second_hello(px_inspect *in, const uint8_t *held, size_t len,
                                       const char *host, bool last)
{
    static const uint8_t ccs[6] = { RECORD_CCS, 3, 3, 0, 1, 1 };
    size_t skip = len > 0 && held[0] == RECORD_CCS ? sizeof ccs : 0;
    if (len <= skip)
        return last ? refuse(in, PH_REASON_TLS_MALFORMED,
                             "no second ClientHello after the server's HelloRetryRequest", true)
                    : PX_INSPECT_WAIT;
    if ((skip > 0 && memcmp(held, ccs, sizeof ccs) != 0) || held[skip] != PH_TLS_RECORD_HANDSHAKE)
        return refuse(in, PH_REASON_TLS_MALFORMED,
                      "the flight after the server's HelloRetryRequest is not a ClientHello",
                      true);
    return hello_step(in, held + skip, len - skip, host, last);
}

px_inspect_verdict px_inspect_step(px_inspect *in, const uint8_t *held, size_t len,
                                   const char *host, ph_protocol proto, bool last)
{
    /* A reload made the rule tcp while these bytes were held: they go on
     * uninspected, as in a tunnel opened under that rule. */
    if (proto == PH_PROTOCOL_TCP || in->kept.stage == PX_INSPECT_RELEASED)
        return PX_INSPECT_PASS;
    if (in->kept.stage != PX_INSPECT_FIRST_HELLO) {
        /* The first hello went: a TLS tunnel. */
        if (proto == PH_PROTOCOL_HTTP)
            return refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                          "a TLS handshake, and the rule says protocol http", true);
        if (in->kept.stage == PX_INSPECT_SECOND_HELLO)
            return second_hello(in, held, len, host, last);
        return last ? refuse(in, PH_REASON_TLS_MALFORMED,
                             "the server did not answer the ClientHello within the "
                             "inspection's limits",
                             true)
                    : PX_INSPECT_WAIT;
    }
    if (len == 0)
        return last ? refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                             "the client sent nothing to inspect", false)
                    : PX_INSPECT_WAIT;
    if (held[0] != PH_TLS_RECORD_HANDSHAKE) {
        int h = http_start(held, len);
        if (h < 0 && !last)
            return PX_INSPECT_WAIT;
        if (h > 0 && (proto == PH_PROTOCOL_DEFAULT || proto == PH_PROTOCOL_HTTP))
            return PX_INSPECT_HTTP;
        return refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                      h > 0 ? "HTTP in clear, and the rule says protocol tls"
                      : proto == PH_PROTOCOL_HTTP
                          ? "the tunnel's first bytes are not an HTTP/1 request (protocol http)"
                          : "the tunnel's first bytes are neither a TLS handshake nor an HTTP/1 "
                            "request",
                      false);
    }
    if (proto == PH_PROTOCOL_HTTP)
        return refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                      "a TLS handshake, and the rule says protocol http", true);
    px_inspect_verdict v = hello_step(in, held, len, host, last);
    if (v != PX_INSPECT_PASS)
        return v;
    in->kept.stage = PX_INSPECT_AWAIT_SERVER;
    in->kept.need = 0;
    return PX_INSPECT_PASS_HELLO;
}

/* HelloRetryRequest's ServerHello.random (RFC 8446 section 4.1.3). */
static const uint8_t HRR_RANDOM[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

/* The server's record, byte by byte: the record header (type, version,
 * length), then for a handshake record the handshake header (type,
 * length), legacy_version and the random. */
#define SRV_LENGTH_HI 3
#define SRV_LENGTH_LO 4
#define SRV_TYPE 5          /* an alert's level, a handshake's type */
#define SRV_ALERT_END 6     /* an alert's description */
#define SRV_RANDOM 11
#define SRV_RANDOM_END (SRV_RANDOM + 32)
#define HANDSHAKE_SERVER_HELLO 2
#define ALERT_WARNING 1

/* srv_flags */
#define SRV_ALERT 1u      /* the record is an alert */
#define SRV_SHORT 2u      /* its length's high byte is 0 */
#define SRV_NOT_HRR 4u    /* its random is not HelloRetryRequest's */

/* The server's byte b at srv_at of its record: the stage it shows
 * (AWAIT_SERVER: not yet). A warning alert (unrecognized_name, which some
 * servers send before their ServerHello) is passed over; a handshake record
 * too short to hold a ServerHello's random, or a fatal alert, shows
 * nothing: SECOND_HELLO, the client's next flight inspected. */
static px_inspect_stage server_byte(px_inspect_kept *k, uint8_t b)
{
    size_t at = k->srv_at++;
    bool alert = (k->srv_flags & SRV_ALERT) != 0;
    switch (at) {
    case 0:
        if (b != RECORD_ALERT && b != PH_TLS_RECORD_HANDSHAKE)
            return PX_INSPECT_SECOND_HELLO;
        k->srv_flags = b == RECORD_ALERT ? SRV_ALERT : 0;
        break;
    case SRV_LENGTH_HI:
        if (alert && b != 0)
            return PX_INSPECT_SECOND_HELLO;
        k->srv_flags |= b == 0 ? SRV_SHORT : 0;
        break;
    case SRV_LENGTH_LO:
        if (alert ? b != 2 : ((k->srv_flags & SRV_SHORT) && b < SRV_RANDOM_END - 5))
            return PX_INSPECT_SECOND_HELLO;
        break;
    case SRV_TYPE:
        if (b != (alert ? ALERT_WARNING : HANDSHAKE_SERVER_HELLO))
            return PX_INSPECT_SECOND_HELLO;
        break;
    default:
        if (alert && at == SRV_ALERT_END) {
            k->srv_at = 0; /* the next record */
            break;
        }
        if (at >= SRV_RANDOM && b != HRR_RANDOM[at - SRV_RANDOM])
            k->srv_flags |= SRV_NOT_HRR;
        if (at + 1 == SRV_RANDOM_END)
            return k->srv_flags & SRV_NOT_HRR ? PX_INSPECT_RELEASED : PX_INSPECT_SECOND_HELLO;
        break;
    }
    return PX_INSPECT_AWAIT_SERVER;
}

void px_inspect_server(px_inspect_kept *k, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && k->stage == PX_INSPECT_AWAIT_SERVER; i++)
        k->stage = (uint8_t)server_byte(k, p[i]);
}
