/*
 * pinhole/guard.h - the high-level decision API: what a worker calls before
 * it dials a tenant-supplied URL, and what the proxy calls for a CONNECT.
 *
 * A ph_guard is the policy object: it holds the current policy version (the
 * allowlist table, and for the proxy the grant keyring with it) and swaps the
 * version when a file is replaced. The decision (DESIGN section 4) is made
 * here and nowhere else, one function per kind of request: ph_decide_connect
 * for a CONNECT authority, ph_decide_url for a URL (the proxy's plain-HTTP
 * path and a worker's), ph_decide_again for an open connection:
 *   1. parse the URL or CONNECT authority (pinhole/url.h; IP literals are
 *      refused before anything else sees them);
 *   2. the grant, or the trusted caller's list;
 *   3. look up canonical host + port in the named list (pinhole/table.h);
 * then, for an allowed request, resolve exactly that name and check every
 * address (ph_decision_resolve, pinhole/resolve.h) and dial only those
 * (pinhole/dial.h does all of it in one call).
 * Grants (step 2 of the proxy's decision) are in pinhole/grant.h, the
 * revocation list that refuses a lease's grants early in
 * pinhole/revocation.h.
 *
 * Threads: every function may be called concurrently on one guard. A
 * decision uses one policy version (table and keyring) from start to end: a
 * reload that lands meanwhile replaces the version for later calls only, and
 * the old one is freed when its last user is done (reference counted). A
 * reload loads every file (table, key file, revocation list); when one fails
 * to load the new version is refused whole, the old one stays in use and the
 * failure is reported.
 */
#ifndef PINHOLE_GUARD_H
#define PINHOLE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/grant.h"
#include "pinhole/host.h"
#include "pinhole/resolve.h"
#include "pinhole/revocation.h"
#include "pinhole/status.h"
#include "pinhole/table.h"
#include "pinhole/url.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_guard ph_guard;

typedef struct ph_guard_options {
    /* DNS servers for ph_decision_resolve, ph_dial_url and the guard's
     * resolvers (ph_resolver_config.servers syntax, copied); NULL: the
     * system's resolv.conf. */
    const char *dns_servers;
    /* Overall resolution timeout; 0 = PH_RESOLVE_TIMEOUT_MS_DEFAULT. */
    unsigned dns_timeout_ms;
    /* When not 0, decisions look at most this often (by stat) whether the table
     * file was replaced, and reload it; 0: only ph_guard_reload reloads. */
    unsigned reload_interval_ms;
    /* The grant key file (pinhole/grant.h; copied) loaded and reloaded with
     * the table as one policy version; NULL: no keyring, and
     * ph_decide_connect accepts only callers that name the list. */
    const char *grant_keys_path;
    /* The guard's DNS cache, one per guard, shared by every
     * ph_decision_resolve, ph_dial_url and ph_dial_authority call on it
     * from any thread (thread-safe). It keeps only checked outcomes: an
     * allowed answer (every address already checked) for its DNS TTL capped
     * at dns_cache_max_ttl_s; an NXDOMAIN, empty or denied answer (mixed or
     * private) for dns_negative_ttl_s, refused again without asking;
     * timeouts and server failures never. A reload that puts a new policy
     * version in force empties it. 0 in a field = its default below, so a
     * zero-initialized struct (or NULL options) has the cache on;
     * dns_cache_off true: no cache, every call asks DNS. */
    unsigned dns_cache_entries;   /* slots, bounded; 0 = PH_GUARD_DNS_CACHE_ENTRIES_DEFAULT */
    unsigned dns_cache_max_ttl_s; /* 0 = PH_GUARD_DNS_CACHE_MAX_TTL_S_DEFAULT */
    unsigned dns_negative_ttl_s;  /* 0 = PH_GUARD_DNS_NEGATIVE_TTL_S_DEFAULT */
    bool dns_cache_off;
    /* The revocation list (pinhole/revocation.h; copied) loaded and
     * reloaded with the table and the key file as one policy version: a
     * verified grant whose lease it revokes is refused lease_revoked.
     * NULL: no list. Only with grant_keys_path. */
    const char *revocations_path;
} ph_guard_options;

