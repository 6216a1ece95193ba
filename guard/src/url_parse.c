/*
 * url_parse.c - the strict URL and CONNECT-authority parser (pinhole/url.h).
 *
 * Shape of the parse, and why in this order:
 *   1. every byte of the input is printable ASCII and not '\' (WHATWG strips
 *      tab/CR/LF and reads '\' as '/', so such input has two readings);
 *   2. structure: scheme, exactly "//", the authority up to the first '/';
 *   3. the authority is split into host and port by the one routine shared
 *      with CONNECT (parse_host_port);
 *   4. the host is decided an IP literal or not before any other host rule,
 *      then it must be a canonical name (ph_host_check) whose "xn--" labels
 *      are valid A-labels (host_alabel.c), then the port. The usual host,
 *      canonical once folded to lowercase, is recognised in one pass first
 *      and skips the checks it cannot fail (parse_host_port says why).
 * No allocation; the canonical host is written into the caller's struct.
 */
#include "pinhole/url.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "pinhole/diag.h"
#include "host_alabel-int.h"
#include "table-int.h"

/* What the caller of parse_host_port gets back. */
typedef struct host_port {
    char *host;        /* PH_HOST_MAX + 1 bytes */
    size_t host_len;
    uint16_t port;
    bool port_explicit;
    ph_reason reason;
} host_port;

/* Every refusal leaves no host: hp->host becomes "". */
static ph_status refuse(host_port *hp, ph_diag *diag, size_t off, const char *msg)
{
    hp->host[0] = '\0';
    hp->reason = PH_REASON_PARSE_ERROR;
    return ph_diag_set(diag, PH_E_INVAL, off, "%s", msg);
}

static ph_status refuse_ip(host_port *hp, ph_diag *diag, size_t off, const char *what,
                           const char *text, size_t n)
{
    hp->host[0] = '\0';
    hp->reason = PH_REASON_IP_LITERAL;
    return ph_diag_set(diag, PH_E_DENIED, off,
                       "%s \"%.*s\" is an IP address literal: destinations must be host names",
                       what, (int)(n > 64 ? 64 : n), text);
}

/* Step 1: the bytes every URL and authority is made of: printable ASCII
 * (0x21..0x7e) other than '\\'. */
static bool byte_forbidden(unsigned char c)
{
    return c <= 0x20 || c >= 0x7f || c == '\\';
}

/*
 * byte_forbidden for the eight bytes of w at once (SWAR): the result has the
 * high bit of each forbidden byte set and every other bit clear, whatever the
 * byte order. Each test works on a byte's low seven bits, where adding at
 * most 0x7f cannot carry into the next byte, so one byte never disturbs
 * another; a byte >= 0x80 is forbidden by its own high bit.
 */
static uint64_t word_forbidden_bytes(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
    uint64_t low7 = w & ~high;
    uint64_t below_0x21 = ~(low7 + ones * (0x80 - 0x21)); /* high bit: low7 < 0x21 */
    uint64_t is_0x7f = low7 + ones * (0x80 - 0x7f);        /* high bit: low7 == 0x7f */
    uint64_t is_bslash = ~((low7 ^ ones * '\\') + ones * 0x7f); /* high bit: low7 == '\\' */
    return (w | below_0x21 | is_0x7f | is_bslash) & high;
}

/* The index of the first forbidden byte of s[0..n), or n. Whole words are
 * skipped while none of their bytes is forbidden (a URL is mostly allowed
 * bytes); the word that has one, and the tail, are read byte by byte. */
static size_t first_forbidden_byte(const char *s, size_t n)
{
    size_t i = 0;
    for (; n - i >= sizeof(uint64_t); i += sizeof(uint64_t)) {
        uint64_t w;
        memcpy(&w, s + i, sizeof w);
        if (word_forbidden_bytes(w) != 0)
            break;
    }
    for (; i < n; i++)
        if (byte_forbidden((unsigned char)s[i]))
            return i;
    return n;
}

/*
 * ph_ascii_lower for the eight ASCII bytes of w at once (SWAR): each byte in
 * 'A'..'Z' gets 0x20 added, every other byte is unchanged. Only for bytes
 * below 0x80 (the input passed first_forbidden_byte): then the sums below
 * stay inside their byte.
 */
