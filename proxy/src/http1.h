/*
 * http1.h - the strict HTTP/1.1 parser (RFC 9112) of pinhole-proxy, the one
 * for every head it reads: a CONNECT's (tunnel.c), a forwarded request's and
 * its response's (forward.c), and chunked bodies both ways.
 *
 * Pure (no allocation, no I/O, no globals), so it is fuzzed (fuzz/http1.c)
 * and unit-tested alone. It frames; it decides no destination: the request
 * target goes, unparsed, to the guard (a CONNECT's authority to
 * ph_decide_connect, an absolute-form URL to ph_decide_url), which also says
 * the URL's scheme. What the parser tells about the target is its form
 * (RFC 9112 section 3.2), which the grammar fixes: ph_h1_form.
 *
 * Strictness is the point. Every leniency below is a request-smuggling lever
 * when the proxy and the upstream read one message differently, so each is
 * refused with a stable reason (pinhole/status.h; its HTTP status comes from
 * ph_reason_http_status, never from here), for a CONNECT as for any other
 * request (but for a CONNECT's request line, last below):
 *   http_cl_te                  Content-Length and Transfer-Encoding together
 *   http_bad_content_length     several Content-Length fields, a list ("1, 1"),
 *                               anything but 1*DIGIT (a sign, inner spaces),
 *                               a value over PH_H1_LENGTH_MAX; any
 *                               Content-Length on a CONNECT (it has no
 *                               content, RFC 9110 section 9.3.6: bytes after
 *                               its head are the tunnel's)
 *   http_bad_transfer_encoding  anything but one field whose value is exactly
 *                               "chunked" (case-insensitive); any
 *                               Transfer-Encoding on an HTTP/1.0 message or
 *                               on a CONNECT
 *   http_obs_fold               a field line starting with SP or HTAB
 *   http_bare_cr                a CR not followed by LF
 *   http_bare_lf                an LF not preceded by CR: RFC 9112 section
 *                               2.2 lets a recipient accept it as a line end;
 *                               this parser does not, since the upstream may
 *                               not, and nothing a sandbox runs needs it
 *   http_bad_field              a field name that is not a token, whitespace
 *                               before ':', a control byte (other than HTAB)
 *                               or DEL in a value, several Host fields,
 *                               several Proxy-Authorization fields (which
 *                               of them would carry the grant?)
 *   http_target_too_long        a request target over PH_H1_TARGET_MAX
 *   http_head_too_large         a head over its byte limit or PH_H1_FIELDS_MAX
 *   http_bad_chunk              a chunk size that is not hex or overflows, a
 *                               chunk line or extension over
 *                               PH_H1_CHUNK_LINE_MAX, data not ending in CRLF,
 *                               trailers over PH_H1_TRAILERS_MAX or malformed
 *   http_bad_request_line       method, request target or version malformed
 *                               (HTTP/1.1 and HTTP/1.0 are accepted: Python's
 *                               http.client, hence pip, sends its CONNECT as
 *                               HTTP/1.0), or a control byte in it
 *   upstream_bad_response       a status line that is not HTTP/1.x, 3 digits
 *                               (a response head's other errors carry the
 *                               reasons above)
 *   parse_error                 anything wrong in a CONNECT's request line
 *                               (after "CONNECT ", the line is the
 *                               destination: a byte no authority holds, the
 *                               line ending inside the target, a target
 *                               over PH_H1_TARGET_MAX, another version): the
 *                               guard's reason for a malformed authority, so
 *                               the proxy answers a CONNECT target as
 *                               ph_decide_connect does; its fields get the
 *                               reasons above
 */
#ifndef PINHOLE_HTTP1_H
#define PINHOLE_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PH_H1_REQUEST_HEAD_MAX 8192    /* a request head, request line to final CRLF */
#define PH_H1_RESPONSE_HEAD_MAX 32768  /* a response head (Set-Cookie, CSP are long) */
#define PH_H1_FIELDS_MAX 100           /* field lines in one head */
#define PH_H1_TARGET_MAX 4096          /* request-target bytes (a CONNECT authority
                                        * over PH_AUTHORITY_MAX_LEN, 259, is the
                                        * guard's parse_error) */
