/* test_log_json_bytes.c - the log lines' bytes against jansson's: every line
 * px_log_format_connection / px_log_format_event writes equals, byte for
 * byte, what json_dumps (JSON_COMPACT | JSON_PRESERVE_ORDER) writes for the
 * same fields (the reference below builds the tree as the proxy once did),
 * over hostile strings (control bytes, quotes, backslashes, DEL, U+2028,
 * invalid UTF-8: overlong, surrogate, above U+10FFFF, cut short, stray
 * continuation) and long ones (past the stack buffer, the rule cut at 199
 * bytes inside a character); every such line parses back with jansson to
 * the same values. And a line costs no allocation: px_log_connection of an
 * ordinary connection calls malloc zero times (jansson's tree took dozens),
 * a line longer than the stack buffer exactly once. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "pinhole/utf8.h"

#include "alloc_count.h"
#include "log_json.h"
#include "test_support.h"

/* ---- the reference: the fields as a jansson tree, dumped ---- */

static void ref_str(json_t *o, const char *key, const char *v)
{
    json_object_set_new(o, key, v ? json_string(v) : json_null());
}

static void ref_list(json_t *o, const char *key, const char *v)
{
    json_t *a = v ? json_array() : NULL;
    for (const char *p = v; a && *p;) {
        size_t n = strcspn(p, " ");
        json_array_append_new(a, json_stringn(p, n));
        p += n;
        p += *p == ' ';
    }
    json_object_set_new(o, key, a ? a : json_null());
}

static char *ref_dump(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    assert_non_null(s);
    return s;
}

/* The line as the jansson tree gave it, newline included (malloc'd). */
static char *ref_connection(const px_log_record *r, const char *time)
{
    json_t *o = json_object();
    ref_str(o, "time", time);
    json_object_set_new(o, "event", json_string(r->method ? "request" : "connection"));
    json_object_set_new(o, "conn_id", json_integer((json_int_t)r->conn_id));
    ref_str(o, "peer", r->peer);
    if (r->method)
        ref_str(o, "method", r->method);
    ref_str(o, "tenant", r->tenant);
    ref_str(o, "lease", r->lease);
    ref_str(o, "list", r->list);
    ref_str(o, "host", r->host);
    json_object_set_new(o, "port", r->port ? json_integer(r->port) : json_null());
    ref_str(o, "dialed", r->dialed);
    ref_list(o, "checked", r->checked);
    json_object_set_new(o, "status", json_integer(r->status));
    ref_str(o, "verdict", r->status != 0 && r->reason == PH_REASON_ALLOWED ? "allowed" : "refused");
    ref_str(o, "reason", r->status == 0 ? NULL : ph_reason_code(r->reason));
    ref_str(o, "detail", r->detail);
    if (r->rule_file) {
        char rule[200];
        snprintf(rule, sizeof rule, "%s:%u", r->rule_file, r->rule_line);
        ref_str(o, "rule", rule);
    } else {
        ref_str(o, "rule", NULL);
    }
    ref_str(o, "policy_id", r->policy_id);
    json_object_set_new(o, "bytes_up", json_integer((json_int_t)r->bytes_up));
    json_object_set_new(o, "bytes_down", json_integer((json_int_t)r->bytes_down));
    json_t *tail = json_object();
    ref_str(tail, "end", r->end);
    if (r->method == NULL)
        ref_str(tail, "sni", r->sni);
    char *head = ref_dump(o), *rest = ref_dump(tail);
    size_t n = strlen(head) + strlen(rest) + 64;
    char *line = malloc(n);
    assert_non_null(line);
    snprintf(line, n, "%.*s,\"duration_s\":%.6f,%s\n", (int)(strlen(head) - 1), head,
             r->duration_s >= 0 ? r->duration_s : 0.0, rest + 1);
    free(head);
    free(rest);
    return line;
}