static uint64_t word_ascii_lower(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101u, high = ones * 0x80;
    uint64_t from_a = w + ones * (0x80 - 'A');       /* high bit: byte >= 'A' */
    uint64_t past_z = w + ones * (0x80 - 'Z' - 1);   /* high bit: byte > 'Z' */
    uint64_t upper = from_a & ~past_z & high;        /* high bit: 'A' <= byte <= 'Z' */
    return w | (upper >> 2);                         /* 0x80 >> 2 == 0x20 */
}

/* dst[0..n) = src[0..n) folded to lowercase; src is ASCII (passed
 * first_forbidden_byte). */
static void copy_ascii_lower(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; n - i >= sizeof(uint64_t); i += sizeof(uint64_t)) {
        uint64_t w;
        memcpy(&w, src + i, sizeof w);
        w = word_ascii_lower(w);
        memcpy(dst + i, &w, sizeof w);
    }
    for (; i < n; i++)
        dst[i] = (char)ph_ascii_lower((unsigned char)src[i]);
}

static ph_status refuse_byte(host_port *hp, ph_diag *diag, size_t off, unsigned char c)
{
    hp->host[0] = '\0';
    hp->reason = PH_REASON_PARSE_ERROR;
    const char *what;
    switch (c) {
    case '\0': what = "NUL byte"; break;
    case '\t': what = "tab"; break;
    case '\r': what = "carriage return"; break;
    case '\n': what = "line feed"; break;
    case ' ': what = "space"; break;
    case '\\': what = "backslash"; break;
    case 0x7f: what = "DEL byte"; break;
    default: what = c >= 0x80 ? "non-ASCII byte" : "control byte"; break;
    }
    return ph_diag_set(diag, PH_E_INVAL, off,
                       "%s (0x%02x) not allowed: other URL parsers strip or reinterpret it",
                       what, c);
}

/* "1".."65535", decimal, no sign, no leading zero. */
static ph_status parse_port(const char *p, size_t n, size_t off, host_port *hp, ph_diag *diag)
{
    if (n == 0)
        return refuse(hp, diag, off, "empty port after ':'");
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ':')
            return refuse(hp, diag, off + i, "more than one ':' in the authority");
        if (!ph_is_digit((unsigned char)p[i]))
            return refuse(hp, diag, off + i, "port is not a decimal number");
    }
    /* A leading zero is named as such however long the number is: "018080"
     * is a spelling problem, not a range problem. */
    if (p[0] == '0')
        return refuse(hp, diag, off,
                      n == 1 ? "port 0 is not allowed" : "port has a leading zero");
    if (n > 5)
        return refuse(hp, diag, off + 5, "port out of range (1..65535)");
    uint32_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (uint32_t)(p[i] - '0');
    if (v > 65535)
        return refuse(hp, diag, off, "port out of range (1..65535)");
    hp->port = (uint16_t)v;
    hp->port_explicit = true;
    return PH_OK;
}

/* A bracketed host "[...]" at s (n bytes, s[0] == '['): always refused, as an
 * IP literal when the inside is an IPv6 address, else as a parse error.
 * *consumed gets the length up to and including ']'. */
static ph_status bracketed_host(const char *s, size_t n, size_t off, host_port *hp,
                                ph_diag *diag)
{
    const char *close = memchr(s, ']', n);
    if (close == NULL)
        return refuse(hp, diag, off, "'[' without a closing ']' in the host");
    size_t inner = (size_t)(close - s) - 1;
    size_t after = (size_t)(close - s) + 1;
    if (after < n && s[after] != ':')
        return refuse(hp, diag, off + after, "unexpected character after ']'");
    const char *pct = memchr(s + 1, '%', inner);
    if (pct != NULL)
        return refuse(hp, diag, off + (size_t)(pct - s),
                      "zone identifier ('%') in a bracketed address");
    char buf[64];
    unsigned char bin[16];
    if (inner > 0 && inner < sizeof buf) {
        memcpy(buf, s + 1, inner);
        buf[inner] = '\0';
        if (inet_pton(AF_INET6, buf, bin) == 1)
            return refuse_ip(hp, diag, off, "IPv6 address", s, after);
    }
    return refuse(hp, diag, off + 1, "bracketed host is not a valid IPv6 address");
}

