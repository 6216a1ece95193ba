/*
 * pinhole/redirect.h - whether a worker may follow a redirect, and what it
 * must drop when it does. One rule for every HTTP client a worker uses (the
 * libcurl attachment, the Python package), so they decide alike.
 *
 * A Location header is a new, untrusted URL chosen by the server: it gets
 * the full decision again (an allowed host can redirect to
 * http://169.254.169.254/, to an IP literal, to a name off the list or to
 * an allowed name on another port), and the connection to it is resolved,
 * checked and pinned anew (pinhole/dial.h). On top of the decision:
 *   - hop limit: at most max_hops redirects in one chain (redirect_limit);
 *   - no downgrade: https redirected to http is refused unless asked for
 *     (redirect_downgrade);
 *   - a Location is resolved against the URL that answered (RFC 3986
 *     section 5.2: absolute, network-path "//host/...", absolute-path,
 *     relative path, query-only references; dot segments removed). Bytes
 *     that parsers read differently are refused (redirect_bad_location):
 *     whitespace, control bytes, DEL, non-ASCII bytes and backslashes (a
 *     WHATWG parser reads "/\evil.example" as "//evil.example"), an empty
 *     Location, a scheme other than http/https, and "http:" without "//"
 *     (WHATWG reads "http:evil.example/" as relative, RFC 3986 as a path);
 *   - origin: the target has the same origin when scheme, canonical host
 *     and port are equal; otherwise no secret of the first origin follows:
 *     of the headers the caller set, only those of a short list that
 *     carries none (ph_redirect_header_follows) go to the other origin,
 *     and a request body goes there only when the caller asked for it
 *     (redirect_body_cross_origin);
 *   - the method: 303 (anything but HEAD) and 302 (likewise) continue as
 *     GET without the body, 301 turns POST into GET, 307 and 308 keep the
 *     method and the body (ph_redirect_next_method).
 * The rules live here once so that every binding (libpinhole-curl, the
 * Python package, a Node binding) reads the same list and decides alike.
 */
#ifndef PINHOLE_REDIRECT_H
#define PINHOLE_REDIRECT_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/guard.h"
#include "pinhole/status.h"
#include "pinhole/url.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Default hop limit. */
#define PH_REDIRECT_MAX_HOPS_DEFAULT 10
/* At most this much of a redirect response's body is read (and thrown
 * away) before its connection is closed instead: a hostile server cannot
 * make a worker read a flood it never needed. */
#define PH_REDIRECT_BODY_DISCARD_MAX 65536
/* Default deadline of a whole redirect chain in the bindings (every hop,
 * its connection and the redirect bodies discarded). */
#define PH_REDIRECT_CHAIN_TIMEOUT_MS_DEFAULT 30000

/* Options of a redirect chain; caller-owned, read during the call only.
 * NULL or zero-initialized: the defaults. */
typedef struct ph_redirect_options {
    unsigned max_hops;    /* redirects one chain may follow; 0 = PH_REDIRECT_MAX_HOPS_DEFAULT */
    bool allow_downgrade; /* follow https -> http */
    /* This hop re-sends a request body (the request had one and
     * ph_redirect_next_method kept its method). */
    bool resend_body;
    /* The caller asked for the body to follow to another origin; without
     * it such a hop is refused (redirect_body_cross_origin). Per request. */
    bool allow_body_cross_origin;
} ph_redirect_options;

/* The outcome of one redirect check. Self-contained, caller-owned. */
typedef struct ph_redirect {
    /* The absolute target (Location resolved against from_url), "" when
     * the Location could not be resolved. */
    char url[PH_URL_MAX_LEN + 1];
    /* Scheme, canonical host and port of the target equal from_url's. */
    bool same_origin;
    /* The origin changes: only the headers ph_redirect_header_follows
     * keeps for another origin may follow (true as well whenever the
     * target is refused). */
    bool drop_credentials;
    /* The target's decision against list (ph_decide_url), or the redirect
     * refusal: verdict.reason redirect_limit, redirect_bad_location or
     * redirect_downgrade; verdict.detail the line for the log. */
    ph_verdict verdict;
} ph_redirect;

