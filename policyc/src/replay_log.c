/* replay_log.c - the proxy's connection log read back (replay_log.h). */
#include "replay_log.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pinhole/ascii.h"
#include "pinhole/diag.h"
#include "pinhole/utf8.h"
#include "source_map.h"

/* Bytes asked of the source per read. */
#define READ_CHUNK (256u * 1024u)

ssize_t pc_log_mem_read(void *ctx, void *buf, size_t n, const char **why)
{
    (void)why;
    pc_log_mem *m = ctx;
    size_t k = m->len - m->at;
    if (k > n)
        k = n;
    if (m->chunk != 0 && k > m->chunk)
        k = m->chunk;
    memcpy(buf, m->p + m->at, k);
    m->at += k;
    return (ssize_t)k;
}

ph_status pc_log_reader_init(pc_log_reader *r, pc_log_read_fn read, void *ctx, ph_diag *diag)
{
    memset(r, 0, sizeof *r);
    r->read = read;
    r->ctx = ctx;
    r->cap = PC_LOG_LINE_MAX + READ_CHUNK;
    r->buf = malloc(r->cap);
    if (r->buf == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    return PH_OK;
}

void pc_log_reader_free(pc_log_reader *r)
{
    free(r->buf);
    r->buf = NULL;
}

/* Reads more after the buffered bytes (moved to the front first when the
 * room after them is short of a chunk: a source giving a few bytes a time
 * costs no move per read). 0 at the end, -1 on error (diag filled), else
 * the count. */
static ssize_t fill(pc_log_reader *r, ph_diag *diag)
{
    if (r->start > 0 && r->cap - r->end < READ_CHUNK) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    const char *why = "read error";
    ssize_t n = r->read(r->ctx, r->buf + r->end, r->cap - r->end, &why);
    if (n < 0) {
        ph_diag_set(diag, PH_E_IO, 0, "%s", why);
        return -1;
    }
    if (n == 0)
        r->eof = true;
    r->end += (size_t)n;
    return n;
}

ph_status pc_log_reader_next(pc_log_reader *r, const char **line, size_t *len, bool *too_long,
                             ph_diag *diag)
{
    bool skipping = false; /* inside a line over the limit: its bytes are dropped */
    size_t scanned = r->start;
    for (;;) {
        char *nl = memchr(r->buf + scanned, '\n', r->end - scanned);
        if (nl != NULL) {
            size_t at = (size_t)(nl - r->buf);
            *line = r->buf + r->start;
            *len = skipping ? 0 : at - r->start;
            *too_long = skipping;
            r->start = at + 1;
            r->line_no++;
            return PH_OK;
        }
        if (r->end - r->start > PC_LOG_LINE_MAX) {
            skipping = true;
            r->start = r->end; /* dropped: the rest of the line is found by its '\n' */
        }
        if (r->eof) {
            if (r->end == r->start && !skipping)
                return PH_E_NOT_FOUND;
            *line = r->buf + r->start;
            *len = skipping ? 0 : r->end - r->start;
            *too_long = skipping;
            r->start = r->end;
            r->line_no++;
            return PH_OK;
        }
        size_t pending = r->end - r->start;
        if (fill(r, diag) < 0)
            return PH_E_IO;
        scanned = r->start + pending; /* fill may have moved them to the front */
    }
}

/* ---- one line -------------------------------------------------------------- */

/* Where in the decision a logged reason was given. */
typedef enum stage { STAGE_BEFORE, STAGE_TABLE_REFUSED, STAGE_TABLE_ALLOWED } stage;

static stage reason_stage(ph_reason r)
{
    switch (r) {
    case PH_REASON_NOT_ALLOWLISTED:
    case PH_REASON_PORT_NOT_ALLOWED:
    case PH_REASON_UNKNOWN_LIST:
    case PH_REASON_WILDCARD_DNS:
        return STAGE_TABLE_REFUSED;
    case PH_REASON_ALLOWED:
    case PH_REASON_DNS_FAILURE:
    case PH_REASON_DNS_TIMEOUT:
    case PH_REASON_DENIED_ADDRESS:
    case PH_REASON_UPSTREAM_UNREACHABLE:
    case PH_REASON_UPSTREAM_TIMEOUT:
    case PH_REASON_UPSTREAM_BAD_RESPONSE:
    case PH_REASON_LIMIT_EXCEEDED:
    case PH_REASON_TLS_MALFORMED:
    case PH_REASON_SNI_MISSING:
    case PH_REASON_SNI_MISMATCH:
    case PH_REASON_SNI_ENCRYPTED:
    case PH_REASON_PROTOCOL_NOT_ALLOWED:
        return STAGE_TABLE_ALLOWED;
    default:
        return STAGE_BEFORE;
    }
}

/* A string field: absent and null give *out NULL (returns true); a string
 * gives it (returns true); any other type returns false. */
static bool opt_string(json_t *o, const char *key, const char **out, size_t *len)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    *len = 0;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_string(v))
        return false;
    *out = json_string_value(v);
    *len = json_string_length(v);
    return true;
}

