/* status.c - names for ph_status and ph_reason, and diagnostics
 * (pinhole/status.h, pinhole/diag.h). */
#include "pinhole/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "pinhole/diag.h"

const char *ph_strerror(ph_status st)
{
    switch (st) {
    case PH_OK: return "success";
    case PH_E_INVAL: return "invalid input";
    case PH_E_NOMEM: return "out of memory";
    case PH_E_IO: return "I/O error";
    case PH_E_FORMAT: return "invalid file format";
    case PH_E_LIMIT: return "limit exceeded";
    case PH_E_NOT_FOUND: return "not found";
    case PH_E_DENIED: return "denied";
    case PH_E_TIMEOUT: return "timed out";
    case PH_E_INTERNAL: return "internal error";
    case PH_E_UNSUPPORTED: return "not supported";
    }
    return "unknown status";
}

static const char *const reason_codes[PH_REASON_COUNT_] = {
    [PH_REASON_ALLOWED] = "allowed",
    [PH_REASON_PARSE_ERROR] = "parse_error",
    [PH_REASON_IP_LITERAL] = "ip_literal",
    [PH_REASON_NO_GRANT] = "no_grant",
    [PH_REASON_GRANT_INVALID] = "grant_invalid",
    [PH_REASON_GRANT_EXPIRED] = "grant_expired",
    [PH_REASON_NOT_ALLOWLISTED] = "not_allowlisted",
    [PH_REASON_PORT_NOT_ALLOWED] = "port_not_allowed",
    [PH_REASON_DNS_FAILURE] = "dns_failure",
    [PH_REASON_DNS_TIMEOUT] = "dns_timeout",
    [PH_REASON_DENIED_ADDRESS] = "denied_address",
    [PH_REASON_UPSTREAM_UNREACHABLE] = "upstream_unreachable",
    [PH_REASON_LIMIT_EXCEEDED] = "limit_exceeded",
    [PH_REASON_UNKNOWN_LIST] = "unknown_list",
    [PH_REASON_UPSTREAM_TIMEOUT] = "upstream_timeout",
    [PH_REASON_WILDCARD_DNS] = "wildcard_dns",
    [PH_REASON_REDIRECT_DOWNGRADE] = "redirect_downgrade",
    [PH_REASON_REDIRECT_LIMIT] = "redirect_limit",
    [PH_REASON_REDIRECT_BAD_LOCATION] = "redirect_bad_location",
    [PH_REASON_HTTP_CL_TE] = "http_cl_te",
    [PH_REASON_HTTP_BAD_CONTENT_LENGTH] = "http_bad_content_length",
    [PH_REASON_HTTP_BAD_TRANSFER_ENCODING] = "http_bad_transfer_encoding",
    [PH_REASON_HTTP_OBS_FOLD] = "http_obs_fold",
    [PH_REASON_HTTP_BARE_CR] = "http_bare_cr",
    [PH_REASON_HTTP_BARE_LF] = "http_bare_lf",
    [PH_REASON_HTTP_BAD_FIELD] = "http_bad_field",
    [PH_REASON_HTTP_TARGET_TOO_LONG] = "http_target_too_long",
    [PH_REASON_HTTP_HEAD_TOO_LARGE] = "http_head_too_large",
    [PH_REASON_HTTP_HEAD_TIMEOUT] = "http_head_timeout",
    [PH_REASON_HTTP_BAD_CHUNK] = "http_bad_chunk",
    [PH_REASON_HTTP_BAD_REQUEST_LINE] = "http_bad_request_line",
    [PH_REASON_HTTPS_USE_CONNECT] = "https_use_connect",
    [PH_REASON_ORIGIN_FORM] = "origin_form",
    [PH_REASON_UPSTREAM_BAD_RESPONSE] = "upstream_bad_response",
    [PH_REASON_PROXY_OVERLOADED] = "proxy_overloaded",
    [PH_REASON_PEER_LIMIT_EXCEEDED] = "peer_limit_exceeded",
    [PH_REASON_PEER_HEAD_LIMIT_EXCEEDED] = "peer_head_limit_exceeded",
    [PH_REASON_REDIRECT_BODY_CROSS_ORIGIN] = "redirect_body_cross_origin",
    [PH_REASON_TLS_MALFORMED] = "tls_malformed",
    [PH_REASON_SNI_MISSING] = "sni_missing",
    [PH_REASON_SNI_MISMATCH] = "sni_mismatch",
    [PH_REASON_PROTOCOL_NOT_ALLOWED] = "protocol_not_allowed",
    [PH_REASON_PROXY_PROTOCOL_UNTRUSTED] = "proxy_protocol_untrusted",
    [PH_REASON_PROXY_PROTOCOL_MISSING] = "proxy_protocol_missing",
    [PH_REASON_PROXY_PROTOCOL_MALFORMED] = "proxy_protocol_malformed",
    [PH_REASON_CLIENT_TIMEOUT] = "client_timeout",
    [PH_REASON_HOST_MISMATCH] = "host_mismatch",
    [PH_REASON_LEASE_REVOKED] = "lease_revoked",
    [PH_REASON_SNI_ENCRYPTED] = "sni_encrypted",
};

/* The HTTP status a refusal for each reason is answered with. The proxy
 * answers from this table and nothing else; a worker's HTTP API may use it
 * too. limit_exceeded is the per-lease limit (429); the proxy's own overload
 * at accept, and its own lack of memory, have reasons of their own (503). */
