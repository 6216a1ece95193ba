/* http1.c - strict HTTP/1.1 framing (RFC 9112): request heads (a CONNECT's
 * and a forwarded request's), response heads, chunked bodies. Pure: no
 * allocation, no I/O; spans point into the caller's buffer. Why each
 * leniency is refused: http1.h. */
#include "http1.h"

#include <string.h>

#include "pinhole/host.h"

bool ph_h1_is_tchar(int c)
{
    if (ph_is_digit(c) || ph_is_lower(c) || ph_is_upper(c))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Field-value bytes: VCHAR, SP, HTAB, obs-text; never another control byte
 * or DEL. */
bool ph_h1_is_field_byte(int c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

bool ph_h1_head_scan(const uint8_t *buf, size_t len, size_t *mark)
{
    for (size_t i = *mark; i < len; i++) {
        uint8_t b = buf[i];
        if (b == '\r') {
            if (i + 1 >= len) {
                *mark = i; /* examined again with the byte after it */
                return false;
            }
            i++;
            if (buf[i] != '\n') {
                *mark = i; /* a bare CR */
                return true;
            }
            /* A line ended at the LF i: the head's end, or its first line. */
            if ((i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') ||
                memchr(buf, '\n', i) == NULL) {
                *mark = i + 1;
                return true;
            }
            continue;
        }
        if (b == '\n' || !ph_h1_is_field_byte(b)) {
            *mark = i + 1;
            return true;
        }
    }
    if (*mark < len)
        *mark = len;
    return false;
}

bool ph_h1_name_is(const uint8_t *n, size_t nlen, const char *lit)
{
    if (strlen(lit) != nlen)
        return false;
    for (size_t i = 0; i < nlen; i++)
        if (ph_ascii_lower(n[i]) != ph_ascii_lower((unsigned char)lit[i]))
            return false;
    return true;
}

static ph_h1_result refuse(ph_h1_head *out, ph_reason r, const char *msg, size_t off)
{
    out->reason = r;
    out->message = msg;
    out->error_offset = off;
    return PH_H1_REFUSED;
}

static ph_h1_span span(size_t off, size_t len)
{
    return (ph_h1_span){ (uint32_t)off, (uint32_t)len };
}

/* The end of the line starting at pos: 1 with *cr at its CR, 0 when no line
 * end yet, -1 refused (bare LF, bare CR, or a control byte: *reason). */
static int line_end(const uint8_t *buf, size_t len, size_t pos, size_t *cr, ph_h1_head *out,
                    ph_reason ctl_reason)
{
    for (size_t i = pos; i < len; i++) {
        uint8_t b = buf[i];
        if (b == '\n') {
            refuse(out, PH_REASON_HTTP_BARE_LF, "LF without CR: lines end in CRLF", i);
            return -1;
        }
        if (b == '\r') {
            if (i + 1 >= len)
                return 0;
            if (buf[i + 1] != '\n') {
                refuse(out, PH_REASON_HTTP_BARE_CR, "CR not followed by LF", i);
                return -1;
            }
            *cr = i;
            return 1;
        }
        if (!ph_h1_is_field_byte(b)) {
            refuse(out, ctl_reason, "control byte in the head", i);
            return -1;
        }
    }
    return 0;
}

/* "HTTP/1.1" or "HTTP/1.0" at p (8 bytes available): the minor version, or
 * -1. */
static int http_version(const uint8_t *p)
{
    if (memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
        return -1;
    return p[7] - '0';
}

#define METHOD_MAX 32

static ph_h1_result request_line(const uint8_t *buf, size_t end, ph_h1_head *out)
{
    size_t i = 0;
    while (i < end && ph_h1_is_tchar(buf[i]))
        i++;
    if (i == 0 || i > METHOD_MAX || i >= end || buf[i] != ' ')
        return refuse(out, PH_REASON_HTTP_BAD_REQUEST_LINE, "malformed request line: bad method",
                      i);
    out->method = span(0, i);
    size_t t = ++i;
    while (i < end && buf[i] > 0x20 && buf[i] < 0x7f)
        i++;
    if (i - t > PH_H1_TARGET_MAX)
        return refuse(out, PH_REASON_HTTP_TARGET_TOO_LONG, "request target too long", t);
    if (i == t || i >= end || buf[i] != ' ')
        return refuse(out, PH_REASON_HTTP_BAD_REQUEST_LINE,
                      "malformed request line: bad request-target", i);
    out->target = span(t, i - t);
    /* RFC 9112 section 3.2: the form follows from the method and the
     * target's first byte; what an absolute-form target holds (its scheme
     * included) is the guard's URL parser's to judge. */
    if (out->method.len == 7 && memcmp(buf, "CONNECT", 7) == 0)
        out->form = PH_H1_FORM_AUTHORITY;
    else if (buf[t] == '/')
        out->form = PH_H1_FORM_ORIGIN;
    else if (i - t == 1 && buf[t] == '*')
        out->form = PH_H1_FORM_ASTERISK;
    else
        out->form = PH_H1_FORM_ABSOLUTE;
    i++;
    if (end - i != 8 || (out->version_minor = http_version(buf + i)) < 0)
        return refuse(out, PH_REASON_HTTP_BAD_REQUEST_LINE,
                      "malformed request line: HTTP/1.1 or HTTP/1.0 expected", i);
    return PH_H1_DONE;
}

static ph_h1_result status_line(const uint8_t *buf, size_t end, ph_h1_head *out)
{
    if (end < 12 || (out->version_minor = http_version(buf)) < 0 || buf[8] != ' ' ||
        !ph_is_digit(buf[9]) || !ph_is_digit(buf[10]) || !ph_is_digit(buf[11]) || buf[9] == '0' ||
        (end > 12 && buf[12] != ' '))
        return refuse(out, PH_REASON_UPSTREAM_BAD_RESPONSE,
                      "malformed status line: HTTP/1.x, a space, 3 digits expected", 0);
    out->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    out->reason_phrase = end > 12 ? span(13, end - 13) : span(12, 0);
    return PH_H1_DONE;
}

/* 1*DIGIT, no sign, no space, no list, at most PH_H1_LENGTH_MAX. */
static bool parse_length(const uint8_t *v, size_t len, uint64_t *out)
{
    uint64_t n = 0;
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!ph_is_digit(v[i]))
            return false;
        uint64_t d = (uint64_t)(v[i] - '0');
        /* Checked before the multiplication: a 20-digit value can wrap
         * uint64_t back into range (18446744073709551617 would be 1). */
        if (n > (PH_H1_LENGTH_MAX - d) / 10)
            return false;
        n = n * 10 + d;
    }
    *out = n;
    return true;
}

/* Sets conn_close / conn_keep_alive from one Connection field value. */
static void connection_tokens(const uint8_t *v, size_t len, ph_h1_head *out)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
            i++;
        if (ph_h1_name_is(v + s, i - s, "close"))
            out->conn_close = true;
        else if (ph_h1_name_is(v + s, i - s, "keep-alive"))
            out->conn_keep_alive = true;
    }
}