/* The guard's DNS cache defaults (ph_guard_options). */
#define PH_GUARD_DNS_CACHE_ENTRIES_DEFAULT 1024
#define PH_GUARD_DNS_CACHE_MAX_TTL_S_DEFAULT 60
#define PH_GUARD_DNS_NEGATIVE_TTL_S_DEFAULT 5

/* Provenance strings longer than these are truncated in a verdict. */
#define PH_VERDICT_FILE_MAX 128
#define PH_VERDICT_TEXT_MAX 200

/*
 * The destination part of a decision (ph_decision.verdict; also
 * ph_dial_result.verdict and ph_redirect.verdict). Self-contained (copies,
 * no pointer into the table), so it stays valid across reloads.
 * Caller-owned, usually on the stack.
 */
typedef struct ph_verdict {
    bool allowed;
    ph_reason reason;              /* PH_REASON_ALLOWED or why not */
    ph_scheme scheme;              /* PH_SCHEME_NONE for a CONNECT authority */
    char host[PH_HOST_MAX + 1];    /* canonical host ("" when parsing failed) */
    uint16_t port;
    /* The rule that allowed it (has_rule true exactly when a rule matched). */
    bool has_rule;
    uint32_t rule_index;
    char rule_list[PH_VERDICT_TEXT_MAX + 1];
    char rule_host[PH_HOST_MAX + 3]; /* as written, e.g. "*.example.com" */
    char rule_file[PH_VERDICT_FILE_MAX + 1];
    uint32_t rule_line;
    char rule_reason[PH_VERDICT_TEXT_MAX + 1]; /* "" when the rule has none */
    /* Policy id (hex SHA-256) of the table that decided; "" if none did. */
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    /* One line saying why it was refused: the parser's, the lookup's or the
     * resolution's own message (what pinhole-guard check prints; for an IP
     * literal it names the literal, where ph_decision.log_detail, the
     * proxy's line, does not). "" when allowed or refused by the grant. */
    char detail[PH_DIAG_MESSAGE_MAX];
    /* The rule's protocol (what a CONNECT tunnel may carry); the default
     * when no rule matched. */
    ph_protocol rule_protocol;
} ph_verdict;

/*
 * Opens the table at table_path (copied) into a new guard in *out (free with
 * ph_guard_close). opts may be NULL (defaults). Fails like ph_table_open, or
 * PH_E_INVAL for a malformed dns_servers list.
 */
PH_API ph_status ph_guard_open(const char *table_path, const ph_guard_options *opts,
                               ph_guard **out, ph_diag *diag);

/*
 * Makes a guard around an already open table, taking ownership of *table
 * (set to NULL on success). Such a guard has no file: ph_guard_reload
 * returns PH_E_UNSUPPORTED. For tests, benchmarks and tables built in memory.
 */
PH_API ph_status ph_guard_from_table(ph_table **table, const ph_guard_options *opts,
                                     ph_guard **out, ph_diag *diag);

/* Closes the guard and sets *g to NULL. No other call may be in flight on
 * it. NULL-safe. */
PH_API void ph_guard_close(ph_guard **g);

/*
 * Reloads the table if the file was replaced (its device, inode, size or
 * mtime changed since the last load; replace it atomically with rename(2),
 * as policyc compile does). *reloaded (may be NULL) says whether a new table
 * is now in use. On failure the old table stays, the error is returned and
 * remembered for ph_guard_last_reload_error. Safe to call from any thread,
 * e.g. on SIGHUP from a control thread.
 */
PH_API ph_status ph_guard_reload(ph_guard *g, bool *reloaded, ph_diag *diag);

/* The error of the last failed reload (automatic or not) since the last
 * successful one: PH_OK when none. Copies its diagnostic into *diag. */
PH_API ph_status ph_guard_last_reload_error(ph_guard *g, ph_diag *diag);

/* What identifies the policy version in force. */
typedef struct ph_policy_info {
    uint64_t generation; /* 1 at open, +1 for every reload that swapped */
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    char keyring_id[PH_KEYRING_ID_HEX_LEN + 1]; /* "" without a key file */
    size_t keys;                                /* keys in the keyring */
    size_t revocations; /* entries of the revocation list (live or not); 0 without one */
} ph_policy_info;

