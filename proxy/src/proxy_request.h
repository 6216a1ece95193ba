/*
 * proxy_request.h - the strict HTTP/1.1 request-head parser of
 * pinhole-proxy. Private to the proxy (its tests and fuzzer link
 * pinhole_proxy_request); not installed.
 *
 * A pure function over bytes (no allocation, no I/O, no globals) so it can be
 * fuzzed and unit-tested in isolation. It classifies a request head and says
 * which HTTP status a refusal gets; it makes NO destination decision: the
 * CONNECT target is handed, unparsed, to the guard's authority parser.
 *
 * Accepted: "CONNECT <target> HTTP/1.1" (or HTTP/1.0, what Python's
 * http.client sends) CRLF, then header fields
 * "name: value" CRLF, then an empty line CRLF. Refused with a stable reason
 * (pinhole/status.h), whose HTTP status is ph_reason_http_status's, never
 * chosen here:
 *   parse_error (400) malformed (bare LF, obs-fold, space before ':',
 *       control bytes, bad version, duplicate Proxy-Authorization, a body on
 *       CONNECT, ...), and a method other than CONNECT (origin or absolute
 *       form: pinhole-proxy hands a connection whose first request is not a
 *       CONNECT to its forwarding, proxy/src/forward.c, before this parser
 *       sees it, so only callers of the parser alone meet that one)
 *       A request line not ended within PH_PREQ_HEAD_MAX bytes is one too.
 *   http_head_too_large (431) header fields that make the head longer than
 *       PH_PREQ_HEAD_MAX bytes, or too many fields
 */
#ifndef PX_PROXY_REQUEST_H
#define PX_PROXY_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PH_PREQ_HEAD_MAX 8192   /* whole head, request line to final CRLF */
#define PH_PREQ_FIELDS_MAX 64   /* header fields */
#define PH_PREQ_TARGET_MAX 512  /* CONNECT target bytes */

typedef enum ph_preq_result {
    PH_PREQ_INCOMPLETE = 0, /* no error so far; the head is not complete */
    PH_PREQ_DONE = 1,       /* a complete, well-formed CONNECT head */
    PH_PREQ_REFUSED = 2,    /* refuse with out->http_status and out->message */
} ph_preq_result;

/* Spans point into the caller's buffer; valid while it is. */
typedef struct ph_preq_span {
    size_t off;
    size_t len;
} ph_preq_span;

typedef struct ph_proxy_request {
    size_t head_len;              /* DONE: bytes of the head, incl. the final CRLF */
    ph_preq_span target;          /* DONE: the CONNECT request-target, raw */
    ph_preq_span authorization;   /* DONE: Proxy-Authorization value (OWS trimmed) */
    int has_authorization;        /* DONE: 1 when the field was present */
    ph_reason reason;             /* REFUSED: parse_error or http_head_too_large */
    const char *message;          /* REFUSED: static one-line reason for the body */
    size_t error_offset;          /* REFUSED: byte offset of the offending byte */
} ph_proxy_request;

/*
 * Parses buf[0..len), the bytes received so far on a connection. Callers
 * call it again with the longer buffer when it says INCOMPLETE; it refuses
 * as soon as a complete line is wrong, and with http_head_too_large once len
 * reaches PH_PREQ_HEAD_MAX without a complete head. Bytes after the head (a
 * client that does not wait for the 200) are not looked at. *out is always
 * overwritten; the function never reads past buf[len-1]. A caller receiving
 * the head in pieces asks ph_h1_head_scan (http1.h) when to call it again,
 * instead of after every piece.
 */
ph_preq_result ph_proxy_request_parse(const uint8_t *buf, size_t len, ph_proxy_request *out);

#ifdef __cplusplus
}
#endif
#endif /* PX_PROXY_REQUEST_H */
