/*
 * pinhole/status.h - status codes, refusal reasons and diagnostics shared by
 * every Pinhole module.
 *
 * Two enums, two jobs:
 *  - ph_status says whether a call did its job (PH_OK) or why it could not
 *    (bad input, I/O, memory, ...). It is what every public function returns.
 *  - ph_reason says why a *decision* refused a destination. Its string form
 *    (ph_reason_code) is the stable code used in HTTP responses, log lines,
 *    metrics and library results alike. Values and strings never change
 *    meaning; new ones are appended.
 *
 * Human detail travels in a ph_diag out-parameter, never in errno.
 */
#ifndef PINHOLE_STATUS_H
#define PINHOLE_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PH_API __attribute__((visibility("default")))

typedef enum ph_status {
    PH_OK = 0,
    PH_E_INVAL = 1,      /* an argument or input is malformed */
    PH_E_NOMEM = 2,      /* allocation failed */
    PH_E_IO = 3,         /* a system call failed (detail in the diagnostic) */
    PH_E_FORMAT = 4,     /* a file is not a valid Pinhole file of its kind */
    PH_E_LIMIT = 5,      /* a size or count limit was exceeded */
    PH_E_NOT_FOUND = 6,  /* the named thing does not exist */
    PH_E_DENIED = 7,     /* a decision refused; the ph_reason says why */
    PH_E_TIMEOUT = 8,    /* a deadline passed */
    PH_E_INTERNAL = 9,   /* a bug: an invariant did not hold */
    PH_E_UNSUPPORTED = 10, /* not available on this system or build */
} ph_status;

/* Returns a static, human-readable description of st (never NULL). */
PH_API const char *ph_strerror(ph_status st);

