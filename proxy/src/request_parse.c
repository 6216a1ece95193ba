/* request_parse.c - strict HTTP/1.1 CONNECT request-head parser (RFC 9110,
 * RFC 9112). Pure: no allocation, no I/O. Strictness is deliberate: every
 * leniency (bare LF, obs-fold, whitespace before ':') is a known request-
 * smuggling lever, and a sandbox has no reason to send any of them. */
#include "proxy_request.h"

#include <string.h>

#include "pinhole/host.h"
#include "http1.h" /* the token and field-byte classes, shared */

static ph_preq_result refuse(ph_proxy_request *out, ph_reason reason, const char *msg, size_t off)
{
    out->reason = reason;
    out->message = msg;
    out->error_offset = off;
    return PH_PREQ_REFUSED;
}

/* Finds the end of the line starting at pos: returns the offset of its CR
 * (line is [pos, cr)), -1 when no CRLF yet, -2 when a bare LF, a CR not
 * followed by LF or another control byte appears (malformed). */
static long line_end(const uint8_t *buf, size_t len, size_t pos, size_t *bad)
{
    for (size_t i = pos; i < len; i++) {
        if (buf[i] == '\n') {
            *bad = i;
            return -2;
        }
        if ((buf[i] < 0x20 && buf[i] != '\t' && buf[i] != '\r') || buf[i] == 0x7f) {
            *bad = i; /* refuse binary (a TLS ClientHello) now, not at 8 KiB */
            return -2;
        }
        if (buf[i] == '\r') {
            if (i + 1 >= len)
                return -1;
            if (buf[i + 1] != '\n') {
                *bad = i;
                return -2;
            }
            return (long)i;
        }
    }
    return -1;
}

/* An absolute-form target: scheme "://" (RFC 3986 scheme characters). */
static int is_absolute_form(const uint8_t *t, size_t len)
{
    size_t i = 0;
    if (len == 0 || !(ph_is_lower(t[0]) || ph_is_upper(t[0])))
        return 0;
    while (i < len && (ph_is_lower(t[i]) || ph_is_upper(t[i]) || ph_is_digit(t[i]) ||
                       t[i] == '+' || t[i] == '-' || t[i] == '.'))
        i++;
    return len - i >= 3 && memcmp(t + i, "://", 3) == 0;
}

static ph_preq_result parse_request_line(const uint8_t *buf, size_t end, ph_proxy_request *out,
                                         int *is_connect)
{
    size_t i = 0;
    while (i < end && ph_h1_is_tchar(buf[i]))
        i++;
    if (i == 0 || i >= end || buf[i] != ' ')
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed request line: bad method", i);
    size_t mlen = i;
    size_t tstart = ++i;
    while (i < end && buf[i] > 0x20 && buf[i] < 0x7f)
        i++;
    size_t tlen = i - tstart;
    if (tlen == 0 || i >= end || buf[i] != ' ')
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed request line: bad request-target", i);
    i++;
    if (end - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0 || !ph_is_digit(buf[i + 7]))
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed request line: expected HTTP/1.1", i);
    /* HTTP/1.0 too: Python's http.client (pip, urllib3) sends its CONNECT
     * as HTTP/1.0; a tunnel is the same either way. */
    if (buf[i + 7] != '1' && buf[i + 7] != '0')
        return refuse(out, PH_REASON_PARSE_ERROR, "unsupported HTTP version: HTTP/1.1 and HTTP/1.0 are accepted",
                      i + 7);
    /* Methods are case-sensitive (RFC 9110 9.1): "connect" is not CONNECT. */
    *is_connect = mlen == 7 && memcmp(buf, "CONNECT", 7) == 0;
    if (!*is_connect) {
        if (is_absolute_form(buf + tstart, tlen))
            return refuse(out, PH_REASON_PARSE_ERROR,
                          "absolute-form request: this parser takes CONNECT host:port", tstart);
        return refuse(out, PH_REASON_PARSE_ERROR,
                      "method not allowed: only CONNECT host:port is accepted", 0);
    }
    if (tlen > PH_PREQ_TARGET_MAX)
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed request: CONNECT target too long", tstart);
    out->target.off = tstart;
    out->target.len = tlen;
    return PH_PREQ_DONE;
}

