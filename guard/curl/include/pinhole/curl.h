/*
 * pinhole/curl.h - libpinhole-curl: the guard attached to a libcurl easy
 * handle, so every connection the handle opens, on every redirect hop, goes
 * only to addresses the guard checked (docs/worker.md).
 *
 * A companion library (link `pkg-config --libs pinhole-curl`): libpinhole
 * itself does not depend on libcurl. Needs libcurl 7.85 or later
 * (CURLOPT_PROTOCOLS_STR).
 *
 * What the attachment does to the handle, at attach and again before every
 * hop (so an option the caller set in between is overridden):
 *   - CURLOPT_PROTOCOLS_STR and CURLOPT_REDIR_PROTOCOLS_STR "http,https";
 *   - CURLOPT_PROXY "" and CURLOPT_NOPROXY "*", CURLOPT_PRE_PROXY "": proxy
 *     variables from the environment are ignored (the checked address must
 *     be the peer);
 *   - CURLOPT_FOLLOWLOCATION off, CURLOPT_UNRESTRICTED_AUTH off,
 *     CURLOPT_ALTSVC_CTRL and CURLOPT_HSTS_CTRL 0 (no connection to another
 *     host or port on the server's say-so): ph_curl_perform follows
 *     redirects itself;
 *   - CURLOPT_RESOLVE pins the hop's host:port to exactly its checked
 *     addresses (curl never asks DNS for it; TLS still verifies the NAME),
 *     CURLOPT_CONNECT_TO cleared;
 *   - CURLOPT_OPENSOCKETFUNCTION refuses any address that is not in the
 *     hop's checked set (a second lock on the same door) and opens sockets
 *     close-on-exec;
 *   - CURLOPT_PREREQFUNCTION / PREREQDATA: a hop that must send no cookie
 *     empties the cookie engine right before its request is written (curl
 *     reads CURLOPT_COOKIEFILE's files again at the start of every
 *     transfer);
 *   - CURLOPT_WRITEFUNCTION / WRITEDATA: the caller's write callback gets
 *     the final response's body only (the body of a redirect that is
 *     followed is discarded);
 *   - CURLOPT_HTTPHEADER: the headers given in ph_curl_options, once the
 *     origin changed only those ph_redirect_header_follows keeps.
 * Options the caller must not set on an attached handle: the ones above,
 * CURLOPT_SHARE with a connection cache shared with unguarded handles, or
 * with a cookie store shared with any other handle (a chain empties the
 * cookie engine for some hops and gives it back its cookies afterwards).
 *
 * Threads: one attachment per handle, used by one thread at a time (as the
 * handle is); attachments on one guard may run on many threads at once.
 */
#ifndef PINHOLE_CURL_H
#define PINHOLE_CURL_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "pinhole/guard.h"
#include "pinhole/redirect.h"
#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The attachment: owned by the caller from ph_curl_attach to
 * ph_curl_detach. It holds a copy of the list name and of the headers, the
 * current hop's checked addresses, the curl_slists it set on the handle and
 * the caller's write callback. It borrows the handle and the guard: both
 * must outlive it. It is the data pointer of the callbacks it sets on the
 * handle (CURLOPT_OPENSOCKETDATA, CURLOPT_WRITEDATA), valid until
 * ph_curl_detach clears them. */
typedef struct ph_curl ph_curl;

/* The caller's body sink, as CURLOPT_WRITEFUNCTION. */
typedef size_t (*ph_curl_write_cb)(char *data, size_t size, size_t nmemb, void *arg);

/* Options of an attachment; read (and copied) by ph_curl_attach. NULL or
 * zero-initialized: the defaults. */
typedef struct ph_curl_options {
    /* hop limit (default 10), allow_downgrade, allow_body_cross_origin
     * (resend_body is set by ph_curl_perform at each hop) */
    ph_redirect_options redirect;
    /* Request headers for the chain ("Name: value"), NULL-terminated;
     * copied. From the first origin change on only the headers
     * ph_redirect_header_follows keeps for another origin are sent.
     * Headers set on the handle with CURLOPT_HTTPHEADER directly are
     * replaced by these at every hop. */
    const char *const *headers;
    /* The final response's body goes here; NULL: discarded. */
    ph_curl_write_cb write;
    void *write_arg;
    /* One deadline for the whole chain, every hop and redirect body
     * included (CURLOPT_TIMEOUT_MS of each hop is what is left of it);
     * 0 = PH_CURL_TIMEOUT_MS_DEFAULT. */
    unsigned timeout_ms;
} ph_curl_options;

/* Default deadline of one ph_curl_perform chain. */
#define PH_CURL_TIMEOUT_MS_DEFAULT PH_REDIRECT_CHAIN_TIMEOUT_MS_DEFAULT