#define PH_H1_LENGTH_MAX 0x3fffffffffffffffULL /* largest Content-Length / chunk size */
#define PH_H1_CHUNK_LINE_MAX 1024      /* chunk-size line, extensions included */
#define PH_H1_TRAILERS_MAX 4096        /* all trailer lines of a chunked body */

typedef enum ph_h1_result {
    PH_H1_INCOMPLETE = 0, /* no error so far; more bytes are needed */
    PH_H1_DONE = 1,       /* complete (a head; or the last chunk and trailers) */
    PH_H1_REFUSED = 2,    /* malformed: see reason, message, error_offset */
} ph_h1_result;

/* A span of the caller's buffer; valid while the buffer is. */
typedef struct ph_h1_span {
    uint32_t off;
    uint32_t len;
} ph_h1_span;

typedef struct ph_h1_field {
    ph_h1_span name;  /* a token */
    ph_h1_span value; /* OWS trimmed both sides */
} ph_h1_field;

/* How the message's body is delimited (RFC 9112 section 6.3). */
typedef enum ph_h1_body {
    PH_H1_BODY_NONE = 0,    /* no body (no framing field on a request; HEAD,
                             * 1xx, 204, 304 responses) */
    PH_H1_BODY_LENGTH = 1,  /* content_length bytes (0 included) */
    PH_H1_BODY_CHUNKED = 2, /* Transfer-Encoding: chunked (ph_h1_chunked) */
    PH_H1_BODY_CLOSE = 3,   /* a response read until the upstream closes */
} ph_h1_body;

/* The form of a request target (RFC 9112 section 3.2), from the grammar
 * alone: a CONNECT's is authority-form, "*" asterisk-form, one starting with
 * '/' origin-form, and any other absolute-form, an absolute URI whose scheme
 * and syntax only the guard's URL parser judges. */
typedef enum ph_h1_form {
    PH_H1_FORM_ORIGIN = 0,    /* "/path?query" (also the value for a response) */
    PH_H1_FORM_ABSOLUTE = 1,  /* "http://host/path" and anything else */
    PH_H1_FORM_AUTHORITY = 2, /* a CONNECT's "host:port" */
    PH_H1_FORM_ASTERISK = 3,  /* "*" */
} ph_h1_form;

typedef struct ph_h1_head {
    size_t head_len;        /* DONE: bytes of the head, incl. the final CRLF */
    int version_minor;      /* DONE: 1 (HTTP/1.1) or 0 (HTTP/1.0) */
    /* requests */
    ph_h1_span method;      /* a token, case-sensitive */
    ph_h1_span target;      /* the raw request-target */
    ph_h1_form form;        /* the target's form; AUTHORITY exactly when the
                             * method is CONNECT (case-sensitive, RFC 9110
                             * section 9.1), whose body is then NONE */
    /* responses */
    int status;             /* 100..999 */
    ph_h1_span reason_phrase;
    /* framing */
    ph_h1_body body;
    uint64_t content_length; /* the Content-Length value (0 without one) */
    bool has_content_length; /* a Content-Length field was present */
    /* Connection: close / keep-alive tokens seen (any Connection field). */
    bool conn_close, conn_keep_alive;
    bool expect_continue;   /* Expect: 100-continue */
    int host_field;         /* index of the Host field, -1 when absent */
    int proxy_auth_field;   /* index of the Proxy-Authorization field, -1 when
                             * absent (its value: the grant, for the guard) */
    unsigned nfields;
    ph_h1_field fields[PH_H1_FIELDS_MAX];
    /* REFUSED */
    ph_reason reason;
    const char *message;    /* static, one line */
    size_t error_offset;
} ph_h1_head;

/*
 * Parses a request head from buf[0..len), the bytes received so far; call
 * again with the longer buffer after INCOMPLETE. Refuses as soon as a
 * complete line (or a target already over its limit) is wrong, and with
 * http_head_too_large once len reaches PH_H1_REQUEST_HEAD_MAX without a
 * complete head. A request's body is PH_H1_BODY_LENGTH or _CHUNKED when it
 * has a framing field, else _NONE (a CONNECT's always: it may not have
 * one). Bytes after the head (a CONNECT's early tunnel bytes, a pipelined
 * request) are not looked at. *out is always overwritten.
 */
