/* test_log_json.c - the proxy's JSON event lines: libevent's own messages,
 * routed through event_set_log_callback, come out as one JSON line each
 * with the level mapped, not as libevent's plain text on stderr; a
 * connection line's duration_s to the microsecond. */
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "log_json.h"
#include "test_support.h"

static void test_levels_are_mapped(void **state)
{
    (void)state;
    assert_string_equal(px_log_libevent_level(EVENT_LOG_DEBUG), "debug");
    assert_string_equal(px_log_libevent_level(EVENT_LOG_MSG), "info");
    assert_string_equal(px_log_libevent_level(EVENT_LOG_WARN), "warning");
    assert_string_equal(px_log_libevent_level(EVENT_LOG_ERR), "error");
    assert_string_equal(px_log_libevent_level(99), "error");
}

static void never_runs(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Runs fn with fd (stdout or stderr) going to a file; returns what was
 * written there. */
static char *output_of(int target, void (*fn)(void))
{
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/stderr", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    int saved = dup(target);
    assert_true(saved >= 0);
    assert_true(dup2(fd, target) >= 0);
    fn();
    assert_true(dup2(saved, target) >= 0);
    close(saved);
    close(fd);
    size_t len;
    char *out = ph_test_read_file(path, &len);
    assert_non_null(out);
    ph_test_rmtree(dir);
    free(dir);
    return out;
}

/* libevent warns ("event has no event_base set") about an event added
 * without a base: a warning it writes itself, provoked on purpose. */
static void provoke_libevent_warning(void)
{
    struct event *ev = event_new(NULL, -1, 0, never_runs, NULL);
    assert_non_null(ev);
    assert_int_equal(event_add(ev, NULL), -1);
    event_free(ev);
}

/* Two warnings (event_add, then event_free's event_del): two lines, each
 * one JSON object, nothing else on stderr. */
static void test_a_libevent_warning_is_one_json_line(void **state)
{
    (void)state;
    px_log_route_libevent();
    char *out = output_of(STDERR_FILENO, provoke_libevent_warning);
    size_t lines = 0;
    bool saw_add = false;
    for (char *line = out, *nl; *line != '\0'; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl == NULL)
            fail_msg("stderr does not end in a newline: %s", line);
        *nl = '\0';
        lines++;
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        if (o == NULL || !json_is_object(o))
            fail_msg("not a JSON object: %s (%s)", line, err.text);
        assert_string_equal(json_string_value(json_object_get(o, "level")), "warning");
        assert_string_equal(json_string_value(json_object_get(o, "event")), "libevent");
        assert_non_null(json_string_value(json_object_get(o, "time")));
        const char *msg = json_string_value(json_object_get(o, "message"));
        assert_non_null(msg);
        assert_non_null(strstr(msg, "event has no event_base set"));
        saw_add = saw_add || strncmp(msg, "event_add", 9) == 0;
        json_decref(o);
    }
    assert_int_equal(lines, 2);
    assert_true(saw_add);
    free(out);
}

static void log_three_durations(void)
{
    const double d[] = { 0.1 + 0.2, 1234.5678915, 0.00004 };
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) {
        px_log_record r = { .conn_id = 7, .peer = "127.0.0.1:1", .status = 200,
                            .duration_s = d[i], .end = "done", .method = i == 2 ? "GET" : NULL };
        px_log_connection(&r);
    }
}

/* duration_s is written to the microsecond, not with the 17 significant
 * digits a double prints with ("0.30000000000000004"), and the line is
 * still one JSON object, its fields in order, duration_s a number. */