PH_API void ph_guard_policy_info(ph_guard *g, ph_policy_info *out);

/* What one ph_guard_reload_policy did. */
typedef struct ph_reload_report {
    bool reloaded;           /* a new version is in force */
    bool table_changed;      /* its policy id differs from the old one */
    bool keys_changed;       /* its keyring id differs from the old one */
    bool revocations_changed; /* the revocation list file was replaced */
    const char *failed_file; /* on failure: "table", "grant keys" or "revocations" (static) */
    ph_policy_info info;     /* the version in force afterwards */
} ph_reload_report;

/*
 * Reloads the policy when the table, the key file or the revocation list
 * was replaced (device, inode, size, mtime or ctime changed): every file is
 * loaded, and only when all loaded is the new version put in force, in one
 * swap. On failure the old version stays, the error is returned
 * (r->failed_file names the file) and remembered for
 * ph_guard_last_reload_error. r may be NULL.
 */
PH_API ph_status ph_guard_reload_policy(ph_guard *g, ph_reload_report *r, ph_diag *diag);

/* Copies the current table's policy id (64 hex digits + NUL). */
PH_API void ph_guard_policy_id(ph_guard *g, char out[static PH_TABLE_ID_HEX_LEN + 1]);

/*
 * A pinned table version, for a caller that wants several lookups (or a log
 * line) against one version: the table stays valid until the snapshot is
 * released, whatever reloads happen meanwhile. Every acquire needs exactly
 * one release (which NULLs the pointer); the guard must outlive them.
 */
typedef struct ph_guard_snapshot ph_guard_snapshot;
PH_API ph_guard_snapshot *ph_guard_snapshot_acquire(ph_guard *g);
PH_API const ph_table *ph_guard_snapshot_table(const ph_guard_snapshot *s);
PH_API void ph_guard_snapshot_release(ph_guard_snapshot **s);

/*
 * A resolver (pinhole/resolve.h) with g's resolver settings (DNS servers,
 * timeout, cache TTL caps) that shares g's DNS cache, driven by loop (NULL:
 * poll style): how an event loop resolves a decided host for the guard
 * without a thread (ph_resolver_start with ph_verdict.host and port). The
 * caller owns *out: free it with ph_resolver_free on the thread driving it.
 * It holds a reference to the cache, not to g, so it may outlive g (a
 * reload still empties the cache it shares). PH_E_INVAL for NULL
 * arguments; otherwise as ph_resolver_new.
 */
PH_API ph_status ph_guard_resolver_new(ph_guard *g, const ph_resolver_loop *loop,
                                       ph_resolver **out, ph_diag *diag);

/* ---- one decision per kind of request ------------------------------------ */

/* What the caller does next with an allowed request. */
typedef enum ph_next_step {
    PH_NEXT_NONE = 0,    /* refused: answer d->http_status and stop */
    PH_NEXT_RESOLVE = 1, /* resolve exactly d->verdict.host, check every address
                          * (ph_decision_resolve, or a ph_resolver from
                          * ph_guard_resolver_new), dial d->verdict.port */
} ph_next_step;

/* A CONNECT request as the proxy received it. Borrowed for the call. */
typedef struct ph_connect_request {
    const char *authority;   /* the request target bytes, not NUL-terminated */
    size_t authority_len;
    /* The Proxy-Authorization value (not NUL-terminated), or NULL when the
     * header is absent: the grant names the list. */
    const char *proxy_authorization;
    size_t proxy_authorization_len;
    /* A trusted caller that names the list itself (a worker, policyc):
     * no grant is verified. Exactly one of list and a keyring-verified
     * proxy_authorization decides; the proxy always leaves list NULL. */
    const char *list;
    int64_t now; /* unix seconds, for the grant's validity */
} ph_connect_request;