/* Delimiters that end or split an authority in some parser: each one is a
 * place where two parsers may disagree on the host, so none may appear.
 * Refuses the first one in s[from..n) of the authority s (s[0..from) is
 * known to hold none), else PH_OK. */
static ph_status refuse_delimiters(const char *s, size_t from, size_t n, size_t off,
                                   host_port *hp, ph_diag *diag)
{
    for (size_t i = from; i < n; i++) {
        switch (s[i]) {
        case '@':
            return refuse(hp, diag, off + i, "userinfo ('@') is not allowed in the authority");
        case '?':
            return refuse(hp, diag, off + i,
                          "'?' in or ending the authority: put a '/' before the query");
        case '#':
            return refuse(hp, diag, off + i,
                          "'#' in or ending the authority: put a '/' before the fragment");
        case '/':
            return refuse(hp, diag, off + i, "'/' in the authority");
        case '%':
            /* We never decode percent-encoding, so we cannot say what such a
             * host names (WHATWG decodes it: "%31%32%37.0.0.1" is 127.0.0.1).
             * Inside brackets it is a zone id, refused by bracketed_host. */
            if (s[0] != '[')
                return refuse(hp, diag, off + i,
                              "percent-encoding is not allowed in the authority");
            break;
        case '[':
        case ']':
            /* A bracketed host's own structure is checked by bracketed_host. */
            if (s[0] != '[')
                return refuse(hp, diag, off + i, "'[' or ']' inside a host name");
            break;
        default:
            break;
        }
    }
    return PH_OK;
}

/*
 * Steps 3-4: s[0..n) is an authority "host[:port]" found at byte off of the
 * input; its bytes passed first_forbidden_byte. Fills hp, or refuses.
 */
static ph_status parse_host_port(const char *s, size_t n, size_t off, bool port_required,
                                 uint16_t default_port, host_port *hp, ph_diag *diag)
{
    hp->port = 0;
    hp->port_explicit = false;
    hp->host_len = 0;
    hp->host[0] = '\0';
    if (n == 0)
        return refuse(hp, diag, off, "empty host");
    const char *colon = memchr(s, ':', n);
    size_t hlen = colon ? (size_t)(colon - s) : n;

    /* The common case first, in one pass: a host that is canonical once
     * folded to lowercase. ph_tab_host_canonical accepts only names that
     * ph_host_check accepts (so no IP literal either), and before folding
     * their bytes were [A-Za-z0-9.-], so no delimiter: only the port is left
     * to walk. Any other host takes every check below in order, which
     * decides the refusal and its offset. */
    bool canonical = false;
    if (hlen > 0 && hlen <= PH_HOST_MAX) {
        copy_ascii_lower(hp->host, s, hlen);
        hp->host[hlen] = '\0';
        canonical = ph_tab_host_canonical(hp->host, hlen);
    }
    ph_status st = refuse_delimiters(s, canonical ? hlen : 0, n, off, hp, diag);
    if (st != PH_OK)
        return st;
    size_t where = 0;
    if (!canonical) {
        if (s[0] == '[')
            return bracketed_host(s, n, off, hp, diag);
        if (hlen == 0) {
            bool v6ish = colon != NULL && memchr(colon + 1, ':', n - 1) != NULL;
            return refuse(hp, diag, off,
                          v6ish ? "empty host (an IPv6 address needs brackets)" : "empty host");
        }
        /* IP literal or not, before any other rule looks at the host (the
         * folded copy above, when it fits, is what ph_host_check reads). */
        if (hlen > PH_HOST_MAX) {
            if (ph_host_is_ip_literal(s, hlen))
                return refuse_ip(hp, diag, off, "host", s, hlen);
            return refuse(hp, diag, off + PH_HOST_MAX, "host name longer than 253 bytes");
        }
        ph_host_error he = ph_host_check(hp->host, hlen, &where);
        if (he == PH_HOST_IP_LITERAL)
            return refuse_ip(hp, diag, off, "host", s, hlen);
        if (he != PH_HOST_OK) {
            if (he == PH_HOST_BAD_CHAR && s[where] == ':')
                return refuse(hp, diag, off + where, "unbracketed ':' in the host");
            return refuse(hp, diag, off + where, ph_host_error_string(he));
        }
    }
    /* WHATWG parsers refuse an invalid "xn--" label, RFC 3986 ones pass it
     * on: two answers, so it is refused (host_alabel.c says why). */
    if (!ph_host_a_labels_valid(hp->host, hlen, &where))
        return refuse(hp, diag, off + where,
                      "invalid IDN A-label (\"xn--\" label that is not valid Punycode/IDNA)");

    if (colon != NULL) {
        st = parse_port(colon + 1, n - hlen - 1, off + hlen + 1, hp, diag);
        if (st != PH_OK)
            return st;
    } else if (port_required) {
        return refuse(hp, diag, off + n, "port required (host:port)");
    } else {
        hp->port = default_port;
    }
    hp->host_len = hlen;
    hp->reason = PH_REASON_ALLOWED;
    return PH_OK;
}

