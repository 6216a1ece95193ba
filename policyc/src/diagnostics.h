/*
 * diagnostics.h - positioned errors and warnings about an allowlist, and the
 * one printer that formats them (text, JSON, SARIF 2.1.0, GitHub annotations).
 *
 * Parsers never print: they append pc_diagnostic records (file, 1-based line
 * and column in characters, a stable code, a message and an optional help
 * line with the exact fix); the caller sorts them into the fixed order
 * (file, line, col, code) and prints them once.
 *
 * Codes are stable: a code never changes meaning and is never reused. The
 * full list, with an example of each, is docs/allowlist.md.
 */
#ifndef POLICYC_DIAGNOSTICS_H
#define POLICYC_DIAGNOSTICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pinhole/status.h"

typedef enum pc_severity {
    PC_SEV_ERROR = 0,
    PC_SEV_WARNING = 1,
} pc_severity;

/* Every code. The enumerator's value is the number in "PCnnn". */
typedef enum pc_code {
    /* The file and its YAML */
    PC_E_READ = 1,              /* PC001 the file cannot be read */
    PC_E_FILE_TOO_LARGE = 2,    /* PC002 larger than PC_MAX_FILE_BYTES */
    PC_E_ENCODING = 3,          /* PC003 not UTF-8, NUL or control character */
    PC_E_YAML_SYNTAX = 4,       /* PC004 YAML syntax error */
    PC_E_MULTIPLE_DOCUMENTS = 5,/* PC005 more than one YAML document */
    PC_E_ANCHOR = 6,            /* PC006 &anchor */
    PC_E_ALIAS = 7,             /* PC007 *alias */
    PC_E_TAG = 8,               /* PC008 !tag */
    PC_E_TYPE = 9,              /* PC009 wrong node type */
    PC_E_DUPLICATE_KEY = 10,    /* PC010 a key twice in one mapping */
    PC_E_UNKNOWN_KEY = 11,      /* PC011 unknown key (help: did you mean) */
    PC_E_MISSING_KEY = 12,      /* PC012 a required key is missing */
    PC_E_EMPTY = 13,            /* PC013 empty document, mapping or sequence */
    PC_E_VERSION = 14,          /* PC014 version is not 1 */
    PC_E_MODE = 15,             /* PC015 `mode:` (there is no open mode) */
    PC_E_NESTING = 16,          /* PC016 YAML nested deeper than PC_MAX_NESTING */
    PC_E_STRING = 17,           /* PC017 reason/source empty, too long or with control characters */
    PC_E_NOT_LITERAL = 18,      /* PC018 key, host, port or list name spelt with escapes or folding */
    /* Lists and includes */
    PC_E_LIST_NAME = 20,        /* PC020 invalid list name */
    PC_E_UNKNOWN_INCLUDE = 22,  /* PC022 include names a list that does not exist */
    PC_E_INCLUDE_CYCLE = 23,    /* PC023 include cycle */
    PC_E_INCLUDE_DEPTH = 24,    /* PC024 includes nested deeper than PC_MAX_INCLUDE_DEPTH */
    PC_E_DUPLICATE_INCLUDE = 25,/* PC025 the same list included twice by one list */
    /* Hosts */
    PC_E_HOST_ALLOW_ALL = 30,   /* PC030 `*` / `**`: there is no allow-everything */
    PC_E_HOST_EMPTY = 31,       /* PC031 empty or missing host */
    PC_E_HOST_IP = 32,          /* PC032 IP address in any spelling */
    PC_E_HOST_UPPERCASE = 33,   /* PC033 uppercase (help: lowercase form) */
    PC_E_HOST_TRAILING_DOT = 34,/* PC034 trailing dot (help: without it) */
    PC_E_HOST_UNICODE = 35,     /* PC035 non-ASCII (help: the A-label) */
    PC_E_HOST_SYNTAX = 36,      /* PC036 bad character, empty label, hyphen at a label edge */
    PC_E_HOST_LENGTH = 37,      /* PC037 label > 63 or name > 253 bytes */
    PC_E_HOST_SINGLE_LABEL = 38,/* PC038 fewer than two labels */
    PC_E_HOST_PUNYCODE = 39,    /* PC039 invalid xn-- label */
    PC_E_WILDCARD_POSITION = 40,/* PC040 `*` anywhere but a whole leftmost label */
    PC_E_WILDCARD_PUBLIC = 41,  /* PC041 wildcard base is a public suffix */
    PC_E_WILDCARD_DNS = 42,     /* PC042 host at or under a wildcard-DNS service (nip.io) */
    /* Ports */
    PC_E_PORTS_MISSING = 50,    /* PC050 rule without ports */
    PC_E_PORTS_EMPTY = 51,      /* PC051 ports: [] */
    PC_E_PORT_ALLOW_ALL = 52,   /* PC052 `*` / any / all as a port */
    PC_E_PORT_QUOTED = 53,      /* PC053 "443" (quoted number) */
    PC_E_PORT_RANGE = 54,       /* PC054 outside 1..65535 */
    PC_E_PORT_LEADING_ZERO = 55,/* PC055 0443 */
    PC_E_PORT_SYNTAX = 56,      /* PC056 not an integer nor "a-b" */
    PC_E_PORT_REVERSED = 57,    /* PC057 "a-b" with a > b */
    /* Rules */
    PC_E_SOURCE = 60,           /* PC060 `source:` is not "file:line" */
    PC_E_PROTOCOL = 61,         /* PC061 `protocol:` is not tls, http or tcp */
    PC_E_PROTOCOL_WILDCARD = 62,/* PC062 `protocol: tcp` on a wildcard host */
    /* Limits */
    PC_E_TOO_MANY_LISTS = 70,   /* PC070 more than PC_MAX_LISTS lists */
    PC_E_TOO_MANY_RULES = 71,   /* PC071 more than PC_MAX_RULES rules */
    PC_E_TOO_MANY_PORTS = 72,   /* PC072 more than PC_MAX_PORTS_PER_RULE entries */
    PC_E_TOO_MANY_INCLUDES = 73,/* PC073 more than PC_MAX_INCLUDES_PER_LIST includes */
    PC_E_EFFECTIVE_TOO_LARGE = 74, /* PC074 flattened lists exceed PC_MAX_EFFECTIVE_RULES */
    /* Warnings */
    PC_W_COVERED = 100,         /* PC100 exact rule covered by a wildcard of the same list */
    PC_W_DUPLICATE_RULE = 101,  /* PC101 the same host and ports twice in a list */
    PC_W_PORT_OVERLAP = 102,    /* PC102 overlapping ports (in a rule or same-host rules) */
    PC_W_WIDE_PORT_RANGE = 103, /* PC103 a range of more than PC_WIDE_PORT_RANGE ports */
} pc_code;