/* The outcome of one ph_curl_perform. Caller-owned, always filled. */
typedef struct ph_curl_result {
    /* PH_REASON_ALLOWED when the chain completed (whatever the HTTP status);
     * otherwise the reason the guard refused a hop (any ph_dial_url or
     * ph_redirect_check reason), or, for a transfer that failed,
     * upstream_unreachable / upstream_timeout (curl_code says more). */
    ph_reason reason;
    CURLcode curl_code;         /* CURLE_OK unless the transfer failed */
    long http_status;           /* of the last response; 0 when none */
    unsigned hops;              /* redirects followed */
    bool credentials_dropped;   /* the origin changed along the chain */
    char url[PH_URL_MAX_LEN + 1]; /* the last URL decided (the refused one on refusal) */
    char addr_text[46];         /* the address of the last connection ("" when none) */
    ph_verdict verdict;         /* the decision's verdict on url */
    char detail[PH_DIAG_MESSAGE_MAX]; /* for the log: why refused or failed */
} ph_curl_result;

/*
 * Attaches g (deciding against list, copied) to the easy handle c and sets
 * the options listed at the top of this header. On PH_OK *out is the
 * attachment (the caller's; free it with ph_curl_detach before
 * curl_easy_cleanup(c): libcurl has no per-handle destructor to do it).
 * PH_E_INVAL for NULL arguments, PH_E_NOMEM, PH_E_UNSUPPORTED when the
 * libcurl in use refuses one of the options (too old). opts and diag may
 * be NULL.
 */
PH_API ph_status ph_curl_attach(CURL *c, ph_guard *g, const char *list,
                                const ph_curl_options *opts, ph_curl **out, ph_diag *diag);

/*
 * Fetches url (NUL-terminated) on the attached handle, following redirects
 * (301, 302, 303, 307, 308 with a Location) under the guard:
 *   each hop: the decision and resolution (ph_decide_url with the list
 *   named, then ph_decision_resolve: IP literals, the list, every address
 *   checked), CURLOPT_RESOLVE pinned to
 *   the checked addresses, the transfer; for a redirect, ph_redirect_check
 *   (hop limit, Location, downgrade, decision on the target, a body to
 *   another origin); a redirect's body is discarded, at most
 *   PH_REDIRECT_BODY_DISCARD_MAX bytes of it before its connection is
 *   closed; on an origin change the credentials are dropped for the rest
 *   of the chain (CURLOPT_USERPWD, CURLOPT_USERNAME, CURLOPT_PASSWORD,
 *   CURLOPT_XOAUTH2_BEARER, CURLOPT_COOKIE and the TLS client
 *   certificate, CURLOPT_SSLCERT(_BLOB), CURLOPT_SSLKEY(_BLOB),
 *   CURLOPT_KEYPASSWD, cleared; of the headers only those
 *   ph_redirect_header_follows keeps); the method of the next hop is
 *   ph_redirect_next_method's. curl's cookie engine, if the caller turned
 *   it on, follows the same rule (docs/worker.md): every hop after the first
 *   starts from the cookies it held before the chain (none once the chain
 *   left its first origin), and after a chain that met a redirect it holds
 *   those, plus the final response's only when the chain never left its
 *   origin. The whole chain runs under one deadline
 *   (ph_curl_options.timeout_ms): upstream_timeout when it passes.
 * Returns PH_OK when the chain completed (res->http_status is the last
 * response's), PH_E_DENIED when the guard refused a hop (res->reason,
 * res->url, res->detail), PH_E_IO when a transfer failed (res->curl_code),
 * PH_E_INVAL for NULL arguments. Blocks like curl_easy_perform.
 * Credentials cleared on the handle (CURLOPT_USERPWD, the client
 * certificate, ...) stay cleared
 * after the chain: set them again before the next perform. A connection
 * kept alive from an earlier transfer to the same host and port may be
 * reused; it goes to an address that was checked when it was opened.
 */
PH_API ph_status ph_curl_perform(ph_curl *pc, const char *url, ph_curl_result *res);

/*
 * Frees the attachment and sets *pc to NULL (NULL-safe). Clears on the
 * handle what points into the attachment (CURLOPT_RESOLVE,
 * CURLOPT_OPENSOCKETFUNCTION/DATA, CURLOPT_WRITEFUNCTION/DATA,
 * CURLOPT_HTTPHEADER); the protocol and proxy restrictions stay. Call it
 * before curl_easy_cleanup, or curl_easy_reset before reusing the handle
 * unguarded.
 */
PH_API void ph_curl_detach(ph_curl **pc);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_CURL_H */
