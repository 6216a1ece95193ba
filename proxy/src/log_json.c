/* log_json.c - one JSON object per line, written with a single write(2) so
 * lines from different workers never interleave.
 *
 * A line is formatted straight into a buffer on the stack (a heap buffer of
 * the exact size for a line longer than that): no JSON tree, no allocation
 * for the line of an ordinary connection. The bytes are the ones jansson's
 * json_dumps (JSON_COMPACT | JSON_PRESERVE_ORDER) writes for the same
 * fields, which the proxy's unit test checks against jansson itself on
 * random and hostile strings and fuzz/log_json.c by parsing every line back:
 *   - a string is escaped as jansson escapes it: '"' and '\\' with a
 *     backslash; \b \f \n \r \t; every other byte below 0x20 as \u00XX
 *     (upper-case hex); everything else, U+2028/U+2029 and DEL included,
 *     as it is;
 *   - a string that is not valid UTF-8 (pinhole/utf8.h, the strings jansson
 *     refuses) leaves its field out of the line, and its element out of an
 *     array: what json_object_set_new and json_array_append_new did with
 *     the NULL json_string returned for it;
 *   - integers as json_int_t (%lld), null for an absent string. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "pinhole/utf8.h"

#include "log_json.h"

/* A line being formatted: its first cap bytes go to buf; len counts every
 * byte the line needs, so a line too long for buf is measured (snprintf's
 * contract). */
typedef struct line {
    char *buf;
    size_t cap, len;
} line;

static void put(line *l, const char *s, size_t n)
{
    if (l->len < l->cap) {
        size_t room = l->cap - l->len;
        memcpy(l->buf + l->len, s, n < room ? n : room);
    }
    l->len += n;
}

static void put_lit(line *l, const char *s)
{
    put(l, s, strlen(s));
}

/* v in decimal, as jansson writes a json_int_t. */
static void put_int(line *l, long long v)
{
    char d[24];
    size_t at = sizeof d;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        d[--at] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        d[--at] = '-';
    put(l, d + at, sizeof d - at);
}

/* s[0..n) as a JSON string; s is valid UTF-8. */
static void put_escaped(line *l, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    put(l, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(l, s + run, i - run);
        run = i + 1;
        char e[6] = { '\\', (char)c, 0, 0, 0, 0 };
        size_t en = 2;
        switch (c) {
        case '"': case '\\': break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            en = 6;
        }
        put(l, e, en);
    }
    put(l, s + run, n - run);
    put(l, "\"", 1);
}

/* ,"key": */
static void put_key(line *l, const char *key)
{
    put(l, ",\"", 2);
    put_lit(l, key);
    put(l, "\":", 2);
}

/* Whether s[0..n) is UTF-8: ASCII (one OR over the bytes, which compilers
 * vectorize: most of what is logged) or valid by pinhole/utf8.h. */
static bool is_utf8(const char *s, size_t n)
{
    unsigned char any = 0;
    for (size_t i = 0; i < n; i++)
        any |= (unsigned char)s[i];
    return any < 0x80 || ph_utf8_valid(s, n);
}

/* ,"key":"v" ("key":null for NULL); nothing for a v that is not UTF-8. */
static void put_strn(line *l, const char *key, const char *v, size_t n)
{
    if (v != NULL && !is_utf8(v, n))
        return;
    put_key(l, key);
    if (v == NULL)
        put(l, "null", 4);
    else
        put_escaped(l, v, n);
}

static void put_str(line *l, const char *key, const char *v)
{
    put_strn(l, key, v, v != NULL ? strlen(v) : 0);
}

/* "a b c" as ["a","b","c"]; NULL as null. */
static void put_list(line *l, const char *key, const char *v)
{
    put_key(l, key);
    if (v == NULL) {
        put(l, "null", 4);
        return;
    }
    put(l, "[", 1);
    bool first = true;
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, " ");
        if (is_utf8(p, n)) {
            if (!first)
                put(l, ",", 1);
            first = false;
            put_escaped(l, p, n);
        }
        p += n;
        p += *p == ' ';
    }
    put(l, "]", 1);
}

