/* diagnostics.c - the diagnostics collection and the table of stable codes. */
#include "diagnostics.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "diag_format-int.h"

/* One row per code, in numeric order. Names and titles are part of the
 * SARIF output, so they are as stable as the numbers. */
static const pc_code_info code_table[] = {
    {PC_E_READ, PC_SEV_ERROR, "unreadable-file", "the file cannot be read"},
    {PC_E_FILE_TOO_LARGE, PC_SEV_ERROR, "file-too-large", "the file is too large"},
    {PC_E_ENCODING, PC_SEV_ERROR, "bad-encoding", "invalid UTF-8 or a forbidden character"},
    {PC_E_YAML_SYNTAX, PC_SEV_ERROR, "yaml-syntax", "YAML syntax error"},
    {PC_E_MULTIPLE_DOCUMENTS, PC_SEV_ERROR, "multiple-documents", "more than one YAML document"},
    {PC_E_ANCHOR, PC_SEV_ERROR, "anchor", "YAML anchors are not allowed"},
    {PC_E_ALIAS, PC_SEV_ERROR, "alias", "YAML aliases are not allowed"},
    {PC_E_TAG, PC_SEV_ERROR, "tag", "YAML tags are not allowed"},
    {PC_E_TYPE, PC_SEV_ERROR, "wrong-type", "wrong kind of YAML node"},
    {PC_E_DUPLICATE_KEY, PC_SEV_ERROR, "duplicate-key", "duplicate key"},
    {PC_E_UNKNOWN_KEY, PC_SEV_ERROR, "unknown-key", "unknown key"},
    {PC_E_MISSING_KEY, PC_SEV_ERROR, "missing-key", "a required key is missing"},
    {PC_E_EMPTY, PC_SEV_ERROR, "empty", "empty document, mapping or sequence"},
    {PC_E_VERSION, PC_SEV_ERROR, "unsupported-version", "unsupported version"},
    {PC_E_MODE, PC_SEV_ERROR, "open-mode", "there is no open mode"},
    {PC_E_NESTING, PC_SEV_ERROR, "too-deep", "YAML nested too deeply"},
    {PC_E_STRING, PC_SEV_ERROR, "bad-string", "string empty, too long or with control characters"},
    {PC_E_NOT_LITERAL, PC_SEV_ERROR, "not-literal", "a name written with escapes, a line break or a block scalar"},
    {PC_E_LIST_NAME, PC_SEV_ERROR, "bad-list-name", "invalid list name"},
    {PC_E_UNKNOWN_INCLUDE, PC_SEV_ERROR, "unknown-include", "include names an unknown list"},
    {PC_E_INCLUDE_CYCLE, PC_SEV_ERROR, "include-cycle", "include cycle"},
    {PC_E_INCLUDE_DEPTH, PC_SEV_ERROR, "include-depth", "includes nested too deeply"},
    {PC_E_DUPLICATE_INCLUDE, PC_SEV_ERROR, "duplicate-include", "list included twice"},
    {PC_E_HOST_ALLOW_ALL, PC_SEV_ERROR, "host-allow-all", "a host pattern that allows everything"},
    {PC_E_HOST_EMPTY, PC_SEV_ERROR, "host-empty", "empty or missing host"},
    {PC_E_HOST_IP, PC_SEV_ERROR, "host-ip-literal", "IP addresses are not allowed"},
    {PC_E_HOST_UPPERCASE, PC_SEV_ERROR, "host-uppercase", "host is not lowercase"},
    {PC_E_HOST_TRAILING_DOT, PC_SEV_ERROR, "host-trailing-dot", "host ends with a dot"},
    {PC_E_HOST_UNICODE, PC_SEV_ERROR, "host-unicode", "host is not ASCII (use the A-label)"},
    {PC_E_HOST_SYNTAX, PC_SEV_ERROR, "host-syntax", "invalid host name"},
    {PC_E_HOST_LENGTH, PC_SEV_ERROR, "host-length", "host name or label too long"},
    {PC_E_HOST_SINGLE_LABEL, PC_SEV_ERROR, "host-single-label", "host has a single label"},
    {PC_E_HOST_PUNYCODE, PC_SEV_ERROR, "host-punycode", "invalid xn-- label"},
    {PC_E_WILDCARD_POSITION, PC_SEV_ERROR, "wildcard-position", "misplaced wildcard"},
    {PC_E_WILDCARD_PUBLIC, PC_SEV_ERROR, "wildcard-public-suffix", "wildcard over a public suffix"},
    {PC_E_WILDCARD_DNS, PC_SEV_ERROR, "wildcard-dns-service", "host under a wildcard-DNS service"},
    {PC_E_PORTS_MISSING, PC_SEV_ERROR, "ports-missing", "rule without ports"},
    {PC_E_PORTS_EMPTY, PC_SEV_ERROR, "ports-empty", "empty ports"},
    {PC_E_PORT_ALLOW_ALL, PC_SEV_ERROR, "port-allow-all", "a port pattern that allows everything"},
    {PC_E_PORT_QUOTED, PC_SEV_ERROR, "port-quoted", "quoted port number"},
    {PC_E_PORT_RANGE, PC_SEV_ERROR, "port-out-of-range", "port outside 1..65535"},
    {PC_E_PORT_LEADING_ZERO, PC_SEV_ERROR, "port-leading-zero", "port with a leading zero"},
    {PC_E_PORT_SYNTAX, PC_SEV_ERROR, "port-syntax", "invalid port"},
    {PC_E_PORT_REVERSED, PC_SEV_ERROR, "port-range-reversed", "port range with low > high"},
    {PC_E_SOURCE, PC_SEV_ERROR, "bad-source", "invalid source provenance"},
    {PC_E_PROTOCOL, PC_SEV_ERROR, "bad-protocol", "protocol is not tls, http or tcp"},
    {PC_E_PROTOCOL_WILDCARD, PC_SEV_ERROR, "tcp-wildcard", "protocol tcp on a wildcard host"},
    {PC_E_TOO_MANY_LISTS, PC_SEV_ERROR, "too-many-lists", "too many lists"},
    {PC_E_TOO_MANY_RULES, PC_SEV_ERROR, "too-many-rules", "too many rules"},
    {PC_E_TOO_MANY_PORTS, PC_SEV_ERROR, "too-many-ports", "too many ports in a rule"},
    {PC_E_TOO_MANY_INCLUDES, PC_SEV_ERROR, "too-many-includes", "too many includes in a list"},
    {PC_E_EFFECTIVE_TOO_LARGE, PC_SEV_ERROR, "effective-too-large", "flattened lists too large"},
    {PC_W_COVERED, PC_SEV_WARNING, "rule-covered", "exact rule covered by a wildcard"},
    {PC_W_DUPLICATE_RULE, PC_SEV_WARNING, "duplicate-rule", "duplicate rule"},
    {PC_W_PORT_OVERLAP, PC_SEV_WARNING, "port-overlap", "overlapping ports"},
    {PC_W_WIDE_PORT_RANGE, PC_SEV_WARNING, "wide-port-range", "port range wider than 1024 ports"},
};