static const unsigned short reason_status[PH_REASON_COUNT_] = {
    [PH_REASON_ALLOWED] = 200,
    [PH_REASON_PARSE_ERROR] = 400,
    [PH_REASON_IP_LITERAL] = 403,
    [PH_REASON_NO_GRANT] = 407,
    [PH_REASON_GRANT_INVALID] = 407,
    [PH_REASON_GRANT_EXPIRED] = 407,
    [PH_REASON_NOT_ALLOWLISTED] = 403,
    [PH_REASON_PORT_NOT_ALLOWED] = 403,
    [PH_REASON_DNS_FAILURE] = 502,
    [PH_REASON_DNS_TIMEOUT] = 504,
    [PH_REASON_DENIED_ADDRESS] = 403,
    [PH_REASON_UPSTREAM_UNREACHABLE] = 502,
    [PH_REASON_LIMIT_EXCEEDED] = 429,
    [PH_REASON_UNKNOWN_LIST] = 403,
    [PH_REASON_UPSTREAM_TIMEOUT] = 504,
    [PH_REASON_WILDCARD_DNS] = 403,
    /* A redirect the worker will not follow: a policy refusal (403) for a
     * downgrade, the upstream's misbehaviour (502) otherwise. */
    [PH_REASON_REDIRECT_DOWNGRADE] = 403,
    [PH_REASON_REDIRECT_LIMIT] = 502,
    [PH_REASON_REDIRECT_BAD_LOCATION] = 502,
    [PH_REASON_HTTP_CL_TE] = 400,
    [PH_REASON_HTTP_BAD_CONTENT_LENGTH] = 400,
    [PH_REASON_HTTP_BAD_TRANSFER_ENCODING] = 400,
    [PH_REASON_HTTP_OBS_FOLD] = 400,
    [PH_REASON_HTTP_BARE_CR] = 400,
    [PH_REASON_HTTP_BARE_LF] = 400,
    [PH_REASON_HTTP_BAD_FIELD] = 400,
    [PH_REASON_HTTP_TARGET_TOO_LONG] = 414,
    [PH_REASON_HTTP_HEAD_TOO_LARGE] = 431,
    [PH_REASON_HTTP_HEAD_TIMEOUT] = 408,
    [PH_REASON_HTTP_BAD_CHUNK] = 400,
    [PH_REASON_HTTP_BAD_REQUEST_LINE] = 400,
    [PH_REASON_HTTPS_USE_CONNECT] = 400,
    [PH_REASON_ORIGIN_FORM] = 400,
    [PH_REASON_UPSTREAM_BAD_RESPONSE] = 502,
    /* The proxy's capacity: try again later (a per-peer cap too, since
     * the peer's other connections ending frees it). */
    [PH_REASON_PROXY_OVERLOADED] = 503,
    [PH_REASON_PEER_LIMIT_EXCEEDED] = 503,
    [PH_REASON_PEER_HEAD_LIMIT_EXCEEDED] = 503,
    /* The worker's own rule, like a downgrade: a policy refusal. */
    [PH_REASON_REDIRECT_BODY_CROSS_ORIGIN] = 403,
    /* A tunnel's first bytes: the 200 is sent already, so the status is the
     * log line's and the metric's (a TLS alert is what the client gets). */
    [PH_REASON_TLS_MALFORMED] = 400,
    [PH_REASON_SNI_MISSING] = 403,
    [PH_REASON_SNI_MISMATCH] = 403,
    [PH_REASON_PROTOCOL_NOT_ALLOWED] = 403,
    /* A PROXY header: a source the operator did not name may not claim to
     * speak for another (403); a balancer that sends none or a bad one is
     * misconfigured (400). */
    [PH_REASON_PROXY_PROTOCOL_UNTRUSTED] = 403,
    [PH_REASON_PROXY_PROTOCOL_MISSING] = 400,
    [PH_REASON_PROXY_PROTOCOL_MALFORMED] = 400,
    /* The client's side was slow, as for a head (http_head_timeout). */
    [PH_REASON_CLIENT_TIMEOUT] = 408,
    /* An HTTP/1 request inside a tunnel: answered 403 before a byte of it
     * is relayed, and the connection ends. */
    [PH_REASON_HOST_MISMATCH] = 403,
    [PH_REASON_LEASE_REVOKED] = 407,
    /* A tunnel's first bytes, as sni_mismatch. */
    [PH_REASON_SNI_ENCRYPTED] = 403,
};

int ph_reason_http_status(ph_reason r)
{
    if ((unsigned)r >= PH_REASON_COUNT_)
        return 500;
    return reason_status[r];
}

const char *ph_reason_code(ph_reason r)
{
    if ((unsigned)r >= PH_REASON_COUNT_)
        return "unknown";
    return reason_codes[r];
}

ph_status ph_reason_from_code(const char *code, ph_reason *out)
{
    for (unsigned i = 0; i < PH_REASON_COUNT_; i++) {
        if (strcmp(code, reason_codes[i]) == 0) {
            *out = (ph_reason)i;
            return PH_OK;
        }
    }
    return PH_E_NOT_FOUND;
}

ph_status ph_diag_set(ph_diag *diag, ph_status st, size_t offset, const char *fmt, ...)
{
    if (diag == NULL)
        return st;
    int saved = errno; /* callers report errno after this */
    diag->status = st;
    diag->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(diag->message, sizeof diag->message, fmt, ap);
    va_end(ap);
    errno = saved;
    return st;
}
