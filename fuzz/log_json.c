/*
 * fuzz/log_json.c - the proxy's JSON log lines (proxy/src/log_json.c), which
 * escape strings themselves instead of building a jansson tree.
 *
 * Input: up to 8 bytes of numbers (conn_id; the low bytes also pick the
 * port, status, reason, line, byte counts, duration and whether it is a
 * forwarded request), then the string fields separated by NUL bytes in
 * this order: peer, tenant, lease, list, host, dialed, checked, detail,
 * rule_file, policy_id, end, sni, then an event line's level, event and
 * message (a missing field is NULL; a field of exactly "\xff" too).
 *
 * Invariants: the line is one line (one newline, at its end, and no byte
 * below 0x20 before it) that jansson parses to an object with the fields in
 * their order; each string field valid as UTF-8 comes back as the same
 * bytes, one that is not is absent, a NULL is null; "checked" is the array
 * of its space-separated valid parts; the rule is "file:line" cut to 199
 * bytes; the numbers come back; a buffer too short gets a prefix of the
 * same line and the same length. The same for the event line.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "pinhole/utf8.h"

#include "log_json.h"

#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

enum { F_PEER, F_TENANT, F_LEASE, F_LIST, F_HOST, F_DIALED, F_CHECKED, F_DETAIL, F_RULE_FILE,
       F_POLICY_ID, F_END, F_SNI, F_LEVEL, F_EVENT, F_MESSAGE, F_COUNT };

static const char *const keys[F_COUNT] = { "peer", "tenant", "lease", "list", "host", "dialed",
                                           NULL, "detail", NULL, "policy_id", "end", "sni" };

static const char *const TIME = "2026-12-02T07:00:00.123Z";

/* The line formatted (malloc'd, NUL-terminated, *n its length), with the
 * measure of a too-short buffer checked against it. */
static char *format(size_t (*fn)(const void *, char *, size_t), const void *arg, size_t *n)
{
    *n = fn(arg, NULL, 0);
    char *line = malloc(*n + 1);
    CHECK(line != NULL);
    CHECK(fn(arg, line, *n) == *n);
    line[*n] = '\0';
    if (*n > 1) {
        char *part = malloc(*n / 2);
        CHECK(part != NULL);
        CHECK(fn(arg, part, *n / 2) == *n);
        CHECK(memcmp(part, line, *n / 2) == 0);
        free(part);
    }
    /* One line: a newline at the end only, no control byte before it. */
    CHECK(*n > 0 && line[*n - 1] == '\n');
    for (size_t i = 0; i + 1 < *n; i++)
        CHECK((unsigned char)line[i] >= 0x20);
    return line;
}

static size_t fmt_connection(const void *arg, char *buf, size_t cap)
{
    return px_log_format_connection(arg, TIME, buf, cap);
}

typedef struct event_args {
    const char *level, *event, *message;
} event_args;

static size_t fmt_event(const void *arg, char *buf, size_t cap)
{
    const event_args *a = arg;
    return px_log_format_event(TIME, a->level, a->event, a->message, buf, cap);
}

static bool utf8(const char *s, size_t n)
{
    return ph_utf8_valid(s, n);
}

/* o[key] is s: null for NULL, absent for invalid UTF-8, else the bytes. */
static void check_str(json_t *o, const char *key, const char *s, size_t n)
{
    json_t *v = json_object_get(o, key);
    if (s == NULL) {
        CHECK(json_is_null(v));
    } else if (!utf8(s, n)) {
        CHECK(v == NULL);
    } else {
        CHECK(json_is_string(v));
        CHECK(json_string_length(v) == n && memcmp(json_string_value(v), s, n) == 0);
    }
}

static void check_checked(json_t *o, const char *s)
{
    json_t *a = json_object_get(o, "checked");
    if (s == NULL) {
        CHECK(json_is_null(a));
        return;
    }
    CHECK(json_is_array(a));
    size_t k = 0;
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, " ");
        if (utf8(p, n)) {
            json_t *v = json_array_get(a, k++);
            CHECK(json_is_string(v) && json_string_length(v) == n &&
                  memcmp(json_string_value(v), p, n) == 0);
        }
        p += n;
        p += *p == ' ';
    }
    CHECK(json_array_size(a) == k);
}

/* The keys of o in order: the fixed ones, each string field present unless
 * it is not UTF-8. */