/* One verdict for one request. Self-contained (copies), caller-owned. */
typedef struct ph_decision {
    bool allowed;
    ph_reason reason;  /* PH_REASON_ALLOWED or the stable reason */
    int http_status;   /* ph_reason_http_status(reason) */
    ph_next_step next;
    /* What the client may be told beyond the reason code ("" for nothing:
     * a grant or list refusal tells only the code), and the full line for
     * the log. */
    char client_detail[PH_DIAG_MESSAGE_MAX];
    char log_detail[PH_DIAG_MESSAGE_MAX];
    /* The grant that was verified (tenant, lease, list, expiry). */
    bool has_grant;
    ph_grant grant;
    /* The canonical host and port ("" / 0 when the authority did not
     * parse), the rule's provenance and the policy id (pinned version). */
    bool has_authority;
    ph_verdict verdict;
    uint64_t generation;
    char keyring_id[PH_KEYRING_ID_HEX_LEN + 1];
    /* A URL's path and query (ph_decide_url, once the URL parsed, allowed
     * or not): where they start in req->url and their length, up to a '#'
     * (what a proxy forwards as the origin-form target, "/" before it when
     * it is empty or starts with '?', as in "http://a.com?q"; ph_url).
     * 0 and 0 for a CONNECT. */
    size_t path_offset;
    size_t path_len;
} ph_decision;

/*
 * Decides a CONNECT against one pinned policy version, in this order: the
 * authority (parsed once; IP literals refused first), the grant (or the
 * trusted caller's list) and its lease against the revocation list, the
 * list lookup. Fills *d always. Returns PH_OK
 * when allowed (d->next is PH_NEXT_RESOLVE), PH_E_DENIED when refused,
 * PH_E_INVAL for missing arguments or a request naming both or neither of
 * a list and a keyring (d then says parse_error, 400).
 */
PH_API ph_status ph_decide_connect(ph_guard *g, const ph_connect_request *req, ph_decision *d);

/* A request for a URL (a plain-HTTP proxy request, or a worker dialing on a
 * tenant's behalf): the same fields, the target an http or https URL. */
typedef struct ph_url_request {
    const char *url; /* not NUL-terminated */
    size_t url_len;
    const char *proxy_authorization;
    size_t proxy_authorization_len;
    const char *list;
    int64_t now;
} ph_url_request;

/*
 * ph_decide_connect for a URL: the same decision, the same verdict and
 * statuses, with the URL parser (pinhole/url.h) instead of the authority
 * parser; d->verdict.scheme says http or https.
 */
PH_API ph_status ph_decide_url(ph_guard *g, const ph_url_request *req, ph_decision *d);

/* The longest Proxy-Authorization value a ph_grant_memo holds ("Basic "
 * and the base64 of lease:token fit); a longer one is verified every time. */
#define PH_GRANT_MEMO_AUTH_MAX 640

/*
 * What one client connection remembers of the grant it presented last
 * (ph_decide_url_memo): the Proxy-Authorization bytes, the policy version
 * and the keyring (its ph_keyring_id: generations are counted per guard, so
 * a memo another guard filled holds nothing here) that verified them, and
 * the grant they verified to. Caller-owned,
 * one per connection, used by one thread at a time: zeroed (or
 * ph_grant_memo_clear) before its first use, and wiped with
 * ph_grant_memo_clear when done (it holds a bearer token). Opaque in use.
 */
typedef struct ph_grant_memo {
    uint64_t generation; /* of the version that verified it; 0: empty */
    char keyring_id[PH_KEYRING_ID_HEX_LEN + 1];
    size_t auth_len;
    char auth[PH_GRANT_MEMO_AUTH_MAX];
    ph_grant grant;
} ph_grant_memo;

/* Empties *m and wipes the bytes it held. */
PH_API void ph_grant_memo_clear(ph_grant_memo *m);

/*
 * ph_decide_url for one client connection's requests, the same decision in
 * every step on the policy version in force (the URL parsed, the grant's
 * lease against the revocation list, the list looked up), except one: a
 * grant that version's keyring verified before, from the same
 * Proxy-Authorization bytes, is not verified again (its HMAC) while now
 * lies in [not_before, expires) of it. So a reload (another version) or the
 * grant's expiry verifies anew, and the verifier's own rules (its clock
 * skew, its reasons) decide every case the memo does not hold. A grant
 * verified anew replaces the memo's. m NULL: ph_decide_url.
 */
PH_API ph_status ph_decide_url_memo(ph_guard *g, const ph_url_request *req, ph_grant_memo *m,
                                    ph_decision *d);