/* Copies s[0..n) to dst (cap includes the NUL). False when it does not
 * fit or holds a NUL (jansson accepts none here, but the copy must not
 * shorten a field silently either way). */
static bool copy_field(char *dst, size_t cap, const char *s, size_t n)
{
    if (s == NULL) {
        dst[0] = '\0';
        return true;
    }
    if (n >= cap || memchr(s, '\0', n) != NULL)
        return false;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return true;
}

/* Text the report prints as it is: no control character and nothing
 * hidden (pc_code_point_hidden: bidirectional overrides, zero-width
 * characters...), so a forged log line cannot rewrite the terminal or the
 * CI annotation it is shown in. */
static bool displayable(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = ph_utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (cp < 0x20 || cp == 0x7f || cp == PH_UTF8_INVALID || pc_code_point_hidden(cp))
            return false;
        i += k;
    }
    return true;
}

/* A grant's list name: 1..64 of [A-Za-z0-9._-] (pinhole/grant.h). */
static bool list_name(const char *s, size_t n)
{
    if (n == 0 || n > PC_LOG_LIST_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ph_is_digit(s[i]) && !ph_is_lower(s[i]) && !ph_is_upper(s[i]) && s[i] != '.' &&
            s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

/* The proxy's times: RFC 3339 digits and separators only. */
static bool time_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ph_is_digit(s[i]) && (s[i] == '\0' || strchr("-:.TZ+", s[i]) == NULL))
            return false;
    return true;
}

static bool is_lower_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!ph_is_digit(s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
            return false;
    return true;
}