typedef struct framing_seen {
    bool cl, te;
    size_t te_off;
} framing_seen;

static ph_h1_result field_line(const uint8_t *buf, size_t pos, size_t end, ph_h1_head *out,
                               framing_seen *seen)
{
    if (buf[pos] == ' ' || buf[pos] == '\t')
        return refuse(out, PH_REASON_HTTP_OBS_FOLD, "line folding (obs-fold) is not accepted", pos);
    size_t i = pos;
    while (i < end && ph_h1_is_tchar(buf[i]))
        i++;
    if (i < end && i > pos && (buf[i] == ' ' || buf[i] == '\t'))
        return refuse(out, PH_REASON_HTTP_BAD_FIELD, "whitespace between field name and ':'", i);
    if (i == pos || i >= end || buf[i] != ':')
        return refuse(out, PH_REASON_HTTP_BAD_FIELD, "bad field name", i);
    size_t nlen = i - pos;
    size_t v = i + 1, vend = end;
    while (v < vend && (buf[v] == ' ' || buf[v] == '\t'))
        v++;
    while (vend > v && (buf[vend - 1] == ' ' || buf[vend - 1] == '\t'))
        vend--;
    if (out->nfields >= PH_H1_FIELDS_MAX)
        return refuse(out, PH_REASON_HTTP_HEAD_TOO_LARGE, "too many header fields", pos);
    ph_h1_field *f = &out->fields[out->nfields];
    f->name = span(pos, nlen);
    f->value = span(v, vend - v);
    const uint8_t *name = buf + pos, *val = buf + v;
    size_t vlen = vend - v;
    bool connect = out->form == PH_H1_FORM_AUTHORITY;
    if (ph_h1_name_is(name, nlen, "content-length")) {
        /* A CONNECT has no content: a length on one is a client bug or
         * bytes meant to pass the head unnoticed (its tunnel's). */
        if (connect)
            return refuse(out, PH_REASON_HTTP_BAD_CONTENT_LENGTH,
                          "Content-Length on a CONNECT, which has no content", pos);
        if (seen->cl)
            return refuse(out, PH_REASON_HTTP_BAD_CONTENT_LENGTH, "several Content-Length fields",
                          pos);
        seen->cl = true;
        out->has_content_length = true;
        if (!parse_length(val, vlen, &out->content_length))
            return refuse(out, PH_REASON_HTTP_BAD_CONTENT_LENGTH,
                          "Content-Length is not one decimal number in range", v);
    } else if (ph_h1_name_is(name, nlen, "transfer-encoding")) {
        if (connect)
            return refuse(out, PH_REASON_HTTP_BAD_TRANSFER_ENCODING,
                          "Transfer-Encoding on a CONNECT, which has no content", pos);
        if (seen->te)
            return refuse(out, PH_REASON_HTTP_BAD_TRANSFER_ENCODING,
                          "several Transfer-Encoding fields", pos);
        seen->te = true;
        seen->te_off = pos;
        if (!ph_h1_name_is(val, vlen, "chunked"))
            return refuse(out, PH_REASON_HTTP_BAD_TRANSFER_ENCODING,
                          "Transfer-Encoding other than exactly \"chunked\"", v);
    } else if (ph_h1_name_is(name, nlen, "connection")) {
        connection_tokens(val, vlen, out);
    } else if (ph_h1_name_is(name, nlen, "expect")) {
        if (ph_h1_name_is(val, vlen, "100-continue"))
            out->expect_continue = true;
    } else if (ph_h1_name_is(name, nlen, "host")) {
        if (out->host_field >= 0)
            return refuse(out, PH_REASON_HTTP_BAD_FIELD, "several Host fields", pos);
        out->host_field = (int)out->nfields;
    } else if (ph_h1_name_is(name, nlen, "proxy-authorization")) {
        if (out->proxy_auth_field >= 0)
            return refuse(out, PH_REASON_HTTP_BAD_FIELD, "several Proxy-Authorization fields",
                          pos);
        out->proxy_auth_field = (int)out->nfields;
    }
    out->nfields++;
    return PH_H1_DONE;
}