typedef enum ph_reason {
    PH_REASON_ALLOWED = 0,
    PH_REASON_PARSE_ERROR = 1,
    PH_REASON_IP_LITERAL = 2,
    PH_REASON_NO_GRANT = 3,
    PH_REASON_GRANT_INVALID = 4,
    PH_REASON_GRANT_EXPIRED = 5,
    PH_REASON_NOT_ALLOWLISTED = 6,
    PH_REASON_PORT_NOT_ALLOWED = 7,
    PH_REASON_DNS_FAILURE = 8,
    PH_REASON_DNS_TIMEOUT = 9,
    PH_REASON_DENIED_ADDRESS = 10,
    PH_REASON_UPSTREAM_UNREACHABLE = 11,
    PH_REASON_LIMIT_EXCEEDED = 12,
    PH_REASON_UNKNOWN_LIST = 13,
    PH_REASON_UPSTREAM_TIMEOUT = 14,
    PH_REASON_WILDCARD_DNS = 15, /* the host is at or under a wildcard-DNS or
                                  * DNS-rebinding service (nip.io, rbndr.us, ...):
                                  * refused even when a rule allows it */
    /* Redirect rules (pinhole/redirect.h): a worker following a Location. */
    PH_REASON_REDIRECT_DOWNGRADE = 16,    /* https redirected to http, not asked for */
    PH_REASON_REDIRECT_LIMIT = 17,        /* more redirects than the hop limit */
    PH_REASON_REDIRECT_BAD_LOCATION = 18, /* a Location that is empty, too long, has
                                           * bytes parsers read differently, or is
                                           * not an http(s) reference */
    /* The proxy's HTTP/1.1 framing (RFC 9112) of a forwarded request or of
     * its upstream's response: refused before a byte of it is relayed. */
    PH_REASON_HTTP_CL_TE = 19,                 /* Content-Length with Transfer-Encoding */
    PH_REASON_HTTP_BAD_CONTENT_LENGTH = 20,    /* several, a list, not 1*DIGIT, overflow */
    PH_REASON_HTTP_BAD_TRANSFER_ENCODING = 21, /* anything but one final "chunked" */
    PH_REASON_HTTP_OBS_FOLD = 22,              /* a field line starting with SP/HTAB */
    PH_REASON_HTTP_BARE_CR = 23,               /* CR not followed by LF */
    PH_REASON_HTTP_BARE_LF = 24,               /* LF not preceded by CR */
    PH_REASON_HTTP_BAD_FIELD = 25,             /* field name, value byte, space before ':' */
    PH_REASON_HTTP_TARGET_TOO_LONG = 26,       /* request target over the limit */
    PH_REASON_HTTP_HEAD_TOO_LARGE = 27,        /* head over its size or field limit */
    PH_REASON_HTTP_HEAD_TIMEOUT = 28,          /* head not complete within the timeout */
    PH_REASON_HTTP_BAD_CHUNK = 29,             /* chunk size, extension, CRLF, trailers */
    PH_REASON_HTTP_BAD_REQUEST_LINE = 30,      /* method, target, version */
    PH_REASON_HTTPS_USE_CONNECT = 31,          /* an https:// absolute-form request */
    PH_REASON_ORIGIN_FORM = 32,                /* a request not in absolute form */
    PH_REASON_UPSTREAM_BAD_RESPONSE = 33,      /* a response the proxy cannot frame */
    /* The proxy's own resources, refused at accept before a byte is read. */
    PH_REASON_PROXY_OVERLOADED = 34,           /* connections overall, the descriptor room,
                                                * heads overall, or out of memory */
    PH_REASON_PEER_LIMIT_EXCEEDED = 35,        /* open connections of one peer */
    PH_REASON_PEER_HEAD_LIMIT_EXCEEDED = 36,   /* one peer's connections still
                                                * sending their request head */
    /* A worker's redirect that would re-send the request body to another
     * origin without the caller asking for it (pinhole/redirect.h). */
    PH_REASON_REDIRECT_BODY_CROSS_ORIGIN = 37,
    /* The proxy's inspection of a CONNECT tunnel's first bytes: the tunnel
     * ends before a byte of the client's is relayed. */
    PH_REASON_TLS_MALFORMED = 38,        /* a ClientHello the proxy cannot read strictly */
    PH_REASON_SNI_MISSING = 39,          /* a ClientHello without a server name */
    PH_REASON_SNI_MISMATCH = 40,         /* a server name other than the CONNECT host */
    PH_REASON_PROTOCOL_NOT_ALLOWED = 41, /* neither TLS nor what the rule allows */
    /* The PROXY protocol header a load balancer puts before a connection's
     * bytes (pinhole-proxy --proxy-protocol): refused at accept, before a
     * byte of the request is read. */
    PH_REASON_PROXY_PROTOCOL_UNTRUSTED = 42, /* a header from a source not allowed to send one */
    PH_REASON_PROXY_PROTOCOL_MISSING = 43,   /* no header from a source that must send one */
    PH_REASON_PROXY_PROTOCOL_MALFORMED = 44, /* a header that is not strict v2, or cut short */
    /* A forwarded request whose client did not send its body in time. */
    PH_REASON_CLIENT_TIMEOUT = 45,
    PH_REASON_HOST_MISMATCH = 46,        /* an HTTP request in a tunnel naming another
                                          * host or port than the CONNECT */
    /* The grant verifies, but its lease is on the revocation list in force
     * (pinhole/revocation.h): refused like a grant (407). */
    PH_REASON_LEASE_REVOKED = 47,
    /* A tunnel's ClientHello naming the CONNECT host but offering
     * Encrypted Client Hello: the server may route on the inner hello's
     * name, which the proxy cannot read. */
    PH_REASON_SNI_ENCRYPTED = 48,
    PH_REASON_COUNT_ /* not a reason: the number of reasons */
} ph_reason;

/* Returns the stable snake_case code of r ("ip_literal", ...); "allowed" for
 * PH_REASON_ALLOWED, "unknown" for out-of-range values. Static, never NULL. */
PH_API const char *ph_reason_code(ph_reason r);

/* The HTTP status a refusal for r is answered with (200 for
 * PH_REASON_ALLOWED, 500 for out-of-range values): one table for every
 * enforcement point, so no caller maps reasons to statuses itself. */
PH_API int ph_reason_http_status(ph_reason r);

/* Parses a stable code back into *out. Returns PH_OK or PH_E_NOT_FOUND. */
PH_API ph_status ph_reason_from_code(const char *code, ph_reason *out);

/*
 * A diagnostic: what went wrong, for a human, plus where in the input when
 * the failing call parsed something. Callers own it (usually on the stack);
 * every function taking a `ph_diag *` accepts NULL when the caller does not
 * want detail. Functions fill it only when they return something other than
 * PH_OK.
 */
#define PH_DIAG_MESSAGE_MAX 256
typedef struct ph_diag {
    ph_status status;
    size_t offset;                     /* byte offset into the input, if any */
    char message[PH_DIAG_MESSAGE_MAX]; /* NUL-terminated, single line */
} ph_diag;

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_STATUS_H */
