/*
 * pinhole/table.h - the compiled allowlist table: open, verify, look up.
 *
 * policyc compiles an allowlist into a table file (docs/table-format.md);
 * this reader is the single implementation the proxy and the guard use.
 * Opening verifies the untrusted bytes completely (the file checksum, every
 * header field, every offset, count and string reference, bounds- and
 * overflow-safe) before anything reads them; a file that fails any check
 * is refused whole. The verified bytes live in private memory that is then
 * made read-only, so a later change to the file cannot change an open table.
 *
 * An open table is immutable: every read function below is thread-safe on a
 * shared table and allocation-free. Readers reload by opening the new file
 * and swapping a pointer; pointers handed out (names, provenance) stay valid
 * until the table they came from is closed.
 */
#ifndef PINHOLE_TABLE_H
#define PINHOLE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ph_table ph_table;

#define PH_TABLE_ID_LEN 32
#define PH_TABLE_ID_HEX_LEN 64

/*
 * Opens and verifies the table file at path. On PH_OK *table owns the
 * verified table (close it with ph_table_close). On failure *table is NULL,
 * nothing is kept, and diag says why: PH_E_IO (open/read failed),
 * PH_E_LIMIT (larger than the 2 GiB format limit), PH_E_FORMAT (not a table,
 * truncated, corrupted, wrong version; not a regular file: a FIFO, device or
 * directory is refused without being waited on, ph_open_regular).
 */
PH_API ph_status ph_table_open(const char *path, ph_table **table, ph_diag *diag);

/*
 * Same as ph_table_open for a table already in memory (e.g. compiled by
 * policyc explain). COPIES data[0..len): the caller keeps ownership of data
 * and may free it as soon as this returns.
 */
PH_API ph_status ph_table_open_buffer(const void *data, size_t len, ph_table **table,
                                      ph_diag *diag);

/* Releases the table and sets *table to NULL. NULL-safe. Every pointer the
 * table handed out becomes invalid. */
PH_API void ph_table_close(ph_table **table);

/* The policy id: SHA-256 of the canonical policy (not of the file). The hex
 * form is 64 lowercase digits; both point into the table. */
PH_API const uint8_t *ph_table_policy_id(const ph_table *table);
PH_API const char *ph_table_policy_id_hex(const ph_table *table);

/* What a CONNECT tunnel to a rule's destination may carry (the allowlist's
 * `protocol:` key; docs/allowlist.md). The proxy inspects a tunnel's first
 * client bytes against it (docs/pinhole-proxy.md, TUNNEL INSPECTION). */
typedef enum ph_protocol {
    PH_PROTOCOL_DEFAULT = 0, /* no key: a TLS ClientHello or HTTP/1 in clear */
    PH_PROTOCOL_TLS = 1,     /* a ClientHello naming the CONNECT host */
    PH_PROTOCOL_HTTP = 2,    /* HTTP/1 in clear, every request's Host the CONNECT host */
    PH_PROTOCOL_TCP = 3,     /* anything, relayed without inspection (exact hosts only) */
} ph_protocol;

/* "tls", "http", "tcp", or "tls or http" for the default; "unknown" for
 * other values. Static, never NULL. */
PH_API const char *ph_protocol_name(ph_protocol p);

/* One rule of the flattened policy, as compiled. Every pointer points into
 * the table (valid until it is closed) and is NUL-terminated. */
typedef struct ph_table_rule {
    uint32_t index;       /* rule id, 0..ph_table_rule_count()-1 */
    const char *list;     /* the list the rule belongs to (after includes) */
    const char *host;     /* as written: "api.github.com" or "*.example.com" */
    size_t host_len;
    const char *file;     /* source file base name where the rule was written */
    uint32_t line;        /* 1-based line of the rule in that file */
    const char *reason;   /* NULL when the rule has none */
    size_t nports;        /* its port ranges: see ph_table_rule_port */
    ph_protocol protocol; /* what a tunnel to it may carry */
} ph_table_rule;

typedef struct ph_table_result {
    bool allowed;
    ph_reason reason;     /* PH_REASON_ALLOWED, _NOT_ALLOWLISTED, _PORT_NOT_ALLOWED,
                           * _UNKNOWN_LIST, _PARSE_ERROR (non-canonical host), or
                           * _WILDCARD_DNS (a rule allows the host, but it is at or
                           * under a wildcard-DNS service: never allowed) */
    bool has_rule;        /* true exactly when allowed */
    ph_table_rule rule;   /* the rule that allowed the destination */
} ph_table_result;