/* A target already longer than the limit before its line is complete:
 * the same method and target scan as request_line, so the line, once
 * complete, would be refused for the same reason. */
static bool target_overlong(const uint8_t *buf, size_t len)
{
    size_t i = 0;
    while (i < len && ph_h1_is_tchar(buf[i]))
        i++;
    if (i == 0 || i > METHOD_MAX || i >= len || buf[i] != ' ')
        return false;
    size_t t = ++i;
    while (i < len && buf[i] > 0x20 && buf[i] < 0x7f)
        i++;
    return i - t > PH_H1_TARGET_MAX;
}

/* A refusal of a CONNECT's request line is the guard's parse_error: the
 * line after "CONNECT " is the destination (authority, then the version),
 * and whatever breaks it (a byte no authority holds, the line ending inside
 * the target, a target over the limit, anything but " HTTP/1.x" after it)
 * is a malformed authority, which the proxy must answer as
 * ph_decide_connect answers it (the parity of DESIGN section 2,
 * tests/proxy/proxy_parity.c). The message still says what broke it. */
static ph_h1_result line_refused(ph_h1_head *out, bool connect_line)
{
    if (connect_line)
        out->reason = PH_REASON_PARSE_ERROR;
    return PH_H1_REFUSED;
}

static ph_h1_result parse_head(const uint8_t *buf, size_t len, bool request, bool was_head,
                               ph_h1_head *out)
{
    memset(out, 0, offsetof(ph_h1_head, fields)); /* the fields array is filled as read */
    out->host_field = out->proxy_auth_field = -1;
    out->reason = PH_REASON_ALLOWED;
    out->message = NULL;
    out->error_offset = 0;
    size_t max = request ? PH_H1_REQUEST_HEAD_MAX : PH_H1_RESPONSE_HEAD_MAX;
    size_t scan = len < max ? len : max;
    ph_reason line_reason = request ? PH_REASON_HTTP_BAD_REQUEST_LINE
                                    : PH_REASON_UPSTREAM_BAD_RESPONSE;
    bool connect_line = request && len >= 8 && memcmp(buf, "CONNECT ", 8) == 0;
    size_t cr = 0, pos = 0;
    framing_seen seen = { 0 };
    int e = line_end(buf, scan, 0, &cr, out, line_reason);
    if (e < 0)
        return line_refused(out, connect_line);
    if (e == 0) {
        if (request && target_overlong(buf, scan)) {
            refuse(out, PH_REASON_HTTP_TARGET_TOO_LONG, "request target too long", 0);
            return line_refused(out, connect_line);
        }
        goto incomplete;
    }
    ph_h1_result r = request ? request_line(buf, cr, out) : status_line(buf, cr, out);
    if (r != PH_H1_DONE)
        return line_refused(out, connect_line);
    pos = cr + 2;
    for (;;) {
        e = line_end(buf, scan, pos, &cr, out, PH_REASON_HTTP_BAD_FIELD);
        if (e < 0)
            return PH_H1_REFUSED;
        if (e == 0)
            goto incomplete;
        if (cr == pos)
            break;
        r = field_line(buf, pos, cr, out, &seen);
        if (r != PH_H1_DONE)
            return r;
        pos = cr + 2;
    }
    out->head_len = pos + 2;
    if (seen.cl && seen.te)
        return refuse(out, PH_REASON_HTTP_CL_TE, "Content-Length together with Transfer-Encoding",
                      seen.te_off);
    if (seen.te && out->version_minor == 0)
        return refuse(out, PH_REASON_HTTP_BAD_TRANSFER_ENCODING,
                      "Transfer-Encoding in an HTTP/1.0 message", seen.te_off);
    if (request) {
        out->body = seen.te ? PH_H1_BODY_CHUNKED : seen.cl ? PH_H1_BODY_LENGTH : PH_H1_BODY_NONE;
    } else if (was_head || out->status < 200 || out->status == 204 || out->status == 304) {
        out->body = PH_H1_BODY_NONE;
    } else {
        out->body = seen.te ? PH_H1_BODY_CHUNKED : seen.cl ? PH_H1_BODY_LENGTH : PH_H1_BODY_CLOSE;
    }
    return PH_H1_DONE;

incomplete:
    if (len >= max) {
        refuse(out, PH_REASON_HTTP_HEAD_TOO_LARGE, "the head exceeds its size limit", max);
        return line_refused(out, connect_line && pos == 0);
    }
    /* A valid prefix: the spans filled so far mean nothing yet. */
    memset(out, 0, offsetof(ph_h1_head, fields)); /* the fields array is filled as read */
    out->host_field = out->proxy_auth_field = -1;
    out->reason = PH_REASON_ALLOWED;
    out->message = NULL;
    out->error_offset = 0;
    return PH_H1_INCOMPLETE;
}