/* RFC 3986 scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). */
static bool is_scheme_char(unsigned char c, bool first)
{
    if (ph_is_lower(c) || ph_is_upper(c))
        return true;
    return !first && (ph_is_digit(c) || c == '+' || c == '-' || c == '.');
}

static bool scheme_is(const char *s, size_t n, const char *lower)
{
    if (strlen(lower) != n) /* a constant once inlined: most schemes are not compared at all */
        return false;
    size_t i = 0;
    for (; i < n && lower[i]; i++)
        if (ph_ascii_lower((unsigned char)s[i]) != lower[i])
            return false;
    return i == n && lower[i] == '\0';
}

static void url_reset(ph_url *out)
{
    out->reason = PH_REASON_PARSE_ERROR;
    out->scheme = PH_SCHEME_NONE;
    out->port = 0;
    out->port_explicit = false;
    out->host_len = 0;
    out->path_offset = 0;
    out->path_len = 0;
    out->host[0] = '\0';
}

ph_status ph_url_parse(const char *url, size_t len, ph_url *out, ph_diag *diag)
{
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no result buffer");
    url_reset(out);
    host_port hp = {.host = out->host, .reason = PH_REASON_PARSE_ERROR};
    if (url == NULL)
        return refuse(&hp, diag, 0, "no URL");
    if (len > PH_URL_MAX_LEN)
        return refuse(&hp, diag, PH_URL_MAX_LEN, "URL longer than 8192 bytes");
    size_t bad = first_forbidden_byte(url, len);
    if (bad < len)
        return refuse_byte(&hp, diag, bad, (unsigned char)url[bad]);

    size_t i = 0;
    while (i < len && is_scheme_char((unsigned char)url[i], i == 0))
        i++;
    if (i == 0 || i == len || url[i] != ':')
        return refuse(&hp, diag, i, "missing scheme (http:// or https://)");
    if (scheme_is(url, i, "http")) {
        out->scheme = PH_SCHEME_HTTP;
    } else if (scheme_is(url, i, "https")) {
        out->scheme = PH_SCHEME_HTTPS;
    } else {
        hp.reason = PH_REASON_PARSE_ERROR;
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "unsupported scheme \"%.*s\": only http and https",
                           (int)(i > 32 ? 32 : i), url);
    }
    i++; /* ':' */
    if (i + 2 > len || url[i] != '/' || url[i + 1] != '/') {
        out->scheme = PH_SCHEME_NONE;
        return refuse(&hp, diag, i, "missing \"//\" after the scheme");
    }
    i += 2;
    if (i < len && url[i] == '/') {
        out->scheme = PH_SCHEME_NONE;
        return refuse(&hp, diag, i, "more than two slashes after the scheme");
    }

    /* The authority ends at '/' or '?' (RFC 3986 section 3.2): in
     * "http://a.com?q" the path is empty (the target "/") and "q" the
     * query. A parser that ends the authority only at '/' reads
     * "http://a.com?@b.com/" as userinfo "a.com?" and host b.com, so an '@'
     * between that '?' and the first '/' is refused. '#' still may not end
     * the authority (refuse_delimiters). */
    size_t auth_start = i;
    size_t auth_end = i;
    while (auth_end < len && url[auth_end] != '/' && url[auth_end] != '?')
        auth_end++;
    ph_status st = parse_host_port(url + auth_start, auth_end - auth_start, auth_start, false,
                                   ph_scheme_default_port(out->scheme), &hp, diag);
    if (st == PH_OK && auth_end < len && url[auth_end] == '?') {
        const char *slash = memchr(url + auth_end, '/', len - auth_end);
        size_t upto = slash ? (size_t)(slash - url) : len;
        const char *at = memchr(url + auth_end, '@', upto - auth_end);
        if (at != NULL)
            st = refuse(&hp, diag, (size_t)(at - url),
                        "'@' after a '?' that ends the authority: a parser that ends it at "
                        "'/' reads userinfo there; put a '/' before the query");
    }
    if (st != PH_OK) {
        out->reason = hp.reason;
        out->scheme = PH_SCHEME_NONE;
        return st;
    }
    const char *frag = memchr(url + auth_end, '#', len - auth_end);
    out->reason = PH_REASON_ALLOWED;
    out->port = hp.port;
    out->port_explicit = hp.port_explicit;
    out->host_len = hp.host_len;
    out->path_offset = auth_end;
    out->path_len = (frag ? (size_t)(frag - url) : len) - auth_end;
    return PH_OK;
}

