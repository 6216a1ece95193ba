/* log_json.c - one JSON object per line (jansson does the escaping), written
 * with a single write(2) so lines from different workers never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "log_json.h"

static void put_time(json_t *o)
{
    struct timespec ts;
    struct tm tm;
    char buf[40];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof buf - n, ".%03ldZ", ts.tv_nsec / 1000000);
    json_object_set_new(o, "time", json_string(buf));
}

static void put_str(json_t *o, const char *key, const char *v)
{
    /* json_string refuses invalid UTF-8; everything logged here is ASCII
     * that the guard validated, or our own text. */
    json_object_set_new(o, key, v ? json_string(v) : json_null());
}

/* "a b c" as ["a","b","c"]; NULL as null. */
static void put_list(json_t *o, const char *key, const char *v)
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

/* o as one compact line (o is released); NULL when out of memory. */
static char *dump(json_t *o)
{
    char *line = o != NULL ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return line;
}

/* Writes line (a NUL-terminated string with room for nothing more) and a
 * newline in one write(2), then frees it. */
static void write_line(int fd, char *line)
{
    if (line == NULL)
        return;
    size_t n = strlen(line);
    line[n] = '\n'; /* replace the NUL: one write, one line */
    ssize_t w = write(fd, line, n + 1);
    (void)w;
    free(line);
}

static void emit(int fd, json_t *o)
{
    write_line(fd, dump(o));
}

void px_log_connection(const px_log_record *r)
{
    json_t *o = json_object();
    if (o == NULL)
        return;
    put_time(o);
    json_object_set_new(o, "event", json_string(r->method ? "request" : "connection"));
    json_object_set_new(o, "conn_id", json_integer((json_int_t)r->conn_id));
    put_str(o, "peer", r->peer);
    if (r->method)
        put_str(o, "method", r->method);
    put_str(o, "tenant", r->tenant);
    put_str(o, "lease", r->lease);
    put_str(o, "list", r->list);
    put_str(o, "host", r->host);
    json_object_set_new(o, "port", r->port ? json_integer(r->port) : json_null());
    put_str(o, "dialed", r->dialed);
    put_list(o, "checked", r->checked);
    json_object_set_new(o, "status", json_integer(r->status));
    /* A forwarded request is allowed whatever status its upstream answered. */
    put_str(o, "verdict", r->status != 0 && r->reason == PH_REASON_ALLOWED ? "allowed" : "refused");
    put_str(o, "reason", r->status == 0 ? NULL : ph_reason_code(r->reason));
    put_str(o, "detail", r->detail);
    if (r->rule_file) {
        char rule[200];
        snprintf(rule, sizeof rule, "%s:%u", r->rule_file, r->rule_line);
        put_str(o, "rule", rule);
    } else {
        put_str(o, "rule", NULL);
    }
    put_str(o, "policy_id", r->policy_id);
    json_object_set_new(o, "bytes_up", json_integer((json_int_t)r->bytes_up));
    json_object_set_new(o, "bytes_down", json_integer((json_int_t)r->bytes_down));
    json_t *tail = json_object();
    if (tail != NULL) {
        put_str(tail, "end", r->end);
        if (r->method == NULL)
            put_str(tail, "sni", r->sni);
    }
    /* duration_s is written here, in microseconds ("%.6f", a JSON number):
     * jansson prints a real with 17 significant digits (0.30000000000000004).
     * Both parts are compact objects: the first's '}' and the second's '{'
     * are where duration_s goes. */
    char *head = dump(o), *rest = dump(tail);
    char *line = NULL;
    if (head != NULL && rest != NULL) {
        size_t n = strlen(head) + strlen(rest) + 64;
        line = malloc(n);
        if (line != NULL)
            snprintf(line, n, "%.*s,\"duration_s\":%.6f,%s", (int)(strlen(head) - 1), head,
                     r->duration_s >= 0 ? r->duration_s : 0.0, rest + 1);
    }
    free(head);
    free(rest);
    write_line(STDOUT_FILENO, line);
}

void px_log_event(const char *level, const char *event, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *o = json_object();
    if (o == NULL)
        return;
    put_time(o);
    put_str(o, "level", level);
    put_str(o, "event", event);
    put_str(o, "message", msg);
    emit(STDERR_FILENO, o);
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