static char *ref_event(const char *time, const char *level, const char *event, const char *msg)
{
    json_t *o = json_object();
    ref_str(o, "time", time);
    ref_str(o, "level", level);
    ref_str(o, "event", event);
    ref_str(o, "message", msg);
    char *s = ref_dump(o);
    size_t n = strlen(s);
    s = realloc(s, n + 2);
    assert_non_null(s);
    memcpy(s + n, "\n", 2);
    return s;
}

/* ---- hostile strings ---- */

static bool utf8_ok(const char *s)
{
    return ph_utf8_valid(s, strlen(s));
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Pieces a string is built from: ASCII, every escape jansson writes, DEL,
 * characters of every length (U+2028 and U+2029 among them), and every kind
 * of invalid sequence. */
static const char *const pieces[] = {
    "a", "Z", "0", ".", ":", "-", " ", " ", "/", "\"", "\\", "\b", "\f", "\n", "\r", "\t", "\x01",
    "\x1f", "\x7f", "\x1b[31m", "\xc3\xa9", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xef\xbb\xbf",
    "\xef\xbf\xbf", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\xd7\xa9", "\\u0000", "</script>",
    "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf",
    "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "\xfe", "\xe2\x80", "\xf0\x9f\x98", "\xc3",
};

/* A string of up to max bytes (malloc'd), or NULL one time in eight. With
 * valid set, only the pieces that are valid UTF-8 on their own. */
static char *hostile(size_t max, bool valid)
{
    if (rnd() % 8 == 0)
        return NULL;
    size_t npieces = sizeof pieces / sizeof *pieces;
    size_t target = rnd() % 4 == 0 ? (size_t)(rnd() % (max + 1)) : (size_t)(rnd() % 40);
    char *s = malloc(max + 1);
    assert_non_null(s);
    size_t at = 0;
    /* Now and then a single bad byte in an otherwise clean string. */
    bool one_bad = !valid && rnd() % 4 == 0;
    while (at < target) {
        const char *p = pieces[rnd() % npieces];
        if ((valid || one_bad) && !utf8_ok(p))
            continue;
        size_t n = strlen(p);
        if (at + n > max)
            break;
        memcpy(s + at, p, n);
        at += n;
    }
    if (one_bad && at > 0)
        s[rnd() % at] = (char)(0x80 | (rnd() & 0x7f));
    s[at] = '\0';
    return s;
}

/* A hostile record; its strings are freed by record_free. */
static void hostile_record(px_log_record *r)
{
    static const char *const methods[] = { NULL, NULL, "GET", "POST" };
    memset(r, 0, sizeof *r);
    r->conn_id = rnd();
    if (rnd() % 4 == 0)
        r->conn_id >>= rnd() % 64;
    r->peer = hostile(64, false);
    r->tenant = hostile(300, false);
    r->lease = hostile(300, false);
    r->list = hostile(300, false);
    r->host = hostile(300, false);
    r->port = rnd() % 3 == 0 ? 0 : (unsigned)(rnd() % 65536);
    r->dialed = hostile(64, false);
    r->checked = hostile(400, false);
    r->status = rnd() % 3 == 0 ? 0 : (int)(rnd() % 600);
    r->reason = (ph_reason)(rnd() % 20);
    r->detail = hostile(rnd() % 16 == 0 ? 6000 : 300, false);
    r->rule_file = hostile(400, false);
    r->rule_line = (unsigned)rnd();
    r->policy_id = hostile(80, false);
    r->bytes_up = rnd() >> (rnd() % 64);
    r->bytes_down = rnd() >> (rnd() % 64);
    r->duration_s = (double)(rnd() % 100000000) / 1e6;
    if (rnd() % 16 == 0)
        r->duration_s = -1;
    /* end is always one of the proxy's own words (valid UTF-8: the
     * reference writes a line that is not JSON when it is left out). */
    r->end = rnd() % 4 == 0 ? NULL : hostile(30, true);
    r->method = methods[rnd() % 4];
    r->sni = hostile(300, false);
}

static void record_free(px_log_record *r)
{
    const char **s[] = { &r->peer, &r->tenant, &r->lease, &r->list, &r->host, &r->dialed,
                         &r->checked, &r->detail, &r->rule_file, &r->policy_id, &r->end,
                         &r->sni };
    for (size_t i = 0; i < sizeof s / sizeof *s; i++) {
        free((void *)(uintptr_t)*s[i]); /* hostile() allocated it */
        *s[i] = NULL;
    }
}

/* px_log_format_connection's line (malloc'd, NUL-terminated), checked to
 * be measured right by a buffer too short for it. */
static char *formatted(const px_log_record *r, const char *time)
{
    size_t n = px_log_format_connection(r, time, NULL, 0);
    char *buf = malloc(n + 1);
    assert_non_null(buf);
    assert_int_equal(px_log_format_connection(r, time, buf, n), n);
    buf[n] = '\0';
    size_t cut = (size_t)(rnd() % (n + 1));
    char *part = malloc(cut + 1);
    assert_non_null(part);
    assert_int_equal(px_log_format_connection(r, time, part, cut), n);
    assert_memory_equal(part, buf, cut);
    free(part);
    return buf;
}

static const char *const TIME = "2026-12-02T07:00:00.123Z";

/* The line parses back (jansson) to the record's values: each valid string
 * as given, each invalid one absent. */
static void check_parses_back(const px_log_record *r, const char *line)
{
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    if (o == NULL)
        fail_msg("not JSON: %s (%s)", line, err.text);
    struct {
        const char *key, *v;
    } f[] = { { "peer", r->peer },       { "tenant", r->tenant }, { "lease", r->lease },
              { "list", r->list },       { "host", r->host },     { "dialed", r->dialed },
              { "detail", r->detail },   { "policy_id", r->policy_id },
              { "end", r->end } };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++) {
        json_t *v = json_object_get(o, f[i].key);
        if (f[i].v == NULL)
            assert_true(json_is_null(v));
        else if (!utf8_ok(f[i].v))
            assert_null(v);
        else if (v == NULL || strcmp(json_string_value(v), f[i].v) != 0)
            fail_msg("%s: %s does not give back the value", f[i].key, line);
    }
    assert_int_equal((uint64_t)json_integer_value(json_object_get(o, "conn_id")), r->conn_id);
    assert_int_equal((uint64_t)json_integer_value(json_object_get(o, "bytes_up")), r->bytes_up);
    json_decref(o);
}

