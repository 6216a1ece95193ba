/*
 * pinhole/url.h - the one strict parser for destination URLs (what a worker is
 * asked to dial) and CONNECT authorities (what a sandbox asks the proxy for).
 *
 * Both go through the same host and port rules, so a name means the same thing
 * to the guard and the proxy. The parser accepts a deliberately small subset
 * of URLs: docs/url.md lists exactly what is accepted and refused, and why.
 * In short:
 *   - scheme http or https (any case, canonicalized to lowercase), then "//";
 *   - authority = host [":" port], ending at the first '/' or at the end;
 *     no userinfo ('@'), no '?' or '#' in or ending the authority;
 *   - host: ASCII, folded to lowercase, then it must pass ph_host_check
 *     (pinhole/host.h); IP literals in any spelling (dotted, integer, octal,
 *     hex, shortened, bracketed IPv6 incl. mapped/compatible) are refused with
 *     PH_REASON_IP_LITERAL, decided before any other host rule; every "xn--"
 *     label must be a valid IDNA A-label (WHATWG parsers refuse the URL
 *     otherwise, RFC 3986 ones pass the label on);
 *   - port: decimal 1..65535, no leading zero, not empty; default 80 / 443;
 *   - anywhere in the input: no whitespace, control byte, DEL, non-ASCII
 *     byte or backslash (WHATWG parsers strip or reinterpret those, so the
 *     host another parser would see could differ).
 *
 * Whenever the WHATWG URL Standard and RFC 3986 (libcurl) would read another
 * host or port, the input is refused; tests/guard/test_url_differential.c
 * checks this against libcurl, scripts/url-differential.mjs against WHATWG.
 *
 * Results are plain structs filled in place: no allocation of ours (libidn2
 * allocates internally only while checking an xn-- label), single pass,
 * thread-safe (no global state).
 */
#ifndef PINHOLE_URL_H
#define PINHOLE_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/host.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest URL the parser looks at; longer input is a parse error. */
#define PH_URL_MAX_LEN 8192
/* Longest CONNECT authority: a 253-byte host, ':' and 5 port digits. */
#define PH_AUTHORITY_MAX_LEN (PH_HOST_MAX + 6)
/* Size of a buffer that always holds ph_url_format_origin's output
 * ("https://" + host + ":65535" + NUL). */
#define PH_URL_ORIGIN_MAX (8 + PH_HOST_MAX + 6 + 1)
/* Size of a buffer that always holds "host:port" + NUL. */
#define PH_HOST_PORT_MAX (PH_HOST_MAX + 6 + 1)

typedef enum ph_scheme {
    PH_SCHEME_NONE = 0, /* only in a refused result */
    PH_SCHEME_HTTP = 1,
    PH_SCHEME_HTTPS = 2,
} ph_scheme;

/*
 * A parsed URL. Every field is filled by ph_url_parse, on success and on
 * refusal (then host is "" and port 0, so a careless caller cannot dial it).
 */
typedef struct ph_url {
    ph_reason reason;     /* PH_REASON_ALLOWED (accepted), PH_REASON_PARSE_ERROR
                             or PH_REASON_IP_LITERAL */
    ph_scheme scheme;
    uint16_t port;        /* explicit port, or 80 / 443 by scheme */
    bool port_explicit;   /* true when the URL spelled a port */
    size_t host_len;      /* strlen(host) */
    size_t path_offset;   /* byte offset in the input where the path (and
                             query) starts: '/', '?' (an empty path before a
                             query) or the end of the input */
    size_t path_len;      /* bytes of path+query, up to (not including) a '#'
                             fragment; 0 means the request target is "/", and
                             one starting with '?' is "/" then that query */
    char host[PH_HOST_MAX + 1]; /* canonical host, NUL-terminated */
} ph_url;

/* A parsed CONNECT authority ("host:port", port required). */
typedef struct ph_authority {
    ph_reason reason;     /* as in ph_url */
    uint16_t port;
    size_t host_len;
    char host[PH_HOST_MAX + 1];
} ph_authority;

/*
 * Parses url[0..len) (need not be NUL-terminated; an embedded NUL is a parse
 * error) into *out, which the caller owns (usually on the stack).
 * Returns PH_OK when accepted (out->reason == PH_REASON_ALLOWED),
 * PH_E_DENIED for an IP literal (out->reason == PH_REASON_IP_LITERAL),
 * PH_E_INVAL for any other refusal (out->reason == PH_REASON_PARSE_ERROR) or
 * NULL arguments. On refusal diag (may be NULL) gets a one-line message and
 * the byte offset of the offending byte.
 */
PH_API ph_status ph_url_parse(const char *url, size_t len, ph_url *out, ph_diag *diag);

/*
 * Parses a CONNECT request-target authority "host:port" (RFC 9110 9.3.6) with
 * exactly the host and port rules of ph_url_parse; the port is required.
 * Returns and fills as ph_url_parse.
 */
PH_API ph_status ph_authority_parse(const char *authority, size_t len, ph_authority *out,
                                    ph_diag *diag);

/* Lowercase scheme name ("http", "https"; "" for PH_SCHEME_NONE). Static. */
PH_API const char *ph_scheme_name(ph_scheme scheme);

/* Default port of scheme (80, 443; 0 for PH_SCHEME_NONE). */
PH_API uint16_t ph_scheme_default_port(ph_scheme scheme);

/*
 * Writes the canonical origin of an accepted URL into buf[0..cap):
 * "scheme://host" when the port is the scheme's default, otherwise
 * "scheme://host:port". ph_url_parse of that text gives the same scheme, host
 * and port. Returns PH_OK, PH_E_INVAL when u was not accepted, or PH_E_LIMIT
 * when cap is too small (PH_URL_ORIGIN_MAX always suffices); buf is always
 * NUL-terminated when cap > 0. *written (may be NULL) gets strlen(buf).
 */
PH_API ph_status ph_url_format_origin(const ph_url *u, char *buf, size_t cap, size_t *written);

/*
 * Writes "host:port" (a CONNECT authority; ph_authority_parse of it gives the
 * same host and port) into buf[0..cap). host must be a canonical host name.
 * Same returns as ph_url_format_origin (PH_HOST_PORT_MAX always suffices).
 */
PH_API ph_status ph_format_host_port(const char *host, uint16_t port, char *buf, size_t cap,
                                     size_t *written);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_URL_H */