/*
 * Decides whether the response to from_url (an absolute http or https URL,
 * NUL-terminated; the URL that was requested on this hop) may be followed
 * to location (the Location header's value, NUL-terminated, leading and
 * trailing spaces already trimmed by the HTTP parser). hop is how many
 * redirects this chain has already followed (0 for the first Location).
 *
 * Order: the hop limit (hop >= max_hops: redirect_limit), the Location
 * (redirect_bad_location), the guard's decision on the target for list
 * (ph_decide_url naming the list: parse_error, ip_literal, unknown_list,
 * not_allowlisted, port_not_allowed, wildcard_dns), the downgrade
 * (redirect_downgrade), a body to another origin (opts->resend_body
 * without opts->allow_body_cross_origin: redirect_body_cross_origin).
 *
 * Returns PH_OK when the target may be followed (out->verdict.allowed; the
 * caller then dials out->url with ph_dial_url or pins it anew, and drops
 * credentials when out->drop_credentials); PH_E_DENIED when refused (*out
 * says why); PH_E_INVAL for NULL arguments or a from_url that is not an
 * accepted URL (out->verdict.reason parse_error). *out is always filled
 * when out is not NULL. opts and diag may be NULL. Thread-safe; resolves
 * nothing.
 */
PH_API ph_status ph_redirect_check(ph_guard *g, const char *list, const char *from_url,
                                   const char *location, unsigned hop,
                                   const ph_redirect_options *opts, ph_redirect *out,
                                   ph_diag *diag);

/*
 * Whether a request header the caller set (name[0..len), any case) follows
 * the redirect: on the same origin every header does, except the ones that
 * describe a body that no longer follows; to another origin only those of
 * the list ph_redirect_cross_origin_header enumerates (they say how the
 * client wants the answer and carry no secret), and the body's own headers
 * (ph_redirect_body_header) when the body follows. Everything else
 * (Authorization, Proxy-Authorization, Cookie, X-Api-Key, Private-Token,
 * ...) stays on its origin. Host is the caller's to set anew. false for a
 * NULL name.
 */
PH_API bool ph_redirect_header_follows(const char *name, size_t len, bool same_origin,
                                       bool body_follows);

/* The i-th (from 0) name of the headers that follow to another origin
 * ("Accept", ...), NULL past the last: for a binding that keeps its own
 * copy of the list. Static strings. */
PH_API const char *ph_redirect_cross_origin_header(size_t i);

/* The i-th name of the headers that describe a request body
 * ("Content-Type", "Content-Length", ...): they follow exactly when the
 * body does. NULL past the last. Static strings. */
PH_API const char *ph_redirect_body_header(size_t i);

/* The method of the next hop for a redirect status (301, 302, 303, 307,
 * 308) of a request made with method: "GET" when the method changes (302
 * and 303 for anything but HEAD, 301 for POST; the body is then dropped),
 * otherwise method itself (the body, if any, follows). NULL for a NULL
 * method. */
PH_API const char *ph_redirect_next_method(int status, const char *method);

/*
 * Resolves the reference location against the absolute http(s) URL base
 * (RFC 3986 section 5.2, with the refusals listed at the top of this
 * header) into out[0..cap). Returns PH_OK, PH_E_INVAL for a base that is
 * not an accepted URL or a refused reference (diag says which byte), or
 * PH_E_LIMIT when the result does not fit (PH_URL_MAX_LEN + 1 bytes
 * always suffice for a result the guard would accept). out is "" on
 * failure. The result is not decided: ph_redirect_check does that.
 */
PH_API ph_status ph_url_resolve_reference(const char *base, const char *location, char *out,
                                          size_t cap, ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_REDIRECT_H */
