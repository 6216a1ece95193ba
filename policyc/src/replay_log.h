/*
 * replay_log.h - the proxy's connection log (docs/pinhole-proxy.md, LOGS),
 * read back for `policyc replay`: a bounded line reader over any byte
 * source, and the parse of one line into the destination the table decided.
 *
 * Nothing here trusts the log: a line is at most PC_LOG_LINE_MAX bytes
 * (longer ones are reported as one malformed line and skipped without being
 * buffered), every field is type- and length-checked, and a line that is
 * not what the proxy writes is malformed with a one-line reason, never a
 * stop. Memory is the reader's buffer, whatever the input.
 */
#ifndef POLICYC_REPLAY_LOG_H
#define POLICYC_REPLAY_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pinhole/host.h"
#include "pinhole/status.h"
#include "pinhole/table.h"

/* The longest line read (the proxy's lines stay under 4 KiB). */
#define PC_LOG_LINE_MAX (64u * 1024u)
/* Bounds of the fields kept from a line. */
#define PC_LOG_LIST_MAX 64u /* PC_MAX_LIST_NAME */
#define PC_LOG_RULE_MAX 200u
#define PC_LOG_TIME_MAX 39u

/* Reads up to n bytes into buf: the count, 0 at the end, -1 on error
 * (*why: a static description). */
typedef ssize_t (*pc_log_read_fn)(void *ctx, void *buf, size_t n, const char **why);

/* A source over bytes in memory (tests, fuzzers, benchmarks): at most
 * `chunk` bytes a read (0: as many as asked), from `at` on. */
typedef struct pc_log_mem {
    const char *p;
    size_t len, at, chunk;
} pc_log_mem;
ssize_t pc_log_mem_read(void *ctx, void *buf, size_t n, const char **why);

typedef struct pc_log_reader {
    pc_log_read_fn read;
    void *ctx;       /* borrowed */
    char *buf;       /* PC_LOG_LINE_MAX + read room, owned */
    size_t cap, start, end;
    bool eof;
    uint64_t line_no; /* of the line last returned, 1-based */
} pc_log_reader;

/* Sets r up over read(ctx). PH_E_NOMEM or PH_OK. */
ph_status pc_log_reader_init(pc_log_reader *r, pc_log_read_fn read, void *ctx, ph_diag *diag);
void pc_log_reader_free(pc_log_reader *r);

/*
 * The next line, without its '\n': PH_OK with *line and *len (valid until the
 * next call; a line over PC_LOG_LINE_MAX comes back with *too_long set and
 * len 0), PH_E_NOT_FOUND at the end of the input, PH_E_IO when the source
 * failed (diag says why; the lines before it were returned). A last line
 * without '\n' is a line.
 */
ph_status pc_log_reader_next(pc_log_reader *r, const char **line, size_t *len, bool *too_long,
                             ph_diag *diag);

/* What one line is, for replay. */
typedef enum pc_log_kind {
    PC_LOG_DECIDED = 0,    /* a destination the table decided: the entry is filled */
    PC_LOG_NO_DESTINATION, /* no host or port (a parse error, an IP literal, a refusal at accept) */
    PC_LOG_NO_LIST,        /* a destination but no list (the grant was refused) */
    PC_LOG_UNDECIDED,      /* refused before the table was asked (the grant, the framing),
                            * or never answered (reason null) */
    PC_LOG_OTHER_EVENT,    /* an event line other than "connection" and "request" */
    PC_LOG_MALFORMED,      /* not a line the proxy writes: *why says why */
} pc_log_kind;

typedef struct pc_log_entry {
    char list[PC_LOG_LIST_MAX + 1];
    char host[PH_HOST_MAX + 1]; /* canonical (ph_host_check) */
    uint16_t port;
    bool allowed;               /* the table allowed it (whatever happened after) */
    ph_reason reason;           /* as logged */
    char rule[PC_LOG_RULE_MAX + 1];              /* "file:line", "" when none */
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];     /* "" when none */
    char time[PC_LOG_TIME_MAX + 1];              /* as logged, "" when none */
} pc_log_entry;

/*
 * Parses line[0..len) (one JSON object, checked with jansson). Returns its
 * kind; *e is filled for PC_LOG_DECIDED, *why (static) for
 * PC_LOG_MALFORMED.
 *
 * The table's verdict is read from the reason: allowed, and every reason
 * of a step after the table (dns_*, denied_address, upstream_*,
 * limit_exceeded, the tunnel inspection's) mean the table allowed it;
 * not_allowlisted, port_not_allowed, unknown_list and wildcard_dns mean it
 * refused; any other reason was given before the table was asked.
 */
pc_log_kind pc_log_line_parse(const char *line, size_t len, pc_log_entry *e, const char **why);

/* "decided", "no_destination", ... (static). */
const char *pc_log_kind_name(pc_log_kind k);

#endif