ph_h1_result ph_h1_parse_request(const uint8_t *buf, size_t len, ph_h1_head *out);

/*
 * The same for a response head from an upstream. request_was_head: the
 * request was HEAD (the response has no body whatever its fields say).
 * Without Content-Length or Transfer-Encoding a final response is
 * PH_H1_BODY_CLOSE; 1xx, 204 and 304 are PH_H1_BODY_NONE.
 */
ph_h1_result ph_h1_parse_response(const uint8_t *buf, size_t len, bool request_was_head,
                                  ph_h1_head *out);

/*
 * Receiving a head in pieces without reading it again from its start (a
 * head sent a byte at a time would otherwise cost time quadratic in its
 * size). Examines buf[*mark..len): the bytes before *mark were examined by
 * an earlier call on the same head (start a head with *mark = 0; buf grows,
 * its start stays). Returns true when a head parser of this file has
 * something new to decide: the head
 * ended (CRLF CRLF, the 3 bytes before the LF already examined), its first
 * line ended (a bad request or status line is refused at once), or a byte
 * came that the parser refuses (an LF without CR, a CR followed by
 * another byte, a byte that is not a field byte: a TLS ClientHello is
 * refused at its first bytes). Then *mark is past that byte and the caller
 * parses buf[0..len) once. False: nothing yet; *mark is past every byte
 * examined, except a CR ending buf (its verdict needs the byte after it).
 * The caller still parses at its size cap. Each byte is examined once; the
 * only look back is for the first line's end, which stops there.
 */
bool ph_h1_head_scan(const uint8_t *buf, size_t len, size_t *mark);

/* RFC 9110 tchar (token characters: methods, field names). */
bool ph_h1_is_tchar(int c);
/* A field-value byte: VCHAR, SP, HTAB or obs-text (no other control byte, no
 * DEL). */
bool ph_h1_is_field_byte(int c);

/* True when the field name n[0..nlen) equals lit (ASCII case-insensitive). */
bool ph_h1_name_is(const uint8_t *n, size_t nlen, const char *lit);

/*
 * True when a Connection field of head (parsed from buf) lists the field
 * name n[0..nlen) as a token (RFC 9110 section 7.6.1: the fields a sender
 * marked hop-by-hop).
 */
bool ph_h1_connection_lists(const uint8_t *buf, const ph_h1_head *head, const uint8_t *n,
                            size_t nlen);

/*
 * An incremental chunked-body decoder (RFC 9112 section 7.1). Zero it
 * (ph_h1_chunked_init) per body. Each step consumes framing bytes, or
 * returns a run of chunk data in place (data_off/data_len within the input
 * given); chunk extensions and trailers are checked and dropped (the
 * forwarder re-frames the data it is handed).
 */
typedef struct ph_h1_chunked {
    int state;
    uint64_t remaining;     /* data bytes left in this chunk */
    uint64_t total;         /* data bytes so far */
    unsigned line_len;      /* bytes of the current chunk-size line */
    unsigned digits;        /* hex digits of the current size */
    unsigned trailer_bytes; /* bytes of trailers so far */
    unsigned trailer_line;  /* bytes of the current trailer line */
    unsigned trailer_fields;
    ph_reason reason;       /* REFUSED */
    const char *message;
} ph_h1_chunked;

typedef struct ph_h1_chunk_step {
    size_t consumed;  /* bytes of the input used (framing and data) */
    size_t data_off;  /* chunk data within the input (data_len 0: none) */
    size_t data_len;
} ph_h1_chunk_step;

void ph_h1_chunked_init(ph_h1_chunked *c);

/*
 * Decodes from in[0..len): fills *step and returns INCOMPLETE (call again
 * with the input after step->consumed; with len 0 nothing happens), DONE
 * (the last chunk and the trailers ended; step->consumed stops there) or
 * REFUSED (c->reason, c->message). Deterministic in the bytes: feeding a
 * body in any split gives the same data and the same result.
 */
ph_h1_result ph_h1_chunked_step(ph_h1_chunked *c, const uint8_t *in, size_t len,
                                ph_h1_chunk_step *step);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_HTTP1_H */