/*
 * Decides host:port against the named list. host[0..hostlen) must already be
 * canonical (pinhole/host.h; the URL and CONNECT parsers produce it): a
 * non-canonical or IP-literal host is refused with PH_E_INVAL and reason
 * PH_REASON_PARSE_ERROR rather than matched. port 0 never matches.
 * Returns PH_OK with *result filled whenever a verdict was reached (allowed
 * or not); PH_E_INVAL for NULL arguments or a bad host. Allocation-free,
 * thread-safe, O(1) in the number of rules: an exact-name hash probe, one
 * probe for the parent name (wildcards), then a binary search over the
 * entry's sorted port ranges.
 */
PH_API ph_status ph_table_lookup(const ph_table *table, const char *list, const char *host,
                                 size_t hostlen, uint16_t port, ph_table_result *result);

/* Why nothing matched, naming the nearest rule (for policyc explain). */
typedef enum ph_table_near {
    PH_TABLE_NEAR_NONE = 0,         /* nothing close: no rule names this host */
    PH_TABLE_NEAR_WRONG_PORT = 1,   /* a rule covers the host, not the port */
    PH_TABLE_NEAR_TOO_DEEP = 2,     /* a wildcard covers an ancestor, but only one label */
    PH_TABLE_NEAR_APEX = 3,         /* "*.host" exists; a wildcard never covers its apex */
    PH_TABLE_NEAR_UNKNOWN_LIST = 4, /* the list does not exist */
    PH_TABLE_NEAR_WILDCARD_DNS = 5, /* the rule allows the host, which is under a
                                     * wildcard-DNS service: refused */
} ph_table_near;

typedef struct ph_table_explanation {
    ph_table_result result;  /* what ph_table_lookup says */
    ph_table_near near;      /* when denied: the nearest miss */
    bool has_near_rule;
    ph_table_rule near_rule; /* the rule meant by near (not for NONE/UNKNOWN_LIST) */
} ph_table_explanation;

/* ph_table_lookup plus, on a denial, the nearest rule. Same contract. */
PH_API ph_status ph_table_explain(const ph_table *table, const char *list, const char *host,
                                  size_t hostlen, uint16_t port, ph_table_explanation *out);

/* Enumeration (dump, diff). Lists are sorted by name; a list's rules are
 * consecutive rule ids in canonical order. Out-of-range indexes return
 * PH_E_NOT_FOUND. */
PH_API size_t ph_table_list_count(const ph_table *table);
PH_API ph_status ph_table_list_at(const ph_table *table, size_t i, const char **name,
                                  size_t *first_rule, size_t *rule_count);
/* Finds a list by name; PH_E_NOT_FOUND when absent. */
PH_API ph_status ph_table_list_find(const ph_table *table, const char *name, size_t *index);
PH_API size_t ph_table_rule_count(const ph_table *table);
PH_API ph_status ph_table_rule_at(const ph_table *table, size_t i, ph_table_rule *rule);
/* The k-th port range of rule i (sorted, merged, inclusive). */
PH_API ph_status ph_table_rule_port(const ph_table *table, size_t i, size_t k, uint16_t *lo,
                                    uint16_t *hi);

/* Destinations: the distinct (host as written) keys of a list with the union
 * of their ports, in table order (sorted by name). Used by diff. */
PH_API size_t ph_table_list_destination_count(const ph_table *table, size_t list);
/* The d-th destination of list: host (as written, NUL-terminated, points into
 * a small caller-owned buffer host_buf of at least 256 bytes) and its number
 * of merged port ranges. */
PH_API ph_status ph_table_destination_at(const ph_table *table, size_t list, size_t d,
                                         char host_buf[static 256], size_t *nranges);
/* The merged port ranges of destination d of list, in ascending order:
 * lo[k]..hi[k] for k < *n. The caller provides arrays of cap entries;
 * PH_TABLE_MAX_RANGES always suffices. PH_E_LIMIT when cap is too small. */
#define PH_TABLE_MAX_RANGES 32768
PH_API ph_status ph_table_destination_ranges(const ph_table *table, size_t list, size_t d,
                                             uint16_t *lo, uint16_t *hi, size_t cap, size_t *n);
/* The same, only the ports whose rule (the one a lookup finds) has
 * protocol: the destination's ports split by what a tunnel may carry. */
PH_API ph_status ph_table_destination_protocol_ranges(const ph_table *table, size_t list,
                                                      size_t d, ph_protocol protocol,
                                                      uint16_t *lo, uint16_t *hi, size_t cap,
                                                      size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_TABLE_H */