/* ---- the tests ---- */

static void test_hostile_records_give_jansson_bytes(void **state)
{
    (void)state;
    size_t heap_lines = 0;
    for (int i = 0; i < 8000; i++) {
        px_log_record r;
        hostile_record(&r);
        char *want = ref_connection(&r, TIME), *got = formatted(&r, TIME);
        if (strcmp(want, got) != 0)
            fail_msg("record %d:\n jansson: %s ours:    %s", i, want, got);
        heap_lines += strlen(got) > 4096;
        check_parses_back(&r, got);
        free(want);
        free(got);
        record_free(&r);
    }
    /* Some lines took the longer-than-the-stack-buffer path. */
    assert_true(heap_lines > 0);
}

/* Every string of one and two bytes (jansson's escaping of each byte, its
 * verdict on each pair), in an event line (the same escaping as a
 * connection line's, with less of jansson's tree to build per string). */
static void test_every_short_string(void **state)
{
    (void)state;
    char s[3] = { 0 };
    for (unsigned a = 1; a < 256; a++) {
        for (unsigned b = 0; b < 256; b++) {
            s[0] = (char)a;
            s[1] = (char)b;
            char got[128];
            char *want = ref_event(TIME, "info", "x", s);
            size_t n = px_log_format_event(TIME, "info", "x", s, got, sizeof got - 1);
            assert_true(n < sizeof got);
            got[n] = '\0';
            if (strcmp(want, got) != 0)
                fail_msg("bytes %02x %02x:\n jansson: %s ours:    %s", a, b, want, got);
            free(want);
        }
    }
}

