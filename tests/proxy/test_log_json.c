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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_are_mapped),
        cmocka_unit_test(test_a_libevent_warning_is_one_json_line),
        cmocka_unit_test(test_duration_to_the_microsecond),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