ph_h1_result ph_h1_parse_request(const uint8_t *buf, size_t len, ph_h1_head *out)
{
    return parse_head(buf, len, true, false, out);
}

ph_h1_result ph_h1_parse_response(const uint8_t *buf, size_t len, bool request_was_head,
                                  ph_h1_head *out)
{
    return parse_head(buf, len, false, request_was_head, out);
}

bool ph_h1_connection_lists(const uint8_t *buf, const ph_h1_head *head, const uint8_t *n,
                            size_t nlen)
{
    for (unsigned k = 0; k < head->nfields; k++) {
        const ph_h1_field *f = &head->fields[k];
        if (!ph_h1_name_is(buf + f->name.off, f->name.len, "connection"))
            continue;
        const uint8_t *v = buf + f->value.off;
        size_t i = 0, len = f->value.len;
        while (i < len) {
            while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
                i++;
            size_t s = i;
            while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
                i++;
            if (i > s && i - s == nlen) {
                bool eq = true;
                for (size_t j = 0; j < nlen && eq; j++)
                    eq = ph_ascii_lower(v[s + j]) == ph_ascii_lower(n[j]);
                if (eq)
                    return true;
            }
        }
    }
    return false;
}

/* ---- chunked ------------------------------------------------------------- */

enum {
    C_SIZE = 0,   /* hex digits of the chunk size */
    C_SIZE_WS,    /* whitespace after the size (BWS before ';') */
    C_EXT,        /* a chunk extension, up to CR */
    C_SIZE_LF,    /* the LF of the chunk-size line */
    C_DATA,
    C_DATA_CR,
    C_DATA_LF,
    C_TRAILER,    /* the start of a trailer line (or the final CRLF) */
    C_TRAILER_NAME,
    C_TRAILER_VALUE,
    C_TRAILER_LF,
    C_END_LF,
    C_DONE,
    C_REFUSED,
};

#define TRAILER_FIELDS_MAX 64

void ph_h1_chunked_init(ph_h1_chunked *c)
{
    memset(c, 0, sizeof *c);
}

static ph_h1_result chunk_refuse(ph_h1_chunked *c, const char *msg, ph_h1_chunk_step *step,
                                 size_t at)
{
    c->state = C_REFUSED;
    c->reason = PH_REASON_HTTP_BAD_CHUNK;
    c->message = msg;
    step->consumed = at;
    return PH_H1_REFUSED;
}