ph_status ph_authority_parse(const char *authority, size_t len, ph_authority *out,
                             ph_diag *diag)
{
    if (out == NULL)
        return ph_diag_set(diag, PH_E_INVAL, 0, "no result buffer");
    out->reason = PH_REASON_PARSE_ERROR;
    out->port = 0;
    out->host_len = 0;
    out->host[0] = '\0';
    host_port hp = {.host = out->host, .reason = PH_REASON_PARSE_ERROR};
    ph_status st;
    size_t bad;
    if (authority == NULL)
        st = refuse(&hp, diag, 0, "no authority");
    else if (len > PH_AUTHORITY_MAX_LEN)
        st = refuse(&hp, diag, PH_AUTHORITY_MAX_LEN, "authority longer than 259 bytes");
    else if ((bad = first_forbidden_byte(authority, len)) < len)
        st = refuse_byte(&hp, diag, bad, (unsigned char)authority[bad]);
    else
        st = parse_host_port(authority, len, 0, true, 0, &hp, diag);
    out->reason = hp.reason;
    if (st == PH_OK) {
        out->port = hp.port;
        out->host_len = hp.host_len;
    }
    return st;
}

const char *ph_scheme_name(ph_scheme scheme)
{
    switch (scheme) {
    case PH_SCHEME_HTTP: return "http";
    case PH_SCHEME_HTTPS: return "https";
    case PH_SCHEME_NONE: break;
    }
    return "";
}

uint16_t ph_scheme_default_port(ph_scheme scheme)
{
    switch (scheme) {
    case PH_SCHEME_HTTP: return 80;
    case PH_SCHEME_HTTPS: return 443;
    case PH_SCHEME_NONE: break;
    }
    return 0;
}

static ph_status finish_format(int n, char *buf, size_t cap, size_t *written)
{
    if (n < 0 || (size_t)n >= cap) {
        if (cap > 0)
            buf[0] = '\0';
        if (written)
            *written = 0;
        return PH_E_LIMIT;
    }
    if (written)
        *written = (size_t)n;
    return PH_OK;
}

ph_status ph_url_format_origin(const ph_url *u, char *buf, size_t cap, size_t *written)
{
    if (buf == NULL || cap == 0)
        return PH_E_LIMIT;
    buf[0] = '\0';
    if (written)
        *written = 0;
    if (u == NULL || u->reason != PH_REASON_ALLOWED || u->scheme == PH_SCHEME_NONE ||
        u->host_len == 0 || u->port == 0)
        return PH_E_INVAL;
    int n;
    if (u->port == ph_scheme_default_port(u->scheme))
        n = snprintf(buf, cap, "%s://%s", ph_scheme_name(u->scheme), u->host);
    else
        n = snprintf(buf, cap, "%s://%s:%u", ph_scheme_name(u->scheme), u->host,
                     (unsigned)u->port);
    return finish_format(n, buf, cap, written);
}

ph_status ph_format_host_port(const char *host, uint16_t port, char *buf, size_t cap,
                              size_t *written)
{
    if (buf == NULL || cap == 0)
        return PH_E_LIMIT;
    buf[0] = '\0';
    if (written)
        *written = 0;
    if (host == NULL || port == 0 || ph_host_check(host, strlen(host), NULL) != PH_HOST_OK)
        return PH_E_INVAL;
    int n = snprintf(buf, cap, "%s:%u", host, (unsigned)port);
    return finish_format(n, buf, cap, written);
}