/* Static metadata of a code, for SARIF rules and docs. NULL when unknown. */
typedef struct pc_code_info {
    pc_code code;
    pc_severity severity;
    const char *name;  /* stable kebab-case id, e.g. "unknown-key" */
    const char *title; /* one line, e.g. "unknown key" */
} pc_code_info;
const pc_code_info *pc_code_lookup(pc_code code);
/* All codes in numeric order; *count receives how many. */
const pc_code_info *pc_code_all(size_t *count);

typedef struct pc_diagnostic {
    pc_severity severity;
    pc_code code;
    char *file;        /* display name; owned */
    uint32_t line;     /* 1-based; 0 when the diagnostic is about the whole file */
    uint32_t col;      /* 1-based, in characters; 0 with line 0 */
    char *message;     /* one line; owned */
    char *help;        /* NULL or one line with the fix; owned */
    char *source_line; /* NULL or the text of `line` (no newline); owned */
} pc_diagnostic;

/* Cap on stored diagnostics; beyond it they are counted, not stored. */
#define PC_MAX_STORED_DIAGNOSTICS 10000u

typedef struct pc_diagnostics {
    pc_diagnostic *items;
    size_t count, cap;
    size_t errors;     /* every error appended, stored or not */
    size_t warnings;   /* every warning appended, stored or not */
    size_t dropped;    /* appended beyond PC_MAX_STORED_DIAGNOSTICS */
    bool nomem;        /* an append failed for lack of memory */
} pc_diagnostics;

/* Zeroes d (a zeroed struct is also a valid empty collection). */
void pc_diagnostics_init(pc_diagnostics *d);
/* Frees every record and leaves d empty (reusable). NULL-safe. */
void pc_diagnostics_free(pc_diagnostics *d);

/* Appends one diagnostic; the severity comes from the code. Strings are
 * copied (file, source_line and help may be NULL). Returns PH_OK,
 * PH_E_LIMIT when it was counted but not stored, or PH_E_NOMEM (d->nomem set). */
ph_status pc_diagnostics_add(pc_diagnostics *d, pc_code code, const char *file, uint32_t line,
                             uint32_t col, const char *source_line, const char *help,
                             const char *fmt, ...) __attribute__((format(printf, 8, 9)));

/* Sorts into the fixed order: file, line, col, code, then message. Stable
 * output for identical input. */
void pc_diagnostics_sort(pc_diagnostics *d);

/* Moves every record of src to the end of dst (src is left empty). */
ph_status pc_diagnostics_move(pc_diagnostics *dst, pc_diagnostics *src);

/* Turns every warning into an error (policyc check --werror). */
void pc_diagnostics_promote_warnings(pc_diagnostics *d);

typedef enum pc_diag_format {
    PC_FORMAT_TEXT = 0,   /* file:line:col: error[PCnnn]: message / source / caret / help */
    PC_FORMAT_JSON = 1,   /* one JSON document, schema in docs/policyc.md */
    PC_FORMAT_SARIF = 2,  /* SARIF 2.1.0 log with one run, rules per code */
    PC_FORMAT_GITHUB = 3, /* ::error file=...,line=...,col=...,title=PCnnn::message */
} pc_diag_format;

/* Parses "text", "json", "sarif", "github". Returns false when unknown. */
bool pc_diag_format_parse(const char *name, pc_diag_format *out);

/* Prints every stored diagnostic of d in its current order. Text format
 * prints no summary (callers add theirs); JSON and SARIF print one complete
 * document. Returns PH_E_IO when a write failed. */
ph_status pc_diagnostics_print(FILE *out, const pc_diagnostics *d, pc_diag_format format);

#endif /* POLICYC_DIAGNOSTICS_H */
