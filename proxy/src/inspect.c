/* inspect.c - a CONNECT tunnel's inspection (inspect.h).
 *
 * Domain fronting is the threat: a tunnel decided for allowed.example:443
 * whose ClientHello names another host served from the same address (a
 * CDN routes on the inner name). The name is read from the first bytes,
 * nothing is decrypted; the bytes are relayed only once the name is the
 * CONNECT host. With ECH the outer name is the one checked (a hello whose
 * outer name is a provider's shared public name is therefore refused).
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

px_inspect_verdict px_inspect_step(px_inspect *in, const uint8_t *held, size_t len,
                                   const char *host, bool last)
{
    if (len == 0)
        return last ? refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                             "the client sent nothing to inspect", false)
                    : PX_INSPECT_WAIT;
    if (held[0] != PH_TLS_RECORD_HANDSHAKE)
        return refuse(in, PH_REASON_PROTOCOL_NOT_ALLOWED,
                      "the tunnel's first bytes are not a TLS handshake", false);
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
    return PX_INSPECT_PASS;
}
