/*
 * pinhole/guard.h - the high-level decision API: what a worker calls before
 * it dials a tenant-supplied URL, and what the proxy calls for a CONNECT.
 *
 * A ph_guard holds the current allowlist table and swaps it when the file is
 * replaced. The decision (DESIGN section 4) is made here and nowhere else:
 *   1. parse the URL or CONNECT authority (pinhole/url.h; IP literals are
 *      refused before anything else sees them);
 *   2. look up canonical host + port in the named list (pinhole/table.h);
 *   3. optionally resolve exactly that name and check every address
 *      (pinhole/resolve.h); dial only those (pinhole/connect.h).
 * Grants (step 2 of the proxy's decision) are in pinhole/grant.h.
 *
 * Threads: every function may be called concurrently on one guard. A check
 * uses one table from start to end: a reload that lands meanwhile replaces
 * the table for later calls only, and the old table is freed when its last
 * user is done (reference counted). A new file that fails to open is refused
 * whole; the old table stays in use and the failure is reported.
 */
#ifndef PINHOLE_GUARD_H
#define PINHOLE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/host.h"
#include "pinhole/resolve.h"
#include "pinhole/status.h"
#include "pinhole/table.h"
#include "pinhole/url.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_guard ph_guard;

typedef struct ph_guard_options {
    /* DNS servers for ph_guard_check_and_resolve (ph_resolver_config.servers
     * syntax, copied); NULL: the system's resolv.conf. */
    const char *dns_servers;
    /* Overall resolution timeout; 0 = PH_RESOLVE_TIMEOUT_MS_DEFAULT. */
    unsigned dns_timeout_ms;
    /* When not 0, checks look at most this often (by stat) whether the table
     * file was replaced, and reload it; 0: only ph_guard_reload reloads. */
    unsigned reload_interval_ms;
} ph_guard_options;

/* Provenance strings longer than these are truncated in a verdict. */
#define PH_VERDICT_FILE_MAX 128
#define PH_VERDICT_TEXT_MAX 200

/*
 * The outcome of one check. Self-contained (copies, no pointer into the
 * table), so it stays valid across reloads. Caller-owned, usually on the
 * stack.
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
    /* One line for logs: why it was refused (the diagnostic's message). */
    char detail[PH_DIAG_MESSAGE_MAX];
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
 * Decides url[0..len) (an http or https URL) against list. Returns PH_OK when
 * allowed, PH_E_DENIED when refused (v->reason: parse_error, ip_literal,
 * unknown_list, not_allowlisted, port_not_allowed), PH_E_INVAL for NULL
 * arguments. *v is always filled.
 */
PH_API ph_status ph_guard_check_url(ph_guard *g, const char *list, const char *url, size_t len,
                                    ph_verdict *v, ph_diag *diag);

/* The same for a CONNECT authority "host:port" (the proxy's request target). */
PH_API ph_status ph_guard_check_authority(ph_guard *g, const char *list, const char *authority,
                                          size_t len, ph_verdict *v, ph_diag *diag);

/*
 * ph_guard_check_url, then (when allowed) resolves the host with the guard's
 * resolver settings (ph_resolve_blocking) and checks every address. On PH_OK
 * *addrs holds the addresses to dial (with the port), for ph_connect_pinned
 * or CURLOPT_RESOLVE. Refusals add dns_failure, dns_timeout and
 * denied_address; addrs->count is then 0. Blocks for up to the DNS timeout.
 */
PH_API ph_status ph_guard_check_and_resolve(ph_guard *g, const char *list, const char *url,
                                            size_t len, ph_verdict *v, ph_pinned_addrs *addrs,
                                            ph_diag *diag);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_GUARD_H */