/* The "time" field's text ("2026-01-31T12:34:56.789Z"), the calendar part
 * formatted once a second per thread. */
#define TIME_MAX 40
static void time_text(char out[static TIME_MAX])
{
    static _Thread_local struct {
        bool set;
        time_t sec;
        size_t len;
        char text[TIME_MAX];
    } cache;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (!cache.set || cache.sec != ts.tv_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        cache.len = strftime(cache.text, sizeof cache.text, "%Y-%m-%dT%H:%M:%S", &tm);
        cache.sec = ts.tv_sec;
        cache.set = true;
    }
    memcpy(out, cache.text, cache.len);
    snprintf(out + cache.len, TIME_MAX - cache.len, ".%03ldZ", ts.tv_nsec / 1000000);
}

size_t px_log_format_connection(const px_log_record *r, const char *time, char *buf, size_t cap)
{
    line l = { buf, cap, 0 };
    put(&l, "{\"time\":", 8);
    put_escaped(&l, time, strlen(time));
    put_str(&l, "event", r->method ? "request" : "connection");
    put_key(&l, "conn_id");
    put_int(&l, (long long)r->conn_id);
    put_str(&l, "peer", r->peer);
    if (r->method)
        put_str(&l, "method", r->method);
    put_str(&l, "tenant", r->tenant);
    put_str(&l, "lease", r->lease);
    put_str(&l, "list", r->list);
    put_str(&l, "host", r->host);
    put_key(&l, "port");
    if (r->port)
        put_int(&l, (long long)r->port);
    else
        put(&l, "null", 4);
    put_str(&l, "dialed", r->dialed);
    put_list(&l, "checked", r->checked);
    put_key(&l, "status");
    put_int(&l, r->status);
    /* A forwarded request is allowed whatever status its upstream answered. */
    put_str(&l, "verdict", r->status != 0 && r->reason == PH_REASON_ALLOWED ? "allowed" : "refused");
    put_str(&l, "reason", r->status == 0 ? NULL : ph_reason_code(r->reason));
    put_str(&l, "detail", r->detail);
    if (r->rule_file) {
        /* "file:line", cut to 199 bytes (a cut inside a character leaves
         * the field out, as for any string that is not UTF-8). */
        char rule[200];
        int n = snprintf(rule, sizeof rule, "%s:%u", r->rule_file, r->rule_line);
        put_strn(&l, "rule", rule, n < 0 ? 0 : (size_t)n < sizeof rule ? (size_t)n : sizeof rule - 1);
    } else {
        put_str(&l, "rule", NULL);
    }
    put_str(&l, "policy_id", r->policy_id);
    put_key(&l, "bytes_up");
    put_int(&l, (long long)r->bytes_up);
    put_key(&l, "bytes_down");
    put_int(&l, (long long)r->bytes_down);
    /* To the microsecond ("%.6f", a JSON number), not the 17 significant
     * digits a double prints with (0.30000000000000004). */
    char d[64];
    int dn = snprintf(d, sizeof d, ",\"duration_s\":%.6f", r->duration_s >= 0 ? r->duration_s : 0.0);
    put(&l, d, dn < 0 ? 0 : (size_t)dn < sizeof d ? (size_t)dn : sizeof d - 1);
    put_str(&l, "end", r->end);
    if (r->method == NULL)
        put_str(&l, "sni", r->sni);
    put(&l, "}\n", 2);
    return l.len;
}

size_t px_log_format_event(const char *time, const char *level, const char *event,
                           const char *message, char *buf, size_t cap)
{
    line l = { buf, cap, 0 };
    put(&l, "{\"time\":", 8);
    put_escaped(&l, time, strlen(time));
    put_str(&l, "level", level);
    put_str(&l, "event", event);
    put_str(&l, "message", message);
    put(&l, "}\n", 2);
    return l.len;
}

/* One line from format at time (called again into a heap buffer of the
 * right size when the stack buffer is too small), with one write(2). */
typedef size_t (*formatter)(const void *arg, const char *time, char *buf, size_t cap);