static void test_duration_to_the_microsecond(void **state)
{
    (void)state;
    char *out = output_of(STDOUT_FILENO, log_three_durations);
    static const char *const want[] = { "\"duration_s\":0.300000,\"end\":\"done\",\"sni\":null}",
                                        "\"duration_s\":1234.567892,\"end\":\"done\",\"sni\":null}",
                                        "\"duration_s\":0.000040,\"end\":\"done\"}" };
    const double back[] = { 0.3, 1234.567892, 0.00004 };
    size_t lines = 0;
    for (char *line = out, *nl; *line != '\0'; line = nl + 1, lines++) {
        nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        assert_true(lines < 3);
        if (strstr(line, want[lines]) == NULL)
            fail_msg("line %zu: %s; want it to end in %s", lines, line, want[lines]);
        assert_non_null(strstr(line, "\"bytes_down\":0,\"duration_s\":"));
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        if (o == NULL)
            fail_msg("not JSON: %s (%s)", line, err.text);
        json_t *v = json_object_get(o, "duration_s");
        assert_true(json_is_real(v));
        assert_true(fabs(json_real_value(v) - back[lines]) < 1e-9);
        json_decref(o);
    }
    assert_int_equal(lines, 3);
    free(out);
}

/* ---- the batch of a worker's loop pass (px_log_batch) --------------------
 * stdout is one end of a SOCK_SEQPACKET pair: each write(2) arrives as one
 * message, so the test sees how the lines were written. */

typedef struct batch_case {
    int peer;              /* the pair's other end */
    struct event_base *base;
    int pending_at_flush;  /* messages found while the pass was still running */
} batch_case;

static void log_conn(uint64_t id, const char *method)
{
    px_log_record r = { .conn_id = id, .peer = "127.0.0.1:1", .status = 200, .end = "done",
                        .method = method };
    px_log_connection(&r);
}