const pc_code_info *pc_code_all(size_t *count)
{
    *count = sizeof code_table / sizeof *code_table;
    return code_table;
}

const pc_code_info *pc_code_lookup(pc_code code)
{
    for (size_t i = 0; i < sizeof code_table / sizeof *code_table; i++)
        if (code_table[i].code == code)
            return &code_table[i];
    return NULL;
}

void pc_diagnostics_init(pc_diagnostics *d)
{
    memset(d, 0, sizeof *d);
}

static void diagnostic_free(pc_diagnostic *x)
{
    free(x->file);
    free(x->message);
    free(x->help);
    free(x->source_line);
}

void pc_diagnostics_free(pc_diagnostics *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->count; i++)
        diagnostic_free(&d->items[i]);
    free(d->items);
    pc_diagnostics_init(d);
}

static char *dup_or_null(const char *s, bool *failed)
{
    if (!s)
        return NULL;
    char *c = strdup(s);
    if (!c)
        *failed = true;
    return c;
}

static ph_status reserve_one(pc_diagnostics *d)
{
    if (d->count < d->cap)
        return PH_OK;
    size_t ncap = d->cap ? d->cap * 2 : 16;
    if (ncap > PC_MAX_STORED_DIAGNOSTICS)
        ncap = PC_MAX_STORED_DIAGNOSTICS;
    pc_diagnostic *n = realloc(d->items, ncap * sizeof *n);
    if (!n)
        return PH_E_NOMEM;
    d->items = n;
    d->cap = ncap;
    return PH_OK;
}