/*
 * The next step of an allowed decision (d->next PH_NEXT_RESOLVE), for a
 * caller that connects by itself (libpinhole-curl pins CURLOPT_RESOLVE to
 * the result; the Python package's Guard.resolve returns it): resolves
 * exactly d->verdict.host with g's resolver settings and DNS cache
 * (ph_guard_options: a cached outcome is used without asking DNS) and
 * checks every address of the answer (pinhole/resolve.h). d is a decision
 * ph_decide_url or ph_decide_connect made on g; g and d are borrowed,
 * *addrs is the caller's.
 *
 * PH_OK: *addrs holds the checked addresses in answer order, with
 * d->verdict.port; d is unchanged. PH_E_DENIED: the answer is refused and
 * *d becomes the refusal: allowed false, reason dns_failure, dns_timeout
 * or denied_address, http_status ph_reason_http_status(reason), next
 * PH_NEXT_NONE, log_detail and verdict.detail the resolver's line (the
 * address and its block for denied_address), client_detail "", host,
 * port and rule kept. PH_E_NOMEM, PH_E_IO (or PH_E_INVAL for a bad server
 * list) when DNS could not even be asked: *d says dns_failure likewise.
 * PH_E_INVAL, *d unchanged, for NULL arguments or a decision that did not
 * allow (resolve nothing a decision refused). addrs->count is 0 on every
 * failure. Blocks for up to the guard's DNS timeout; thread-safe.
 */
PH_API ph_status ph_decision_resolve(ph_guard *g, ph_decision *d, ph_pinned_addrs *addrs);

/* An open connection, as an earlier allowed decision left it (a tunnel, a
 * forwarded request in flight), to decide again after a reload. Borrowed
 * for the call. */
typedef struct ph_recheck_request {
    const char *host; /* the earlier d->verdict.host (canonical, NUL-terminated) */
    uint16_t port;    /* the earlier d->verdict.port */
    const char *proxy_authorization; /* as in ph_connect_request */
    size_t proxy_authorization_len;
    const char *list;
    int64_t now;
} ph_recheck_request;

/* Why an open connection ends when the decision made again refuses it. */
typedef enum ph_ending {
    PH_ENDING_NONE = 0,           /* still allowed: it goes on */
    PH_ENDING_KEY_REVOKED = 1,    /* its grant no longer verifies (its key left the keyring) */
    PH_ENDING_GRANT_EXPIRED = 2,  /* its grant expired */
    PH_ENDING_POLICY_REVOKED = 3, /* the grant verifies (or the caller named the list), but
                                   * the list no longer allows the destination */
    PH_ENDING_LEASE_REVOKED = 4,  /* the grant verifies, but the revocation list in force
                                   * revokes its lease */
} ph_ending;

/*
 * Decides an open connection again against the policy version in force:
 * the grant and the list of ph_decide_connect on the destination the
 * earlier decision parsed (checked as canonical, not parsed again). Fills
 * *d as ph_decide_connect does and *ending (may be NULL) with why the
 * connection ends (PH_ENDING_NONE when allowed). Returns PH_OK when still
 * allowed, PH_E_DENIED when refused, PH_E_INVAL for missing arguments or a
 * host that is not canonical or port 0 (d says parse_error; *ending
 * PH_ENDING_POLICY_REVOKED).
 */
PH_API ph_status ph_decide_again(ph_guard *g, const ph_recheck_request *req, ph_decision *d,
                                 ph_ending *ending);

/* The ending's stable code for logs: "none", "key_revoked",
 * "grant_expired", "policy_revoked", "lease_revoked" (static). */
PH_API const char *ph_ending_code(ph_ending e);

/* True when the revocation list in force revokes (tenant, lease) at now:
 * for a caller holding a verified grant's fields rather than its token (a
 * kept-alive forwarding connection, after a reload). False without a list. */
PH_API bool ph_guard_lease_revoked(ph_guard *g, const char *tenant, const char *lease,
                                   int64_t now);

/* The entries of the revocation list in force that are live at now
 * (ph_revocations_live): 0 without a list. For a metric (a scrape), not
 * a decision: linear in the entries. */
PH_API size_t ph_guard_revocations_live(ph_guard *g, int64_t now);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_GUARD_H */