/* The next message (one write(2)), or NULL when none is waiting. */
static char *message(int fd)
{
    static char buf[16384];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    if (n < 0) {
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* The conn_id of each line of msg, in order, into ids; returns how many. */
static size_t line_ids(const char *msg, unsigned long long *ids, size_t cap)
{
    size_t k = 0;
    for (const char *p = msg; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        const char *id = strstr(p, "\"conn_id\":");
        assert_true(id != NULL && id < nl);
        assert_true(k < cap);
        ids[k++] = strtoull(id + 10, NULL, 10);
        p = nl + 1;
    }
    return k;
}

/* stdout redirected to fd and batched on a loop of the test's own;
 * batching_end writes what is batched and puts stdout back. */
typedef struct batching {
    int saved;
    struct event_base *base;
    struct event *flush;
} batching;

static void batching_start(batching *t, int fd)
{
    t->saved = dup(STDOUT_FILENO);
    assert_true(t->saved >= 0);
    fflush(stdout);
    assert_int_equal(dup2(fd, STDOUT_FILENO), STDOUT_FILENO);
    t->base = event_base_new();
    assert_non_null(t->base);
    t->flush = event_new(t->base, -1, 0, px_log_flush_cb, NULL);
    assert_non_null(t->flush);
    px_log_batch(t->flush);
}

static void batching_end(batching *t)
{
    px_log_batch(NULL);
    event_free(t->flush);
    event_base_free(t->base);
    assert_int_equal(dup2(t->saved, STDOUT_FILENO), STDOUT_FILENO);
    close(t->saved);
}

/* One pass of t's loop, running cb(arg). */
static void one_pass(batching *t, event_callback_fn cb, void *arg)
{
    struct timeval now = { 0, 0 };
    event_base_once(t->base, -1, EV_TIMEOUT, cb, arg, &now);
    event_base_loop(t->base, EVLOOP_ONCE);
}

/* One loop pass: three connection lines, then a forwarded request's, then
 * two connection lines more. */
static void pass_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    batch_case *b = arg;
    log_conn(1, NULL);
    log_conn(2, NULL);
    log_conn(3, NULL);
    assert_null(message(b->peer)); /* nothing written yet */
    log_conn(4, "GET");            /* goes at once, with the three before it */
    char *m = message(b->peer);
    assert_non_null(m);
    unsigned long long ids[64];
    assert_int_equal(line_ids(m, ids, 64), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(ids[i], (unsigned long long)i + 1);
    log_conn(5, NULL);
    log_conn(6, NULL);
    b->pending_at_flush = message(b->peer) != NULL;
}

/* 40 lines in one pass: more than one batch holds; each write is whole
 * lines of at most 4096 bytes, and the lines come in order. */
static void many_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    for (unsigned i = 0; i < 40; i++)
        log_conn(100 + i, NULL);
}

static void test_a_loop_pass_is_one_write(void **state)
{
    (void)state;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
    batching t;
    batching_start(&t, sp[0]);
    batch_case b = { .peer = sp[1], .base = t.base };

    /* The pass's lines after the forwarded one: one write, at its end. */
    one_pass(&t, pass_cb, &b);
    assert_false(b.pending_at_flush);
    char *m = message(sp[1]);
    assert_non_null(m);
    unsigned long long ids[64];
    assert_int_equal(line_ids(m, ids, 64), 2);
    assert_int_equal(ids[0], 5);
    assert_int_equal(ids[1], 6);
    assert_null(message(sp[1]));

    /* A full batch is written when the next line does not fit. */
    one_pass(&t, many_cb, NULL);
    size_t got = 0, writes = 0;
    while ((m = message(sp[1])) != NULL) {
        writes++;
        assert_true(strlen(m) <= 4096);
        size_t k = line_ids(m, ids, 64);
        for (size_t i = 0; i < k; i++)
            assert_int_equal(ids[i], 100 + got + i);
        got += k;
    }
    assert_int_equal(got, 40);
    assert_true(writes >= 2 && writes < 40);

    /* Batching stopped: what was batched is written first. */
    log_conn(200, NULL);
    assert_null(message(sp[1]));
    px_log_batch(NULL);
    m = message(sp[1]);
    assert_non_null(m);
    assert_int_equal(line_ids(m, ids, 64), 1);
    assert_int_equal(ids[0], 200);
    log_conn(201, NULL); /* at once again */
    assert_non_null(message(sp[1]));

    batching_end(&t);
    close(sp[0]);
    close(sp[1]);
}

/* A line longer than a batch (a hostile detail, host or SNI) keeps its
 * place: the lines before it go first, it goes alone, the ones after it
 * wait for the pass's end. */
static void long_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    batch_case *b = arg;
    static char detail[6000];
    memset(detail, 'd', sizeof detail - 1);
    log_conn(1, NULL);
    log_conn(2, NULL);
    px_log_record r = { .conn_id = 3, .peer = "127.0.0.1:1", .status = 403, .detail = detail };
    px_log_connection(&r);
    log_conn(4, NULL);
    unsigned long long ids[8];
    char *m = message(b->peer);
    assert_non_null(m);
    assert_int_equal(line_ids(m, ids, 8), 2);
    assert_true(ids[0] == 1 && ids[1] == 2);
    m = message(b->peer);
    assert_non_null(m);
    assert_true(strlen(m) > 6000);
    assert_int_equal(line_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 3);
    b->pending_at_flush = message(b->peer) != NULL;
}

/* Five connection lines, ids from *next on (*next moves past them). */
static void five_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    unsigned *next = arg;
    for (unsigned i = 0; i < 5; i++)
        log_conn((*next)++, NULL);
}