ph_status pc_diagnostics_add(pc_diagnostics *d, pc_code code, const char *file, uint32_t line,
                             uint32_t col, const char *source_line, const char *help,
                             const char *fmt, ...)
{
    const pc_code_info *info = pc_code_lookup(code);
    pc_severity sev = info ? info->severity : PC_SEV_ERROR;
    if (sev == PC_SEV_ERROR)
        d->errors++;
    else
        d->warnings++;
    if (d->count >= PC_MAX_STORED_DIAGNOSTICS) {
        d->dropped++;
        return PH_E_LIMIT;
    }
    if (reserve_one(d) != PH_OK) {
        d->nomem = true;
        return PH_E_NOMEM;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    bool failed = false;
    pc_diagnostic x = {
        .severity = sev,
        .code = code,
        .file = dup_or_null(file ? file : "-", &failed),
        .line = line,
        .col = col,
        .message = dup_or_null(msg, &failed),
        .help = dup_or_null(help, &failed),
        .source_line = dup_or_null(source_line, &failed),
    };
    if (failed) {
        diagnostic_free(&x);
        d->nomem = true;
        return PH_E_NOMEM;
    }
    d->items[d->count++] = x;
    return PH_OK;
}

static int compare_diagnostics(const void *pa, const void *pb)
{
    const pc_diagnostic *a = pa, *b = pb;
    int c = strcmp(a->file, b->file);
    if (c)
        return c;
    if (a->line != b->line)
        return a->line < b->line ? -1 : 1;
    if (a->col != b->col)
        return a->col < b->col ? -1 : 1;
    if (a->code != b->code)
        return a->code < b->code ? -1 : 1;
    return strcmp(a->message, b->message);
}

void pc_diagnostics_sort(pc_diagnostics *d)
{
    if (d->count > 1)
        qsort(d->items, d->count, sizeof *d->items, compare_diagnostics);
}

ph_status pc_diagnostics_move(pc_diagnostics *dst, pc_diagnostics *src)
{
    size_t room = PC_MAX_STORED_DIAGNOSTICS - dst->count;
    size_t take = src->count < room ? src->count : room;
    if (dst->count + take > dst->cap) {
        pc_diagnostic *n = realloc(dst->items, (dst->count + take) * sizeof *n);
        if (!n)
            return PH_E_NOMEM;
        dst->items = n;
        dst->cap = dst->count + take;
    }
    if (take)
        memcpy(dst->items + dst->count, src->items, take * sizeof *src->items);
    dst->count += take;
    for (size_t i = take; i < src->count; i++)
        diagnostic_free(&src->items[i]);
    dst->errors += src->errors;
    dst->warnings += src->warnings;
    dst->dropped += src->dropped + (src->count - take);
    dst->nomem |= src->nomem;
    free(src->items);
    pc_diagnostics_init(src);
    return PH_OK;
}

void pc_diagnostics_promote_warnings(pc_diagnostics *d)
{
    for (size_t i = 0; i < d->count; i++)
        d->items[i].severity = PC_SEV_ERROR;
    d->errors += d->warnings;
    d->warnings = 0;
}

bool pc_diag_format_parse(const char *name, pc_diag_format *out)
{
    static const struct {
        const char *name;
        pc_diag_format f;
    } names[] = {{"text", PC_FORMAT_TEXT},
                 {"json", PC_FORMAT_JSON},
                 {"sarif", PC_FORMAT_SARIF},
                 {"github", PC_FORMAT_GITHUB}};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i].name) == 0) {
            *out = names[i].f;
            return true;
        }
    return false;
}

ph_status pc_diagnostics_print(FILE *out, const pc_diagnostics *d, pc_diag_format format)
{
    switch (format) {
    case PC_FORMAT_TEXT:
        return pc_format_text(out, d);
    case PC_FORMAT_JSON:
        return pc_format_json(out, d);
    case PC_FORMAT_SARIF:
        return pc_format_sarif(out, d);
    case PC_FORMAT_GITHUB:
        return pc_format_github(out, d);
    }
    return PH_E_INVAL;
}
