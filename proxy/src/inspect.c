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
    in->reason = reason;
    in->detail = detail;
    in->alert_len = 0;
    if (tls) {
        const uint8_t alert[7] = { RECORD_ALERT, 3, 3, 0, 2, ALERT_FATAL, ALERT_ACCESS_DENIED };
        memcpy(in->alert, alert, sizeof alert);
        in->alert_len = sizeof alert;
    }
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

/* A ClientHello in held[0..len) (a handshake record first) for host. */
static px_inspect_verdict hello_step(px_inspect *in, const uint8_t *held, size_t len,
                                     const char *host, bool last)
{
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

/* The dummy change_cipher_spec record a TLS 1.3 client may send before its
 * second ClientHello (RFC 8446 appendix D.4). */
static bool ccs_record(const uint8_t *p)
{
    return p[0] == 20 && p[1] == 3 && p[3] == 0 && p[4] == 1 && p[5] == 1;
}

/* The client's second flight after a HelloRetryRequest: the dummy
 * change_cipher_spec record, if sent, then a ClientHello read as the
 * first was. */
static px_inspect_verdict second_hello(px_inspect *in, const uint8_t *held, size_t len,
                                       const char *host, bool last)
{
    size_t skip = len > 0 && held[0] == 20 ? 6 : 0;
    if (len < skip + 1)
        return last ? refuse(in, PH_REASON_TLS_MALFORMED,
                             "no second ClientHello after the server's HelloRetryRequest", true)
                    : PX_INSPECT_WAIT;
    if ((skip > 0 && !ccs_record(held)) || held[skip] != PH_TLS_RECORD_HANDSHAKE)
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
    if (proto == PH_PROTOCOL_TCP || in->stage == PX_INSPECT_RELEASED)
        return PX_INSPECT_PASS;
    if (in->stage != PX_INSPECT_FIRST_HELLO && proto == PH_PROTOCOL_HTTP)
        return refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                      "a TLS handshake, and the rule says protocol http", true);
    if (in->stage == PX_INSPECT_AWAIT_SERVER)
        return last ? refuse(in, PH_REASON_TLS_MALFORMED,
                             "the server did not answer the ClientHello within the "
                             "inspection's limits",
                             true)
                    : PX_INSPECT_WAIT;
    if (in->stage == PX_INSPECT_SECOND_HELLO)
        return second_hello(in, held, len, host, last);
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
    /* The hello goes; what follows waits for the server's answer. */
    in->stage = PX_INSPECT_AWAIT_SERVER;
    in->need = 0;
    return PX_INSPECT_PASS_HELLO;
}

/* HelloRetryRequest's ServerHello.random (RFC 8446 section 4.1.3). */
static const uint8_t HRR_RANDOM[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
};

/* What the server's bytes so far say: AWAIT_SERVER while they do not show
 * it yet. A warning alert before the ServerHello (unrecognized_name, which
 * some servers send) is dropped from them. */
static px_inspect_stage server_answer(px_inspect *in)
{
    for (;;) {
        const uint8_t *s = in->server;
        size_t n = in->server_len;
        if (n >= 1 && s[0] == 21) {
            if (n < 7)
                return PX_INSPECT_AWAIT_SERVER;
            if (s[3] != 0 || s[4] != 2 || s[5] != 1)
                return PX_INSPECT_SECOND_HELLO; /* a fatal alert, or not one */
            memmove(in->server, in->server + 7, n - 7);
            in->server_len = n - 7;
            continue;
        }
        if (n < 6)
            return PX_INSPECT_AWAIT_SERVER;
        /* A record header, a handshake header, legacy_version, random. */
        size_t rec = (size_t)s[3] << 8 | s[4];
        if (s[0] != PH_TLS_RECORD_HANDSHAKE || s[5] != 2 || rec < sizeof in->server - 5)
            return PX_INSPECT_SECOND_HELLO; /* no ServerHello whose random shows */
        if (n < sizeof in->server)
            return PX_INSPECT_AWAIT_SERVER;
        return memcmp(s + 11, HRR_RANDOM, sizeof HRR_RANDOM) == 0 ? PX_INSPECT_SECOND_HELLO
                                                                  : PX_INSPECT_RELEASED;
    }
}

void px_inspect_server(px_inspect *in, const uint8_t *p, size_t n)
{
    while (in->stage == PX_INSPECT_AWAIT_SERVER && n > 0) {
        size_t k = sizeof in->server - in->server_len;
        if (k > n)
            k = n;
        memcpy(in->server + in->server_len, p, k);
        in->server_len += k;
        p += k;
        n -= k;
        in->stage = server_answer(in);
    }
}