static void test_a_long_line_and_a_full_stdout(void **state)
{
    (void)state;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
    batching t;
    batching_start(&t, sp[0]);
    batch_case b = { .peer = sp[1], .base = t.base };
    one_pass(&t, long_cb, &b);
    assert_false(b.pending_at_flush);
    unsigned long long ids[8];
    char *m = message(sp[1]);
    assert_non_null(m);
    assert_int_equal(line_ids(m, ids, 8), 1);
    assert_int_equal(ids[0], 4);
    assert_null(message(sp[1]));

    /* A full non-blocking stdout (a pipe nobody reads): the pass's batch
     * is kept whole, the worker neither blocks nor spins, and once the
     * pipe has room it goes, whole, with the next pass's lines after it. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    assert_int_equal(dup2(p[1], STDOUT_FILENO), STDOUT_FILENO);
    static char fill[4096];
    memset(fill, '\n', sizeof fill);
    while (write(p[1], fill, sizeof fill) > 0)
        ;
    assert_int_equal(errno, EAGAIN);
    unsigned first = 10;
    one_pass(&t, five_cb, &first);
    static char got[1 << 20];
    while (read(p[0], got, sizeof got) > 0)
        ;
    first = 20;
    one_pass(&t, five_cb, &first);
    ssize_t n = read(p[0], got, sizeof got - 1);
    assert_true(n > 0);
    got[n] = '\0';
    unsigned long long all[16];
    assert_int_equal(line_ids(got, all, 16), 10);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(all[i], 10ULL + (unsigned long long)i);
        assert_int_equal(all[5 + i], 20ULL + (unsigned long long)i);
    }

    batching_end(&t);
    close(sp[0]);
    close(sp[1]);
    close(p[0]);
    close(p[1]);
}

/* stdout a non-blocking stream (a TCP socket whose reader is slow, as a
 * log shipper's can be): a write that takes part of a batch must not cut
 * a line. The rest of the batch was dropped and the next write went on
 * from there, so a cut line ran into the next one ("not JSON"). Now the
 * rest stays at the head of the batch and goes first at the next write. */

static void test_a_short_write_does_not_cut_a_line(void **state)
{
    (void)state;
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t sl = sizeof sin;
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int least = 1;
    assert_int_equal(setsockopt(l, SOL_SOCKET, SO_RCVBUF, &least, sizeof least), 0);
    assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &sl), 0);
    int w = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(setsockopt(w, SOL_SOCKET, SO_SNDBUF, &least, sizeof least), 0);
    assert_int_equal(connect(w, (struct sockaddr *)&sin, sizeof sin), 0);
    int r = accept(l, NULL, NULL);
    assert_true(r >= 0);
    close(l);
    assert_int_equal(fcntl(w, F_SETFL, O_NONBLOCK), 0);
    batching t;
    batching_start(&t, w);
    /* Passes of five lines, far more than the socket holds (the reader
     * reads nothing meanwhile). */
    unsigned next = 1;
    for (int i = 0; i < 200; i++) {
        one_pass(&t, five_cb, &next);
    }
    /* The reader catches up, the batch's flush runs meanwhile; the writer
     * is done. */
    static char got[1 << 20];
    size_t used = 0;
    ssize_t n;
    for (int i = 0; i < 100; i++) {
        while ((n = recv(r, got + used, sizeof got - 1 - used, MSG_DONTWAIT)) > 0)
            used += (size_t)n;
        px_log_flush_cb(-1, 0, NULL);
    }
    batching_end(&t);
    assert_int_equal(shutdown(w, SHUT_WR), 0);
    assert_int_equal(fcntl(w, F_SETFL, 0), 0);
    while ((n = recv(r, got + used, sizeof got - 1 - used, 0)) > 0)
        used += (size_t)n;
    got[used] = '\0';
    /* Every line whole and in order (whole lines may be missing). */
    size_t lines = 0;
    unsigned long long last = 0;
    for (char *line = got, *nl; *line != '\0'; line = nl + 1, lines++) {
        nl = strchr(line, '\n');
        if (nl == NULL)
            fail_msg("line %zu cut at the end: %s", lines, line);
        *nl = '\0';
        json_error_t err;
        json_t *o = json_loads(line, 0, &err);
        if (o == NULL)
            fail_msg("line %zu of %u written is not JSON: %.200s", lines, next - 1, line);
        unsigned long long id = (unsigned long long)json_integer_value(json_object_get(o, "conn_id"));
        json_decref(o);
        assert_true(id > last);
        last = id;
    }
    printf("%u lines logged, %zu whole lines read, the last %llu\n", next - 1, lines, last);
    close(w);
    close(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_are_mapped),
        cmocka_unit_test(test_a_libevent_warning_is_one_json_line),
        cmocka_unit_test(test_duration_to_the_microsecond),
        cmocka_unit_test(test_a_loop_pass_is_one_write),
        cmocka_unit_test(test_a_long_line_and_a_full_stdout),
        cmocka_unit_test(test_a_short_write_does_not_cut_a_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
