/* tools.h - the pinhole-guard subcommands and what they share. */
#ifndef PINHOLE_GUARD_TOOLS_H
#define PINHOLE_GUARD_TOOLS_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

/* Exit statuses (docs/pinhole-guard.md). */
enum {
    EXIT_ALLOWED = 0, /* every verdict allowed / every grant valid */
    EXIT_REFUSED = 1, /* at least one refused / invalid */
    EXIT_USAGE = 2,   /* bad command line, or an input file that cannot be used */
};

int pg_cmd_check(int argc, char **argv);
int pg_cmd_addr(int argc, char **argv);
int pg_cmd_grant(int argc, char **argv);
int pg_cmd_keygen(int argc, char **argv);
int pg_cmd_revoke(int argc, char **argv);

/* Prints "pinhole-guard: <message>\n" on stderr. */
void pg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints obj as one compact JSON line on stdout and releases it. */
void pg_print_json(json_t *obj);

/* Prints s inside double quotes, escaping '"' and '\\' and replacing
 * control and non-ASCII bytes with '?', so one record stays one line. */
void pg_print_quoted(const char *s);

/* Parses a decimal unsigned value in [min, max] (no sign, no junk). */
bool pg_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out);

#endif
