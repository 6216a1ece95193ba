/* log_json.h - one JSON line per connection (stdout) and per event
 * (stderr). */
#ifndef PX_LOG_JSON_H
#define PX_LOG_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "pinhole/status.h"

typedef struct px_log_record {
    uint64_t conn_id;
    const char *peer;
    const char *tenant, *lease, *list;
    const char *host;
    unsigned port;
    const char *dialed;       /* address:port connected to, or NULL */
    const char *checked;      /* the checked addresses, space-separated, or NULL */
    int status;               /* HTTP status answered */
    ph_reason reason;
    const char *detail;       /* e.g. the denied block; may be NULL */
    const char *rule_file;
    unsigned rule_line;
    const char *policy_id;
    uint64_t bytes_up, bytes_down;
    double duration_s;
    const char *end;          /* why the tunnel ended, or NULL */
    const char *method;       /* a forwarded request's method; NULL for a CONNECT */
    const char *sni;          /* a CONNECT: the server name its ClientHello named, or NULL */
} px_log_record;

/* One JSON line on stdout per connection, or per forwarded request (method
 * set: event "request"), with a single write(2), or, on a thread batching
 * (px_log_batch), in the batch: a connection's line waits for the batch's
 * flush event, a forwarded request's goes at once with the lines before
 * it (its answer follows). A line never waits beyond the loop pass that
 * wrote it, unless a non-blocking stdout is full: what it did not take
 * (the tail of a short write included) stays at the head of the batch for
 * the next write, and a line that does not fit behind it is dropped whole,
 * so no line is ever cut. */
void px_log_connection(const px_log_record *rec);
/* Batches the calling thread's stdout lines: the lines of one pass of its
 * event loop are written with one write(2), at most 4096 bytes (PIPE_BUF:
 * whole among the other threads' writes), a line that does not fit
 * flushing the ones before it; flush is an event of that loop (made with
 * no descriptor and px_log_flush_cb, owned by the caller), made active
 * when the batch stops being empty: it runs after the callbacks already
 * active in that pass (libevent runs a priority's active events in the
 * order they became active; the proxy's loops use one priority, so no
 * extra loop pass or epoll_wait). NULL stops batching. Either way what was batched is written
 * first: call px_log_batch(NULL) before the loop's thread ends and before
 * flush is freed. */
struct event;
void px_log_batch(struct event *flush);
/* The flush event's callback: writes the calling thread's batched lines
 * (one write(2)). */
void px_log_flush_cb(evutil_socket_t fd, short what, void *arg);
/* The line px_log_connection writes for rec, its "time" field time (a
 * NUL-terminated string), newline included, into buf[0..cap): returns the
 * line's length, which may exceed cap (then buf holds a prefix; format
 * again into a buffer that large). Writes no NUL; allocates nothing; rec,
 * time and buf stay the caller's. */
size_t px_log_format_connection(const px_log_record *rec, const char *time, char *buf,
                                size_t cap);
/* The same for an event line of px_log_event, message already formatted. */
size_t px_log_format_event(const char *time, const char *level, const char *event,
                           const char *message, char *buf, size_t cap);
/* A JSON event line ("start", "reload", "warning", ...) on stderr. */
void px_log_event(const char *level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Routes libevent's own messages (its warnings and errors would otherwise
 * go to stderr as plain text) into event lines: event "libevent", level
 * from px_log_libevent_level. Call once, before any event base exists
 * (libevent's rule for event_set_log_callback). */
void px_log_route_libevent(void);
/* EVENT_LOG_DEBUG/MSG/WARN/ERR as "debug", "info", "warning", "error". */
const char *px_log_libevent_level(int severity);

#endif
