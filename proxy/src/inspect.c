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

px_inspect_verdict px_inspect_step(px_inspect *in, const uint8_t *held, size_t len,
                                   const char *host, ph_protocol proto, bool last)
{
    /* A reload made the rule tcp while these bytes were held: they go on
     * uninspected, as in a tunnel opened under that rule. */
    if (proto == PH_PROTOCOL_TCP)
        return PX_INSPECT_PASS;
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
    /* The parser is asked again only once what it needs arrived: a hello
     * trickled a byte at a time is parsed once per record. */
    if (len < in->need && !last)
        return PX_INSPECT_WAIT;
    switch (ph_tls_hello_parse(held, len, &in->hello)) {
    case PH_TLS_INCOMPLETE:
        in->need = in->hello.need;
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