static void emit_at(int fd, formatter format, const void *arg, const char *time)
{
    char stack[4096];
    char *buf = stack;
    size_t n = format(arg, time, stack, sizeof stack);
    if (n > sizeof stack) {
        buf = malloc(n);
        if (buf == NULL)
            return;
        format(arg, time, buf, n);
    }
    ssize_t w = write(fd, buf, n);
    (void)w;
    if (buf != stack)
        free(buf);
}

static void emit(int fd, formatter format, const void *arg)
{
    char time[TIME_MAX];
    time_text(time);
    emit_at(fd, format, arg, time);
}

static size_t format_connection(const void *arg, const char *time, char *buf, size_t cap)
{
    return px_log_format_connection(arg, time, buf, cap);
}

/* A worker thread's batch (px_log_batch): its stdout lines not written
 * yet, whole and in order. PIPE_BUF bytes at most, so that one write(2) of
 * them to a pipe is never interleaved with another worker's. */
#define BATCH_MAX 4096
static _Thread_local struct {
    struct event *flush; /* NULL: this thread writes each line at once */
    bool armed;          /* flush is active */
    size_t len;
    char buf[BATCH_MAX];
} batch;

/* Writes the batch. What a non-blocking stdout does not take (EAGAIN, or
 * a short write to a stream) stays at the head of the batch for the next
 * flush: dropping the rest of a short write cut a line, and the next write
 * ran another line into it. False when something is left. */
static bool flush(void)
{
    while (batch.len > 0) {
        ssize_t w = write(STDOUT_FILENO, batch.buf, batch.len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            batch.len = 0; /* no reader (EPIPE) or no stdout: the lines are lost */
        if (w <= 0)
            break;
        batch.len -= (size_t)w;
        memmove(batch.buf, batch.buf + w, batch.len);
    }
    return batch.len == 0;
}

void px_log_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    batch.armed = false;
    flush();
}

void px_log_batch(struct event *ev)
{
    if (!flush() && ev == NULL)
        batch.len = 0; /* stdout full at the thread's end: nothing flushes it later */
    batch.flush = ev;
    batch.armed = false;
}

void px_log_connection(const px_log_record *r)
{
    if (batch.flush == NULL) {
        emit(STDOUT_FILENO, format_connection, r);
        return;
    }
    char time[TIME_MAX];
    time_text(time);
    size_t room = sizeof batch.buf - batch.len;
    size_t n = px_log_format_connection(r, time, batch.buf + batch.len, room);
    if (n > room) {
        /* Full: what is there goes now, and the line starts the next batch
         * (beyond a whole batch's room, it goes alone, after it). If
         * stdout cannot take the batch, the line is dropped whole. */
        if (!flush())
            return;
        if (n > sizeof batch.buf) {
            emit_at(STDOUT_FILENO, format_connection, r, time);
            return;
        }
        px_log_format_connection(r, time, batch.buf, sizeof batch.buf);
    }
    batch.len += n;
    if (r->method != NULL) {
        flush(); /* a forwarded request's line precedes its answer */
    } else if (!batch.armed) {
        batch.armed = true;
        event_active(batch.flush, EV_TIMEOUT, 0);
    }
}

typedef struct event_args {
    const char *level, *event, *message;
} event_args;

static size_t format_event(const void *arg, const char *time, char *buf, size_t cap)
{
    const event_args *a = arg;
    return px_log_format_event(time, a->level, a->event, a->message, buf, cap);
}

void px_log_event(const char *level, const char *event, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    event_args a = { level, event, msg };
    emit(STDERR_FILENO, format_event, &a);
}

const char *px_log_libevent_level(int severity)
{
    switch (severity) {
    case EVENT_LOG_DEBUG: return "debug";
    case EVENT_LOG_MSG: return "info";
    case EVENT_LOG_WARN: return "warning";
    default: return "error"; /* EVENT_LOG_ERR, and anything unknown */
    }
}

/* libevent calls this from whichever thread logged, with msg formatted and
 * borrowed for the call; px_log_event copies it into one line. */
static void libevent_log_cb(int severity, const char *msg)
{
    px_log_event(px_log_libevent_level(severity), "libevent", "%s", msg);
}

void px_log_route_libevent(void)
{
    event_set_log_callback(libevent_log_cb);
}