static void check_order(json_t *o, const px_log_record *r, const char *rule, size_t rule_len)
{
    const char *want[32];
    size_t n = 0;
    want[n++] = "time";
    want[n++] = "event";
    want[n++] = "conn_id";
#define STR(k, v) \
    if ((v) == NULL || utf8((v), strlen(v))) \
        want[n++] = (k);
    STR("peer", r->peer);
    if (r->method)
        want[n++] = "method";
    STR("tenant", r->tenant);
    STR("lease", r->lease);
    STR("list", r->list);
    STR("host", r->host);
    want[n++] = "port";
    STR("dialed", r->dialed);
    want[n++] = "checked";
    want[n++] = "status";
    want[n++] = "verdict";
    want[n++] = "reason";
    STR("detail", r->detail);
    if (rule == NULL || utf8(rule, rule_len))
        want[n++] = "rule";
    STR("policy_id", r->policy_id);
    want[n++] = "bytes_up";
    want[n++] = "bytes_down";
    want[n++] = "duration_s";
    STR("end", r->end);
    if (r->method == NULL)
        STR("sni", r->sni);
#undef STR
    CHECK(json_object_size(o) == n);
    size_t i = 0;
    for (void *it = json_object_iter(o); it != NULL; it = json_object_iter_next(o, it))
        CHECK(i < n && strcmp(json_object_iter_key(it), want[i++]) == 0);
    CHECK(i == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t num = 0;
    size_t at = 0;
    for (; at < size && at < 8; at++)
        num |= (uint64_t)data[at] << (8 * at);
    /* The strings: NUL-separated, copied so each is a C string. */
    char *copy = malloc(size - at + 1);
    CHECK(copy != NULL);
    memcpy(copy, data + at, size - at);
    copy[size - at] = '\0';
    const char *f[F_COUNT] = { 0 };
    char *p = copy, *end = copy + (size - at);
    for (int k = 0; k < F_COUNT && p <= end; k++) {
        f[k] = strcmp(p, "\xff") == 0 ? NULL : p;
        p += strlen(p) + 1;
    }

    px_log_record r = {
        .conn_id = num,
        .peer = f[F_PEER], .tenant = f[F_TENANT], .lease = f[F_LEASE], .list = f[F_LIST],
        .host = f[F_HOST], .port = (unsigned)(num & 0xffff), .dialed = f[F_DIALED],
        .checked = f[F_CHECKED], .status = (int)((num >> 16) % 600),
        .reason = (ph_reason)((num >> 26) % 24), .detail = f[F_DETAIL],
        .rule_file = f[F_RULE_FILE], .rule_line = (unsigned)(num >> 32),
        .policy_id = f[F_POLICY_ID], .bytes_up = num >> 7, .bytes_down = num * 31,
        .duration_s = (double)(num % 100000007) / 1e5 - (num & 1 ? 0 : 5.0),
        .end = f[F_END], .method = (num >> 40) & 1 ? "GET" : NULL, .sni = f[F_SNI],
    };
    size_t n;
    char *line = format(fmt_connection, &r, &n);
    json_error_t err;
    json_t *o = json_loadb(line, n - 1, 0, &err);
    CHECK(json_is_object(o));
    CHECK(strcmp(json_string_value(json_object_get(o, "time")), TIME) == 0);
    CHECK(strcmp(json_string_value(json_object_get(o, "event")),
                 r.method ? "request" : "connection") == 0);
    CHECK((uint64_t)json_integer_value(json_object_get(o, "conn_id")) == r.conn_id);
    if (r.port)
        CHECK(json_integer_value(json_object_get(o, "port")) == (json_int_t)r.port);
    else
        CHECK(json_is_null(json_object_get(o, "port")));
    CHECK(json_integer_value(json_object_get(o, "status")) == r.status);
    CHECK((uint64_t)json_integer_value(json_object_get(o, "bytes_up")) == r.bytes_up);
    CHECK((uint64_t)json_integer_value(json_object_get(o, "bytes_down")) == r.bytes_down);
    json_t *d = json_object_get(o, "duration_s");
    CHECK(json_is_real(d) || json_is_integer(d));
    double want_d = r.duration_s >= 0 ? r.duration_s : 0.0;
    CHECK(json_number_value(d) - want_d < 1e-6 && want_d - json_number_value(d) < 1e-6);
    for (int k = 0; k < F_LEVEL; k++)
        if (keys[k] != NULL && !(k == F_SNI && r.method != NULL))
            check_str(o, keys[k], f[k], f[k] != NULL ? strlen(f[k]) : 0);
    check_checked(o, r.checked);
    char rule[200];
    size_t rule_len = 0;
    if (r.rule_file != NULL) {
        int rn = snprintf(rule, sizeof rule, "%s:%u", r.rule_file, r.rule_line);
        rule_len = (size_t)rn < sizeof rule ? (size_t)rn : sizeof rule - 1;
    }
    check_str(o, "rule", r.rule_file != NULL ? rule : NULL, rule_len);
    check_order(o, &r, r.rule_file != NULL ? rule : NULL, rule_len);
    json_decref(o);
    free(line);

    event_args a = { f[F_LEVEL], f[F_EVENT], f[F_MESSAGE] };
    line = format(fmt_event, &a, &n);
    o = json_loadb(line, n - 1, 0, &err);
    CHECK(json_is_object(o));
    check_str(o, "level", a.level, a.level ? strlen(a.level) : 0);
    check_str(o, "event", a.event, a.event ? strlen(a.event) : 0);
    check_str(o, "message", a.message, a.message ? strlen(a.message) : 0);
    json_decref(o);
    free(line);
    free(copy);
    return 0;
}