ph_h1_result ph_h1_chunked_step(ph_h1_chunked *c, const uint8_t *in, size_t len,
                                ph_h1_chunk_step *step)
{
    step->consumed = step->data_off = step->data_len = 0;
    if (c->state == C_REFUSED)
        return PH_H1_REFUSED;
    if (c->state == C_DONE)
        return PH_H1_DONE;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = in[i];
        switch (c->state) {
        case C_SIZE:
        case C_SIZE_WS:
        case C_EXT:
            if (++c->line_len > PH_H1_CHUNK_LINE_MAX)
                return chunk_refuse(c, "chunk-size line too long", step, i);
            if (b == '\r') {
                if (c->digits == 0)
                    return chunk_refuse(c, "chunk size missing", step, i);
                c->state = C_SIZE_LF;
            } else if (c->state == C_SIZE && ph_is_hex(b)) {
                if (c->remaining > (PH_H1_LENGTH_MAX >> 4))
                    return chunk_refuse(c, "chunk size overflows", step, i);
                c->remaining = c->remaining * 16 +
                               (uint64_t)(ph_is_digit(b) ? b - '0' : ph_ascii_lower(b) - 'a' + 10);
                c->digits++;
            } else if (c->state == C_EXT) {
                if (!ph_h1_is_field_byte(b))
                    return chunk_refuse(c, "control byte in a chunk extension", step, i);
            } else if (b == ' ' || b == '\t') {
                if (c->digits == 0)
                    return chunk_refuse(c, "chunk size missing", step, i);
                c->state = C_SIZE_WS;
            } else if (b == ';') {
                if (c->digits == 0)
                    return chunk_refuse(c, "chunk size missing", step, i);
                c->state = C_EXT;
            } else {
                return chunk_refuse(c, "bad byte in a chunk size", step, i);
            }
            break;
        case C_SIZE_LF:
            if (b != '\n')
                return chunk_refuse(c, "chunk-size line not ending in CRLF", step, i);
            c->line_len = c->digits = 0;
            c->state = c->remaining == 0 ? C_TRAILER : C_DATA;
            break;
        case C_DATA: {
            size_t n = len - i;
            if (n > c->remaining)
                n = (size_t)c->remaining;
            c->remaining -= n;
            c->total += n;
            if (c->remaining == 0)
                c->state = C_DATA_CR;
            step->data_off = i;
            step->data_len = n;
            step->consumed = i + n;
            return PH_H1_INCOMPLETE;
        }
        case C_DATA_CR:
        case C_DATA_LF:
            if (b != (c->state == C_DATA_CR ? '\r' : '\n'))
                return chunk_refuse(c, "chunk data not followed by CRLF", step, i);
            c->state = c->state == C_DATA_CR ? C_DATA_LF : C_SIZE;
            break;
        case C_TRAILER:
        case C_TRAILER_NAME:
        case C_TRAILER_VALUE:
        case C_TRAILER_LF:
            if (++c->trailer_bytes > PH_H1_TRAILERS_MAX)
                return chunk_refuse(c, "trailers too large", step, i);
            if (c->state == C_TRAILER) {
                if (b == '\r') {
                    c->state = C_END_LF;
                } else if (ph_h1_is_tchar(b)) {
                    if (++c->trailer_fields > TRAILER_FIELDS_MAX)
                        return chunk_refuse(c, "too many trailer fields", step, i);
                    c->state = C_TRAILER_NAME;
                } else {
                    return chunk_refuse(c, "malformed trailer field (or obs-fold)", step, i);
                }
            } else if (c->state == C_TRAILER_NAME) {
                if (b == ':')
                    c->state = C_TRAILER_VALUE;
                else if (!ph_h1_is_tchar(b))
                    return chunk_refuse(c, "malformed trailer field name", step, i);
            } else if (c->state == C_TRAILER_VALUE) {
                if (b == '\r')
                    c->state = C_TRAILER_LF;
                else if (!ph_h1_is_field_byte(b))
                    return chunk_refuse(c, "control byte in a trailer field", step, i);
            } else {
                if (b != '\n')
                    return chunk_refuse(c, "trailer line not ending in CRLF", step, i);
                c->state = C_TRAILER;
            }
            break;
        case C_END_LF:
            if (b != '\n')
                return chunk_refuse(c, "chunked body not ending in CRLF", step, i);
            c->state = C_DONE;
            step->consumed = i + 1;
            return PH_H1_DONE;
        default:
            return chunk_refuse(c, "decoder state", step, i);
        }
    }
    step->consumed = len;
    return PH_H1_INCOMPLETE;
}