static pc_log_kind classify(json_t *o, pc_log_entry *e, const char **why)
{
    const char *s;
    size_t n;
    if (!json_is_object(o))
        return *why = "not a JSON object", PC_LOG_MALFORMED;
    if (!opt_string(o, "event", &s, &n) || s == NULL)
        return *why = "no \"event\" string", PC_LOG_MALFORMED;
    if (strcmp(s, "connection") != 0 && strcmp(s, "request") != 0)
        return PC_LOG_OTHER_EVENT;

    const char *host, *list, *reason, *rule, *pid, *time;
    size_t host_n, list_n, reason_n, rule_n, pid_n, time_n;
    if (!opt_string(o, "host", &host, &host_n))
        return *why = "\"host\" is not a string", PC_LOG_MALFORMED;
    if (!opt_string(o, "list", &list, &list_n))
        return *why = "\"list\" is not a string", PC_LOG_MALFORMED;
    if (!opt_string(o, "reason", &reason, &reason_n))
        return *why = "\"reason\" is not a string", PC_LOG_MALFORMED;
    if (!opt_string(o, "rule", &rule, &rule_n))
        return *why = "\"rule\" is not a string", PC_LOG_MALFORMED;
    if (!opt_string(o, "policy_id", &pid, &pid_n))
        return *why = "\"policy_id\" is not a string", PC_LOG_MALFORMED;
    if (!opt_string(o, "time", &time, &time_n))
        return *why = "\"time\" is not a string", PC_LOG_MALFORMED;
    json_t *port = json_object_get(o, "port");
    if (port != NULL && !json_is_null(port) &&
        (!json_is_integer(port) || json_integer_value(port) < 1 ||
         json_integer_value(port) > 65535))
        return *why = "\"port\" is not a port number", PC_LOG_MALFORMED;

    if (pid != NULL && (pid_n != PH_TABLE_ID_HEX_LEN || !is_lower_hex(pid, pid_n)))
        return *why = "\"policy_id\" is not 64 lowercase hex digits", PC_LOG_MALFORMED;
    if (!copy_field(e->time, sizeof e->time, time, time_n))
        return *why = "\"time\" is too long", PC_LOG_MALFORMED;
    if (time != NULL && !time_text(time, time_n))
        return *why = "\"time\" is not an RFC 3339 time", PC_LOG_MALFORMED;
    if (!copy_field(e->rule, sizeof e->rule, rule, rule_n))
        return *why = "\"rule\" is too long", PC_LOG_MALFORMED;
    if (rule != NULL && !displayable(rule, rule_n))
        return *why = "\"rule\" holds a control or hidden character", PC_LOG_MALFORMED;
    if (!copy_field(e->list, sizeof e->list, list, list_n))
        return *why = "\"list\" is too long", PC_LOG_MALFORMED;
    if (list != NULL && list_n > 0 && !list_name(list, list_n))
        return *why = "\"list\" is not a list name", PC_LOG_MALFORMED;
    ph_reason r = PH_REASON_PARSE_ERROR;
    if (reason != NULL && (memchr(reason, '\0', reason_n) != NULL ||
                           ph_reason_from_code(reason, &r) != PH_OK))
        return *why = "\"reason\" is not a reason code", PC_LOG_MALFORMED;
    if (host != NULL && (host_n > PH_HOST_MAX || ph_host_check(host, host_n, NULL) != PH_HOST_OK))
        return *why = "\"host\" is not a canonical host name", PC_LOG_MALFORMED;

    if (host == NULL || port == NULL || json_is_null(port))
        return PC_LOG_NO_DESTINATION;
    if (reason == NULL)
        return PC_LOG_UNDECIDED;
    stage st = reason_stage(r);
    if (st == STAGE_BEFORE)
        return PC_LOG_UNDECIDED;
    if (list == NULL || list_n == 0)
        return PC_LOG_NO_LIST;
    memcpy(e->host, host, host_n + 1);
    e->port = (uint16_t)json_integer_value(port);
    e->reason = r;
    e->allowed = st == STAGE_TABLE_ALLOWED;
    if (pid != NULL)
        memcpy(e->policy_id, pid, pid_n + 1);
    else
        e->policy_id[0] = '\0';
    return PC_LOG_DECIDED;
}

pc_log_kind pc_log_line_parse(const char *line, size_t len, pc_log_entry *e, const char **why)
{
    json_error_t err;
    /* A NUL byte is no JSON; jansson's own check (no JSON_ALLOW_NUL)
     * refuses "\u0000" inside strings, and invalid UTF-8 anywhere. */
    json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
    if (o == NULL) {
        *why = "not JSON (or not UTF-8, or a duplicate key)";
        return PC_LOG_MALFORMED;
    }
    pc_log_kind k = classify(o, e, why);
    json_decref(o);
    return k;
}

const char *pc_log_kind_name(pc_log_kind k)
{
    switch (k) {
    case PC_LOG_DECIDED: return "decided";
    case PC_LOG_NO_DESTINATION: return "no_destination";
    case PC_LOG_NO_LIST: return "no_list";
    case PC_LOG_UNDECIDED: return "undecided";
    case PC_LOG_OTHER_EVENT: return "other_event";
    case PC_LOG_MALFORMED: return "malformed";
    }
    return "malformed";
}