/* The rule field is "file:line" cut to 199 bytes: a cut inside a character
 * leaves the field out, as jansson did; a cut after one keeps it. */
static void test_rule_cut_inside_a_character(void **state)
{
    (void)state;
    for (size_t pad = 190; pad < 200; pad++) {
        char file[256];
        memset(file, 'f', pad);
        memcpy(file + pad, "\xe2\x80\xa8\xf0\x9f\x98\x80", 8);
        px_log_record r = { .status = 403, .reason = PH_REASON_NOT_ALLOWLISTED,
                            .rule_file = file, .rule_line = 12, .end = "refused" };
        char *want = ref_connection(&r, TIME), *got = formatted(&r, TIME);
        assert_string_equal(got, want);
        free(want);
        free(got);
    }
}

static void test_event_lines_give_jansson_bytes(void **state)
{
    (void)state;
    for (int i = 0; i < 5000; i++) {
        char *level = hostile(20, false), *event = hostile(20, false);
        char *msg = hostile(511, false);
        char got[4096];
        char *want = ref_event(TIME, level, event, msg);
        size_t n = px_log_format_event(TIME, level, event, msg, got, sizeof got - 1);
        assert_true(n < sizeof got);
        got[n] = '\0';
        if (strcmp(want, got) != 0)
            fail_msg("event %d:\n jansson: %s ours:    %s", i, want, got);
        free(want);
        free(level);
        free(event);
        free(msg);
    }
}

/* ---- allocations: malloc counted in this binary (not under a sanitizer,
 * which owns malloc itself: tests/support/alloc_count.h) ---- */

/* Allocations of one px_log_connection(r), stdout on /dev/null. */
static size_t allocations_of(const px_log_record *r)
{
#if !PH_TEST_ALLOC_COUNTED
    (void)r;
    return 0;
#else
    int null = open("/dev/null", O_WRONLY);
    assert_true(null >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(dup2(null, STDOUT_FILENO) >= 0);
    px_log_connection(r); /* the first line of a thread sets up its clock cache */
    long before = ph_test_allocs();
    px_log_connection(r);
    size_t n = (size_t)(ph_test_allocs() - before);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    close(null);
    return n;
#endif
}

static void test_a_line_allocates_nothing(void **state)
{
    (void)state;
#if !PH_TEST_ALLOC_COUNTED
    skip();
#endif
    px_log_record r = {
        .conn_id = 42, .peer = "127.0.0.1:51234", .tenant = "acme", .lease = "lease-1",
        .list = "default", .host = "api.github.com", .port = 443, .dialed = "140.82.112.5:443",
        .checked = "140.82.112.5 2606:50c0:8000::154", .status = 200,
        .reason = PH_REASON_ALLOWED, .rule_file = "allowlist.yaml", .rule_line = 7,
        .policy_id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        .bytes_up = 517, .bytes_down = 4096, .duration_s = 0.25, .end = "closed",
        .sni = "api.github.com",
    };
    size_t n = allocations_of(&r);
    printf("# allocations per connection line: %zu\n", n);
    assert_int_equal(n, 0);
    /* A line longer than the stack buffer: one buffer of its size. */
    char detail[5000];
    memset(detail, '"', sizeof detail - 1);
    detail[sizeof detail - 1] = '\0';
    r.detail = detail;
    n = allocations_of(&r);
    printf("# allocations of a %zu-byte line: %zu\n", 2 * sizeof detail, n);
    assert_int_equal(n, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_records_give_jansson_bytes),
        cmocka_unit_test(test_every_short_string),
        cmocka_unit_test(test_rule_cut_inside_a_character),
        cmocka_unit_test(test_event_lines_give_jansson_bytes),
        cmocka_unit_test(test_a_line_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