static ph_preq_result parse_field(const uint8_t *buf, size_t pos, size_t end, ph_proxy_request *out)
{
    if (buf[pos] == ' ' || buf[pos] == '\t')
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed header: line folding is not accepted", pos);
    size_t i = pos;
    while (i < end && ph_h1_is_tchar(buf[i]))
        i++;
    if (i == pos || i >= end || buf[i] != ':')
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed header: bad field name", i);
    size_t nlen = i - pos;
    i++;
    for (size_t j = i; j < end; j++)
        if (!ph_h1_is_field_byte(buf[j]))
            return refuse(out, PH_REASON_PARSE_ERROR, "malformed header: control byte in field value", j);
    while (i < end && (buf[i] == ' ' || buf[i] == '\t'))
        i++;
    size_t vend = end;
    while (vend > i && (buf[vend - 1] == ' ' || buf[vend - 1] == '\t'))
        vend--;
    const uint8_t *name = buf + pos;
    if (ph_h1_name_is(name, nlen, "proxy-authorization")) {
        if (out->has_authorization)
            return refuse(out, PH_REASON_PARSE_ERROR, "malformed request: duplicate Proxy-Authorization", pos);
        out->has_authorization = 1;
        out->authorization.off = i;
        out->authorization.len = vend - i;
    } else if (ph_h1_name_is(name, nlen, "content-length") ||
               ph_h1_name_is(name, nlen, "transfer-encoding")) {
        /* A CONNECT request has no content (RFC 9110 9.3.6); a body here is
         * either a client bug or an attempt to smuggle bytes past the head. */
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed request: CONNECT carries no body", pos);
    }
    return PH_PREQ_DONE;
}

ph_preq_result ph_proxy_request_parse(const uint8_t *buf, size_t len, ph_proxy_request *out)
{
    memset(out, 0, sizeof *out);
    size_t scan = len < PH_PREQ_HEAD_MAX ? len : PH_PREQ_HEAD_MAX;
    size_t pos = 0, bad = 0;
    int is_connect = 0, fields = 0;

    long end = line_end(buf, scan, pos, &bad);
    if (end == -2)
        return refuse(out, PH_REASON_PARSE_ERROR, "malformed request: control byte or line not ending in CRLF", bad);
    if (end == -1)
        goto incomplete;
    ph_preq_result r = parse_request_line(buf, (size_t)end, out, &is_connect);
    if (r != PH_PREQ_DONE)
        return r;
    pos = (size_t)end + 2;

    for (;;) {
        end = line_end(buf, scan, pos, &bad);
        if (end == -2)
            return refuse(out, PH_REASON_PARSE_ERROR, "malformed request: control byte or line not ending in CRLF", bad);
        if (end == -1)
            goto incomplete;
        if ((size_t)end == pos) {
            out->head_len = pos + 2;
            return PH_PREQ_DONE;
        }
        if (++fields > PH_PREQ_FIELDS_MAX)
            return refuse(out, PH_REASON_HTTP_HEAD_TOO_LARGE, "request header fields too large: too many fields", pos);
        r = parse_field(buf, pos, (size_t)end, out);
        if (r != PH_PREQ_DONE)
            return r;
        pos = (size_t)end + 2;
    }

incomplete:
    /* A request line that does not end within the head limit holds a target
     * far over PH_PREQ_TARGET_MAX: malformed, as the guard judges such a
     * target (parse_error); only header fields make a head too large. */
    if (len >= PH_PREQ_HEAD_MAX && pos == 0)
        return refuse(out, PH_REASON_PARSE_ERROR,
                      "malformed request line: longer than the head limit (8 KiB)", PH_PREQ_HEAD_MAX);
    if (len >= PH_PREQ_HEAD_MAX)
        return refuse(out, PH_REASON_HTTP_HEAD_TOO_LARGE, "request header fields too large: the head exceeds 8 KiB",
                      PH_PREQ_HEAD_MAX);
    /* A prefix that is still valid: the spans filled so far mean nothing. */
    memset(out, 0, sizeof *out);
    return PH_PREQ_INCOMPLETE;
}
